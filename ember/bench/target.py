"""Where a run measures: the host's CPU, or the NVIDIA GPU of Ember's CUDA backend.

The platform decides the workloads' sizes (on a GPU the CPU's sizes would time launch
overhead, not the card), which floors are measured (the card's own on a GPU) and where
the peers run. OpenCL counts as CPU: Ember reaches it through PoCL on the host.
"""
from __future__ import annotations

GPU_BACKENDS = frozenset({"cuda"})
SIZES = ("quick", "cpu", "gpu")  # the keys of every workload's size table


class NoGpu(Exception):
    """The run was asked for a GPU that this machine does not have."""


def platform(backend: str | None) -> str:
    """"gpu" when the Ember backend measured (by default ``config.backend``) runs on a GPU,
    else "cpu"."""
    if backend is None:
        from ember.config import config

        backend = config.backend
    return "gpu" if backend in GPU_BACKENDS else "cpu"


def sizes(platform: str, quick: bool) -> str:
    """Which row of the size tables a run uses: quick sizes are one smoke test for both."""
    return "quick" if quick else platform


def require_gpu() -> str:
    """The card the run measures, as Ember's CUDA driver wrapper names it; raises ``NoGpu``
    when the wrapper finds none (no cuda-python, no driver, or no device)."""
    from ember.backends.cuda.driver import gpus

    found = gpus()
    if not found:
        raise NoGpu("no CUDA device found (a GPU run needs an NVIDIA GPU, its driver and "
                    "cuda-python); measure another backend, e.g. --backend cpu")
    major, minor = found[0].capability
    return f"{found[0].name} (sm_{major}{minor})"
