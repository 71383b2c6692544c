"""Threefry-2x32 known answers, keys, splitting and bits (values recorded from JAX 0.10
with its default partitionable Threefry, so Ember and JAX agree seed for seed)."""
import numpy as np
import pytest

import ember
import ember.numpy as enp
import ember.random as jr
from ember import lax
from ember.errors import EmberTypeError, EmberValueError

# Random123 kat_vectors, threefry2x32 with 20 rounds: (counter, key) -> output.
KNOWN_ANSWERS = [
    ((0x00000000, 0x00000000), (0x00000000, 0x00000000), (0x6B200159, 0x99BA4EFE)),
    ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
    ((0x243F6A88, 0x85A308D3), (0x13198A2E, 0x03707344), (0xC4923A9C, 0x483DF7A0)),
]


@pytest.mark.parametrize("counter,key,expected", KNOWN_ANSWERS)
def test_threefry2x32_known_answers(counter, key, expected):
    words = [np.asarray(v, np.uint32) for v in (*key, *counter)]
    out = lax.threefry2x32(*words)
    assert tuple(int(w) for w in out) == expected


def test_threefry2x32_is_elementwise_and_batches():
    counters = np.array([[0, 0x243F6A88], [0xFFFFFFFF, 0]], np.uint32)
    keys = np.zeros_like(counters)
    out0, out1 = lax.threefry2x32(keys, keys, counters, counters[::-1])
    for i in range(2):
        for j in range(2):
            single = lax.threefry2x32(keys[i, j], keys[i, j], counters[i, j], counters[::-1][i, j])
            assert (int(single[0]), int(single[1])) == (int(out0[i, j]), int(out1[i, j]))
    batched = ember.vmap(lambda c: lax.threefry2x32(keys[0], keys[0], c, c))(counters)
    for row, (a, b) in enumerate(zip(*batched)):
        ref = lax.threefry2x32(keys[0], keys[0], counters[row], counters[row])
        assert a.tolist() == ref[0].tolist() and b.tolist() == ref[1].tolist()


def test_threefry2x32_errors():
    with pytest.raises(EmberTypeError, match="threefry2x32 needs uint32 operands"):
        lax.threefry2x32(*[np.zeros(2, np.int32)] * 4)
    with pytest.raises(EmberValueError, match="threefry2x32 needs operands of one shape"):
        lax.threefry2x32(*[np.zeros(2, np.uint32)] * 3, np.zeros(3, np.uint32))


def test_keys_match_jax():
    assert jr.PRNGKey(42).tolist() == [0, 42]
    assert jr.key(42).dtype == np.uint32
    assert jr.PRNGKey(-1).tolist() == [0, 4294967295]
    assert jr.PRNGKey(2**33 + 5).tolist() == [0, 5]
    assert jr.PRNGKey(np.int32(7)).tolist() == [0, 7]
    key = jr.PRNGKey(0)
    assert jr.split(key).tolist() == [[1797259609, 2579123966], [928981903, 3453687069]]
    assert jr.split(key, 3)[2].tolist() == [4146024105, 2718843009]
    assert jr.split(key, (2, 2)).shape == (2, 2, 2)
    assert jr.fold_in(key, 5).tolist() == [1524306142, 1887795613]
    assert jr.bits(key, (3,)).tolist() == [4070199207, 4202968722, 1427181096]
    assert jr.bits(key, (2, 3), enp.uint8).tolist() == [[167, 146, 40], [53, 183, 67]]
    assert jr.bits(key, (3,), "uint16").tolist() == [20391, 13970, 3624]


def test_64_bit_seeds_and_bits(x64):
    assert jr.PRNGKey(-1).tolist() == [4294967295, 4294967295]
    assert jr.PRNGKey(2**33 + 5).tolist() == [2, 5]
    wide = jr.bits(jr.PRNGKey(0), (2,), "uint64")
    assert wide.dtype == np.uint64


def test_traced_seeds_and_keys_under_jit():
    with ember.config.override(backend="reference"):
        assert ember.jit(jr.PRNGKey)(42).tolist() == [0, 42]
        split = ember.jit(lambda k: jr.split(k, 3))(jr.PRNGKey(0))
        folded = ember.jit(jr.fold_in)(jr.PRNGKey(0), 5)
    assert split.tolist() == jr.split(jr.PRNGKey(0), 3).tolist()
    assert folded.tolist() == [1524306142, 1887795613]


def test_key_data_round_trip():
    key = jr.PRNGKey(3)
    assert jr.wrap_key_data(jr.key_data(key)).tolist() == key.tolist()
    with pytest.raises(EmberTypeError, match="key data must be uint32 with a last axis of 2"):
        jr.wrap_key_data(np.zeros(3, np.uint32))


def test_key_errors_say_what_a_key_is():
    with pytest.raises(EmberTypeError, match=r"split expects a PRNG key: a uint32 array of "
                                             r"shape \(2,\).*got i32\[2\]"):
        jr.split(np.array([0, 1]))
    with pytest.raises(EmberTypeError, match="a batch of keys: map over it with ember.vmap"):
        jr.uniform(jr.split(jr.PRNGKey(0), 4))
    with pytest.raises(EmberTypeError, match="a PRNG seed must be an integer scalar"):
        jr.PRNGKey(1.5)
    with pytest.raises(EmberTypeError, match="bits: dtype must be an unsigned integer dtype"):
        jr.bits(jr.PRNGKey(0), (2,), "int32")
    with pytest.raises(EmberTypeError, match="64-bit random bits need"):
        jr.bits(jr.PRNGKey(0), (2,), "uint64")
    with pytest.raises(EmberTypeError, match="fold_in takes scalar data"):
        jr.fold_in(jr.PRNGKey(0), np.ones(2, np.uint32))
    with pytest.raises(EmberValueError, match="unknown PRNG implementation 'rbg'"):
        jr.key(0, impl="rbg")
