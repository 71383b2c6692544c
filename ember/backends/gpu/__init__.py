"""What the GPU backends (``cuda``, ``opencl``) share: device buffers mirrored on the
host on demand (``buffers.py``), one device program per compiled graph
(``program.py``) and the executable that runs it (``executable.py``). A backend adds
its device API (a ``DeviceRuntime``) and its renderer (``ember.codegen.cuda`` /
``ember.codegen.opencl``)."""
