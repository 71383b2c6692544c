"""What the GPU backends (``cuda``, ``opencl``) share: device buffers mirrored on the
host on demand (``buffers.py``), one device program per compiled graph
(``program.py``), the executable that runs it (``executable.py``) and the pipeline's
``GpuTarget`` (``backend.py``). A backend adds its device API (a ``DeviceRuntime``), its
build and load, and its renderer (``ember.codegen.cuda`` / ``ember.codegen.opencl``)."""
