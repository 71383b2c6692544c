"""Lowerings of ATen's sorting, selection, scatter-reductions, cumulative and histogram
ops."""
from __future__ import annotations
