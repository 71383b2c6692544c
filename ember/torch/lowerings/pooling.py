"""Lowerings of ATen's pooling, sampling and normalization ops beyond the common ones, and
of its copying views."""
from __future__ import annotations
