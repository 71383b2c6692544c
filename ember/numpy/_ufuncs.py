"""Elementwise ember.numpy functions (a first subset; the numpy surface grows here)."""
from __future__ import annotations

from ember import lax
from ember.numpy._promotion import promote_args

__all__ = ["add", "subtract", "multiply", "sin", "exp", "tanh"]


def add(x, y):
    return lax.add(*promote_args(x, y))


def subtract(x, y):
    return lax.sub(*promote_args(x, y))


def multiply(x, y):
    return lax.mul(*promote_args(x, y))


def sin(x):
    return lax.sin(*promote_args(x))


def exp(x):
    return lax.exp(*promote_args(x))


def tanh(x):
    return lax.tanh(*promote_args(x))
