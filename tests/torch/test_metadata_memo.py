"""The memo of what an op's metadata decides: keyed by the op and its arguments'
metadata, Python numbers by type and value, floats by type alone where asked."""
from __future__ import annotations

import pytest

pytest.importorskip("torch.fx")  # (not "torch": without it, this folder imports as "torch")
import torch

from ember.torch import metadata_memo
from ember.torch.metadata_memo import memo

aten = torch.ops.aten


@pytest.fixture(autouse=True)
def _empty_memo():
    metadata_memo.clear()


def _counting():
    calls = []

    def compute():
        calls.append(1)
        return len(calls)
    return calls, compute


def test_a_call_with_the_same_metadata_is_computed_once():
    calls, compute = _counting()
    for values in (torch.zeros(2, 3), torch.ones(2, 3)):  # (values never matter)
        assert memo("m", aten.add.Tensor, (values, 2), {"alpha": 1}, compute) == 1
    assert len(calls) == 1


@pytest.mark.parametrize("other", [
    (torch.zeros(3, 2), 2), (torch.zeros(3, 2).t(), 2), (torch.zeros(2, 3, dtype=torch.int64), 2),
    (torch.zeros(2, 3), 2.0), (torch.zeros(2, 3), True), (torch.zeros(2, 3), 3),
    (torch.zeros(2, 3), [2]), (torch.zeros(2, 3), (2,)),
], ids=["shape", "strides", "dtype", "float", "bool", "value", "list", "tuple"])
def test_other_metadata_is_computed_again(other):
    calls, compute = _counting()
    memo("m", aten.add.Tensor, (torch.zeros(2, 3), 2), {}, compute)
    memo("m", aten.add.Tensor, other, {}, compute)
    assert len(calls) == 2


def test_floats_are_keyed_by_type_only_where_asked():
    calls, compute = _counting()
    for step_size in (0.1, 0.2):
        memo("m", aten.mul.Tensor, (torch.zeros(4), step_size), {}, compute,
             floats_by_type=True)
    assert len(calls) == 1
    for scale in (0.1, 0.2):  # (an upsampling's scale decides its output's shape)
        memo("m", aten.upsample_nearest1d.default, (torch.zeros(1, 1, 4), None, scale), {},
             compute)
    assert len(calls) == 3


def test_an_argument_it_cannot_key_by_is_computed_every_time():
    calls, compute = _counting()
    for _ in range(2):
        memo("m", aten.add.Tensor, (torch.zeros(1), object()), {}, compute)
    assert len(calls) == 2


def test_what_raises_is_not_kept():
    def fails():
        raise ValueError("no metadata")

    with pytest.raises(ValueError):
        memo("m", aten.nonzero.default, (torch.zeros(3),), {}, fails)
    calls, compute = _counting()
    memo("m", aten.nonzero.default, (torch.zeros(3),), {}, compute)
    assert len(calls) == 1
