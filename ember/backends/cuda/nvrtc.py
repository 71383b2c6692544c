"""CUDA C -> PTX and cubin with NVRTC (``cuda.bindings.nvrtc`` and the
``nvidia-cuda-nvrtc`` wheel's library), through the persistent compile cache, keyed
per GPU architecture. No GPU is needed to compile."""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from ember.errors import BackendUnavailableError
from ember.runtime.compile_cache import default_cache

DEFAULT_ARCH = "sm_90"  # H200 / H100: the target when no GPU says otherwise
OPTIONS = ("-std=c++17",)
_CACHE_FORMAT = "ember-nvrtc/1"  # bump when the way programs are compiled changes


@dataclass(frozen=True)
class CompiledCuda:
    arch: str  # 'sm_90' (cubin) or 'compute_90' (PTX only, for the driver to JIT)
    ptx: str
    cubin: bytes  # empty for a 'compute_' target

    @property
    def image(self) -> bytes:
        """What the driver loads: the cubin, else the PTX (NUL-terminated)."""
        return self.cubin or self.ptx.encode() + b"\0"


def _nvrtc():
    try:
        from cuda.bindings import nvrtc
    except ImportError as error:
        raise BackendUnavailableError(
            "the CUDA backend needs NVRTC: pip install 'cuda-python>=13' 'nvidia-cuda-nvrtc>=13' "
            "(or pip install 'ember[cuda]')") from error
    return nvrtc


@functools.cache
def nvrtc_version() -> str | None:
    """NVRTC's version ('13.5'), or None when NVRTC cannot be loaded."""
    try:
        major, minor = _call(_nvrtc().nvrtcVersion())
    except (BackendUnavailableError, RuntimeError, OSError):
        return None
    return f"{major}.{minor}"


@functools.cache
def supported_archs() -> tuple[int, ...]:
    return tuple(int(a) for a in _call(_nvrtc().nvrtcGetSupportedArchs())[0])


def arch_for(major: int, minor: int) -> str:
    """The real architecture when NVRTC knows it, else PTX of the newest one it knows
    (the driver compiles that for the newer GPU)."""
    capability = 10 * major + minor
    if capability in supported_archs():
        return f"sm_{capability}"
    return f"compute_{max(a for a in supported_archs() if a <= capability)}"


def compile_cuda(source: str, name: str, arch: str = DEFAULT_ARCH) -> CompiledCuda:
    """PTX (and for an ``sm_`` arch the cubin) of ``source``, from the cache when present."""
    key = [_CACHE_FORMAT, source, arch, nvrtc_version() or "?", " ".join(OPTIONS)]
    fresh: dict[str, Any] = {}

    def build(suffix: str):
        def write(output) -> None:
            if not fresh:
                fresh.update(zip(("ptx", "cubin"), _compile(source, name, arch)))
            output.write_bytes(fresh[suffix])
        return write

    cache = default_cache()
    ptx = cache.get_or_build(key, ".ptx", build("ptx")).read_bytes()
    cubin = cache.get_or_build(key, ".cubin", build("cubin")).read_bytes() \
        if arch.startswith("sm_") else b""
    return CompiledCuda(arch, ptx.decode(), cubin)


def command(name: str, arch: str = DEFAULT_ARCH) -> str:
    """What ``compile_cuda`` asks of NVRTC, as one line (NVRTC is a library: no process)."""
    return " ".join(["nvrtcCompileProgram", f"{name}.cu", *_options(arch)])


def _options(arch: str) -> list[str]:
    return [f"--gpu-architecture={arch}", *OPTIONS]


def _compile(source: str, name: str, arch: str) -> tuple[bytes, bytes]:
    nvrtc = _nvrtc()
    program = _call(nvrtc.nvrtcCreateProgram(source.encode(), f"{name}.cu".encode(), 0, [], []))[0]
    try:
        options = [o.encode() for o in _options(arch)]
        result = nvrtc.nvrtcCompileProgram(program, len(options), options)[0]
        if result != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise default_cache().rejected(
                f"NVRTC rejected the generated program {name!r} for {arch}", source, name,
                ".cu", f"options: {b' '.join(options).decode()}", _log(nvrtc, program))
        ptx = _read(nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX, program)
        cubin = _read(nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN, program) \
            if arch.startswith("sm_") else b""
        return ptx.rstrip(b"\0"), cubin
    finally:
        nvrtc.nvrtcDestroyProgram(program)


def _read(size_of, get, program) -> bytes:
    size = _call(size_of(program))[0]
    data = b" " * size
    _call(get(program, data))
    return data


def _log(nvrtc, program) -> str:
    return _read(nvrtc.nvrtcGetProgramLogSize, nvrtc.nvrtcGetProgramLog,
                 program).rstrip(b"\0").decode(errors="replace")


def _call(result: tuple) -> tuple:
    """The values of an NVRTC call, whose first element is its status."""
    status, *values = result
    if int(status) != 0:
        raise RuntimeError(f"NVRTC call failed: {status!r}")
    return tuple(values)
