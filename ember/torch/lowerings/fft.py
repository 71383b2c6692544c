"""Lowerings of ATen's FFTs and complex-number ops."""
from __future__ import annotations
