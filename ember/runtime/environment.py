"""``ember.print_environment_info``: what to paste into a bug report, as JAX's."""
from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import textwrap

import numpy as np


def print_environment_info(return_string: bool = False) -> str | None:
    """Ember's, NumPy's and Python's versions, the default backend's devices, the number
    of processes, the machine, the ``EMBER_*`` environment variables and, where
    ``nvidia-smi`` runs, its report, as ``jax.print_environment_info``: printed, or
    returned when ``return_string``."""
    import ember
    from ember.runtime.devices import default_backend, device_count, local_device_count

    python_version = sys.version.replace("\n", " ")
    backend = default_backend().name
    info = textwrap.dedent(f"""\
        ember:  {ember.__version__}
        numpy:  {np.__version__}
        python: {python_version}
        device info: {backend}-{device_count()}, {local_device_count()} local devices
        process_count: {ember.process_count()}
        platform: {platform.uname()}""")
    for key, value in os.environ.items():
        if key.startswith("EMBER_"):
            info += f"\n{key}={value}"
    nvidia_smi = _nvidia_smi()
    if nvidia_smi:
        info += "\n\n$ nvidia-smi\n" + nvidia_smi
    if return_string:
        return info
    print(info)
    return None


def _nvidia_smi() -> str | None:
    """What ``nvidia-smi`` prints, or None where it is absent or fails."""
    command = shutil.which("nvidia-smi")
    if command is None:
        return None
    try:
        return subprocess.run([command], capture_output=True, text=True, timeout=10,
                              check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
