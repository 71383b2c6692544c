"""The compiler pipeline of every backend, from a traced Graph to an executable.

- ``pipeline.py``: the stages, listed per backend (``PIPELINES``), and the one driver
  that runs, checks, times and dumps them (``compile_program``); a backend adds only a
  ``Target``: what differs per target.
- ``checks.py``: what is checked after each stage while ``config.verify`` is on.
- ``steps.py``: a schedule lowered to steps (kernels, GEMM plans, host and native calls).
- ``c_module.py``: those steps as one C module with its entry point (the CPU target).
"""
