"""What a table of numbers was measured on: without this, a table means nothing."""
from __future__ import annotations

import importlib.metadata
import os
import platform
from datetime import datetime, timezone

PACKAGES = ["ember", "numpy", "jax", "jaxlib", "torch", "scipy-openblas32", "mkl"]
GPU_PACKAGES = ["cuda-python", "nvidia-cublas", "jax-cuda12-plugin", "jax-cuda13-plugin"]

# Variables that change how fast the peers' libraries run.
TUNING_ENV = ["EMBER_NUM_THREADS", "EMBER_BLAS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
              "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "XLA_FLAGS", "CUDA_VISIBLE_DEVICES",
              "NVIDIA_TF32_OVERRIDE", "XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION"]


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def describe(backend: str | None, gpu: str | None = None) -> dict:
    """``gpu``: the card a GPU run measures (None on a CPU run)."""
    packages = PACKAGES + (GPU_PACKAGES if gpu else [])
    return {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "gpu": gpu,
        "versions": {package: _version(package) for package in packages},
        "ember_backend": backend or "default",
        "env": {name: os.environ[name] for name in TUNING_ENV if name in os.environ},
    }
