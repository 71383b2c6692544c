"""Host-side I/O, text forms, print options and einsum_path against NumPy."""

import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember.errors import EmberTypeError


def test_save_load_round_trip(tmp_path):
    x = enp.arange(6.0).reshape(2, 3)
    enp.save(tmp_path / "x.npy", x)
    loaded = enp.load(tmp_path / "x.npy")
    assert isinstance(loaded, ember.Array)
    np.testing.assert_array_equal(np.asarray(loaded), np.asarray(x))
    enp.savez(tmp_path / "both.npz", x, y=enp.ones(2, enp.int32))
    with enp.load(tmp_path / "both.npz") as archive:
        np.testing.assert_array_equal(archive["arr_0"], np.asarray(x))
        assert archive["y"].dtype == np.int32


def test_from_buffers_strings_files_and_iterables(tmp_path):
    data = np.arange(4, dtype=np.float64)
    out = enp.frombuffer(data.tobytes())
    assert out.dtype == np.float32  # float64 narrows without x64, as JAX
    np.testing.assert_array_equal(np.asarray(out), data)
    np.testing.assert_array_equal(np.asarray(enp.fromstring("1 2 3", dtype=int, sep=" ")),
                                  [1, 2, 3])
    data.tofile(tmp_path / "raw.bin")
    np.testing.assert_array_equal(np.asarray(enp.fromfile(tmp_path / "raw.bin")), data)
    np.testing.assert_array_equal(np.asarray(enp.fromiter(range(3), np.int32)), [0, 1, 2])
    with pytest.raises(EmberTypeError, match="frombuffer: .*float99"):
        enp.frombuffer(b"1234", dtype="float99")


def test_text_forms_and_print_options():
    x = enp.linspace(0, 1, 3)
    assert enp.array_repr(x) == np.array_repr(np.asarray(x))
    assert enp.array_str(x, precision=2) == np.array_str(np.asarray(x), precision=2)
    with enp.printoptions(precision=2):
        assert enp.get_printoptions()["precision"] == 2
        assert "0.33]" in repr(enp.asarray([1 / 3]))  # Ember arrays print by these options
    assert enp.get_printoptions()["precision"] == np.get_printoptions()["precision"]


def test_einsum_path_matches_numpy():
    a, b, c = np.ones((2, 3)), np.ones((3, 4)), np.ones((4, 5))
    ours = enp.einsum_path("ij,jk,kl->il", a, enp.asarray(b), c, optimize="greedy")
    theirs = np.einsum_path("ij,jk,kl->il", a, b, c, optimize="greedy")
    assert ours[0] == theirs[0] and ours[1] == theirs[1]
