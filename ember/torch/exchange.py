"""Tensors across the bridge: torch dtypes as NumPy dtypes, and tensors to and from Ember
arrays over the same memory on the CPU (NumPy's view of a tensor, or DLPack)."""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ember import dtypes
from ember.errors import EmberTypeError

_NUMPY_DTYPES: dict[torch.dtype, np.dtype] = {
    torch.bool: np.dtype(np.bool_),
    torch.uint8: np.dtype(np.uint8),
    torch.int8: np.dtype(np.int8),
    torch.int16: np.dtype(np.int16),
    torch.int32: np.dtype(np.int32),
    torch.int64: np.dtype(np.int64),
    torch.uint16: np.dtype(np.uint16),
    torch.uint32: np.dtype(np.uint32),
    torch.uint64: np.dtype(np.uint64),
    torch.float16: np.dtype(np.float16),
    torch.float32: np.dtype(np.float32),
    torch.float64: np.dtype(np.float64),
    torch.complex64: np.dtype(np.complex64),
    torch.complex128: np.dtype(np.complex128),
}
if dtypes.bfloat16 is not None:  # (ml_dtypes' bfloat16, where that package is installed)
    _NUMPY_DTYPES[torch.bfloat16] = np.dtype(dtypes.bfloat16)
_TORCH_DTYPES = {numpy: torch_dtype for torch_dtype, numpy in _NUMPY_DTYPES.items()}
_BFLOAT16 = _NUMPY_DTYPES.get(torch.bfloat16)  # (None without ml_dtypes)
_SHARED_BY_NUMPY = frozenset(_NUMPY_DTYPES) - {torch.bfloat16}  # (Tensor.numpy() takes these)


def is_supported_dtype(dtype: torch.dtype) -> bool:
    return dtype in _NUMPY_DTYPES


def numpy_dtype(dtype: torch.dtype) -> np.dtype:
    """The NumPy (and so Ember) dtype of a torch dtype."""
    try:
        return _NUMPY_DTYPES[dtype]
    except KeyError:
        raise EmberTypeError(f"Ember's PyTorch bridge does not support {dtype} tensors yet; "
                             f"supported: {', '.join(map(str, _NUMPY_DTYPES))}") from None


def torch_dtype(dtype: Any) -> torch.dtype:
    """The torch dtype of a NumPy (Ember) dtype."""
    return _TORCH_DTYPES[np.dtype(dtype)]


def to_ember(tensor: torch.Tensor) -> Any:
    """A CPU tensor as a NumPy array over the same memory (Ember's jit reads such arrays
    in place, without a copy). ``Tensor.numpy`` shares the memory as DLPack would, at a
    third of its cost per call; bfloat16, a conjugate or negative bit, and tensors on
    other devices take the DLPack path and its errors."""
    if tensor.dtype in _SHARED_BY_NUMPY:
        try:
            return tensor.detach().numpy()
        except (RuntimeError, TypeError):  # (another device, or a conj / neg bit)
            pass
    return _by_dlpack(tensor)


def _by_dlpack(tensor: torch.Tensor) -> Any:
    if tensor.device.type != "cpu":
        raise EmberTypeError(f"Ember's PyTorch bridge runs CPU tensors; got one on "
                             f"{tensor.device}: move it with .cpu() first")
    numpy_dtype(tensor.dtype)  # the error for an unsupported dtype
    if tensor.is_conj() or tensor.is_neg():
        tensor = tensor.resolve_conj().resolve_neg()
    if tensor.dtype == torch.bfloat16:  # (DLPack's bfloat16 is unknown to NumPy: its bits)
        return np.from_dlpack(tensor.detach().view(torch.int16)).view(dtypes.bfloat16)
    return np.from_dlpack(tensor.detach())


def to_torch(array: Any) -> torch.Tensor:
    """An Ember result as a tensor over the same memory where that is writable and
    C-contiguous host memory (PyTorch may update a result in place, e.g. accumulate a
    gradient into it, and takes no negative strides); otherwise over a copy."""
    host = np.asarray(array)
    # (NumPy calls an array C-contiguous whatever the stride of a dim of size 1, which
    # may be negative: a reversed view's)
    if not (host.flags.writeable and host.flags.c_contiguous
            and all(stride >= 0 for stride in host.strides)):
        host = host.copy(order="C")
    return fresh_to_torch(host)


def fresh_to_torch(array: np.ndarray) -> torch.Tensor:
    """A program's fresh result (a writable, C-contiguous NumPy array of its own) as a
    tensor over the same memory, without ``to_torch``'s checks."""
    if array.dtype == _BFLOAT16:
        return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(array)
