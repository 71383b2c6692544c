"""The DLPack capsules of the CUDA backend, checked on host memory with NumPy as the
other side (the layout and ownership rules do not depend on the device type)."""
from __future__ import annotations

import ctypes
import gc

import numpy as np
import pytest

from ember.backends import dlpack_capsule as dlpack
from ember.errors import EmberTypeError


class Producer:
    def __init__(self, array: np.ndarray) -> None:
        self.array = array

    def __dlpack__(self, stream=None, **unused):
        return dlpack.export_capsule(self.array.ctypes.data, self.array.shape, self.array.dtype,
                                     dlpack.KDL_CPU, 0, owner=self.array)

    def __dlpack_device__(self):
        return (dlpack.KDL_CPU, 0)


@pytest.mark.parametrize("dtype", ["float32", "float16", "int8", "uint64", "bool"])
def test_numpy_reads_an_exported_capsule_without_a_copy(dtype):
    array = (np.arange(12) % 3).astype(dtype).reshape(3, 4)
    seen = np.from_dlpack(Producer(array))
    assert seen.dtype == array.dtype and seen.shape == (3, 4)
    assert seen.ctypes.data == array.ctypes.data
    np.testing.assert_array_equal(seen, array)


def test_the_owner_lives_until_the_consumer_is_done():
    array = np.arange(5.0)
    seen = np.from_dlpack(Producer(array))
    del array
    gc.collect()
    assert len(dlpack._live) == 1
    np.testing.assert_array_equal(seen, np.arange(5.0))
    del seen
    gc.collect()
    assert dlpack._live == {}


def test_an_unconsumed_capsule_releases_its_owner():
    capsule = Producer(np.zeros(3)).__dlpack__()
    assert len(dlpack._live) == 1
    del capsule
    gc.collect()
    assert dlpack._live == {}


def test_importing_a_numpy_capsule_gives_its_memory():
    array = np.arange(6, dtype=np.int32).reshape(2, 3)
    imported = dlpack.import_capsule(array.__dlpack__())
    assert imported.pointer == array.ctypes.data
    assert (imported.shape, imported.dtype, imported.device) == ((2, 3), array.dtype, (1, 0))
    assert ctypes.c_int32.from_address(imported.pointer + 4 * 5).value == 5
    with pytest.raises(EmberTypeError, match="not an unused"):
        dlpack.import_capsule(imported.capsule)


def test_a_strided_tensor_is_refused():
    with pytest.raises(EmberTypeError, match="not C-contiguous"):
        dlpack.import_capsule(np.arange(12.0).reshape(3, 4)[:, ::2].__dlpack__())
