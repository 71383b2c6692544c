import numpy as np

from ember.core.abstract import ShapedArray


def test_size_and_nbytes_of_every_rank():
    assert (ShapedArray((), np.float32).size, ShapedArray((), np.float32).nbytes) == (1, 4)
    assert ShapedArray((2, 0, 3), np.int8).size == 0
    wide = ShapedArray((np.int64(3), 5), np.float64)
    assert (wide.size, wide.nbytes) == (15, 120) and type(wide.size) is int
    assert ShapedArray((1 << 20, 1 << 12), np.uint8).nbytes == 1 << 32
