"""Ops whose output shapes depend on values (nonzero, unique, boolean masks, a narrow by a
tensor's value) through torch.compile(backend="ember", fullgraph=True) against eager:
Ember compiles the ops around each such op as programs for the shapes they get, and runs
the op itself between them with its eager ops."""
from __future__ import annotations

import pytest

pytest.importorskip("torch.fx")  # (not "torch": without it, this folder imports as "torch")
import torch

import ember.torch
from ember.errors import EmberTypeError
from ember.torch.metrics import metrics, reset_metrics

NAN = float("nan")


def _compiled(function):
    return torch.compile(function, backend=ember.torch.strict_backend, fullgraph=True,
                         dynamic=False)


def _check(function, *inputs) -> None:
    torch.testing.assert_close(_compiled(function)(*inputs), function(*inputs), equal_nan=True)


def test_nonzero_between_two_programs_compiles_each_once_per_shape(programs):
    def function(x):
        return torch.nonzero(x.sin() > 0).sum(0) * 2 + x.shape[0]

    compiled = _compiled(function)
    reset_metrics()
    x = torch.tensor([0.5, -1.0, 2.0, -3.0])
    torch.testing.assert_close(compiled(x), function(x))
    assert metrics().graph_compiles == 2  # (the sine and test; the sum after nonzero)
    compiled(-x)  # (two nonzeros again: both programs' shapes seen)
    assert metrics().graph_compiles == 2
    y = torch.tensor([0.5, 1.0, 2.0, -3.0])
    torch.testing.assert_close(compiled(y), function(y))  # (three: the second, again)
    assert metrics().graph_compiles == 3
    assert len(programs) == 3


@pytest.mark.parametrize("x", [torch.tensor([3.0, 1.0, 3.0, NAN, 2.0, NAN]),
                               torch.zeros(0), torch.tensor([[1.0, 2.0], [1.0, 2.0]])])
def test_unique_with_inverse_and_counts(x):
    _check(lambda t: torch.unique(t * 2, return_inverse=True, return_counts=True), x)
    _check(lambda t: torch.unique(t, sorted=False), x)


def test_unique_along_a_dim():
    x = torch.tensor([[1.0, 2.0, 1.0, 0.0], [3.0, 4.0, 3.0, 0.0]])
    _check(lambda t: torch.unique(t, dim=1, return_inverse=True, return_counts=True), x)


@pytest.mark.parametrize("dim", [None, 0, 1])
def test_unique_consecutive_keeps_nans_apart(dim):
    x = torch.tensor([[1.0, 1.0, NAN, NAN, 2.0], [1.0, 1.0, NAN, NAN, 2.0],
                      [0.0, 1.0, 1.0, 1.0, 2.0]])
    _check(lambda t: torch.unique_consecutive(t, return_inverse=True, return_counts=True,
                                              dim=dim), x)


def test_bincount_and_repeat_interleave_by_a_tensor():
    counts = torch.tensor([1, 3, 3, 0])
    _check(lambda x: torch.bincount(x) * 2, counts)
    _check(lambda x, w: torch.bincount(x, w, minlength=7) + 1, counts,
           torch.tensor([0.5, 1.0, 1.0, 2.0]))
    _check(lambda x: torch.bincount(x), torch.zeros(0, dtype=torch.int64))
    _check(lambda x, r: torch.repeat_interleave(x * 2, r, dim=0), torch.randn(3, 2),
           torch.tensor([2, 0, 3]))


def test_a_boolean_mask_forward_and_backward():
    def function(x):
        return (x[x > 0].exp() * 2).sum() + x.square().sum()

    x = torch.randn(4, 5, requires_grad=True)
    compiled_loss = _compiled(function)(x)
    (compiled_grad,) = torch.autograd.grad(compiled_loss, x)
    eager_loss = function(x)
    (eager_grad,) = torch.autograd.grad(eager_loss, x)
    torch.testing.assert_close(compiled_loss, eager_loss)
    torch.testing.assert_close(compiled_grad, eager_grad)


def test_a_narrow_by_a_tensor_value_returns_a_view_of_the_input():
    x = torch.arange(60.0).reshape(3, 4, 5)
    compiled = _compiled(lambda t, start: torch.narrow(t, 1, start, 2))
    for start in (0, 2, 1):
        out = compiled(x, torch.tensor(start))
        torch.testing.assert_close(out, x[:, start:start + 2])
        assert out.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()


def test_an_item_in_a_size_and_the_checks_pytorch_puts_on_it():
    def function(x, n):
        return x[:n.item()] * 3

    compiled = _compiled(function)
    x = torch.arange(6.0)
    torch.testing.assert_close(compiled(x, torch.tensor(4)), x[:4] * 3)
    torch.testing.assert_close(compiled(x, torch.tensor(2)), x[:2] * 3)


def test_a_failing_lowering_in_an_eager_step_names_the_op(monkeypatch):
    from ember.torch.lowerings import LOWERINGS

    def broken(x):
        raise ValueError("no")

    monkeypatch.setitem(LOWERINGS, torch.ops.aten.nonzero.default, broken)
    with pytest.raises(EmberTypeError, match="aten.nonzero.default.*ValueError: no"):
        _compiled(lambda t: torch.nonzero(t) + 1)(torch.ones(3))


def test_symbolic_sizes_and_a_data_dependent_op_together():
    def function(x):
        positive = torch.nonzero(x > 0)
        return positive.sum() + x.shape[0] * x.sum(), torch.unique(x.round(), return_counts=True)[1]

    compiled = torch.compile(function, backend=ember.torch.strict_backend, fullgraph=True,
                             dynamic=True)
    for size in (5, 9, 17, 5):
        x = torch.randn(size)
        torch.testing.assert_close(compiled(x), function(x))
