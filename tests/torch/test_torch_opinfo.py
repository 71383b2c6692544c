"""PyTorch's own OpInfo database, a subset of its float32 ops, through
torch.compile(backend=ember.torch.strict_backend, fullgraph=True), forward, against
PyTorch eager.

Each op's first samples, and all the ops, are batched into one program (one compile for
the sweep); only when that program fails to build is each op compiled on its own, to
name the ones that fail. The sweep runs Ember's reference backend: the lowerings are what
it tests, and the native backends are tested against the reference elsewhere.
"""
from __future__ import annotations

import pytest

pytest.importorskip("torch.fx")  # (not "torch": without it, this folder imports as "torch")
import torch
pytest.importorskip("expecttest")  # (op_db needs it)
from torch.testing._internal.common_methods_invocations import op_db
from torch.utils import _pytree as pytree

import ember
import ember.torch

SAMPLES_PER_OP = 3

# ops whose core-ATen decompositions the table covers (narrow is left out: its samples
# take the start from a tensor's value, a data-dependent shape)
SWEPT = {
    "add", "sub", "mul", "true_divide", "pow", "maximum", "minimum", "fmod",
    "remainder", "atan2", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or",
    "logical_xor", "logical_not", "where", "clamp", "neg", "abs", "sign", "floor", "ceil",
    "trunc", "round", "exp", "exp2", "expm1", "log", "log1p", "log2", "log10", "sqrt",
    "rsqrt", "reciprocal", "sin", "cos", "tan", "sinh", "cosh", "tanh", "asin", "acos",
    "atan", "asinh", "acosh", "atanh", "erf", "erfinv", "sigmoid", "nn.functional.relu",
    "nn.functional.gelu", "sum", "mean", "amax", "amin", "prod", "var", "argmax", "argmin",
    "any", "all", "cumsum", "mm", "bmm", "addmm", "matmul", "nn.functional.linear",
    "nn.functional.conv2d", "nn.functional.conv_transpose2d", "nn.functional.conv1d",
    "nn.functional.max_pool2d", "softmax", "log_softmax",
    "nn.functional.layer_norm", "cat", "split", "permute", "reshape", "view", "expand",
    "unsqueeze", "squeeze", "transpose", "t", "flip", "gather", "index_select",
    "masked_fill", "clone", "full_like", "ones_like", "zeros_like", "select", "stack",
    "hstack", "tril", "triu", "lerp", "addcmul", "addcdiv", "square", "nn.functional.silu",
    "nn.functional.softplus", "nn.functional.hardtanh", "nn.functional.leaky_relu",
    "nn.functional.elu", "nn.functional.mse_loss", "nn.functional.cross_entropy",
    "nn.functional.embedding",
    # (widened: ops covered by core-ATen decompositions or lowerings added since)
    "aminmax", "baddbmm", "bool", "broadcast_to", "chunk", "clamp_max", "clamp_min",
    "column_stack", "conj", "contiguous", "count_nonzero", "cumprod", "deg2rad",
    "diag_embed", "dot", "double", "dstack", "einsum", "expand_as", "fill", "flatten",
    "float", "floor_divide", "frac", "half", "heaviside", "index_add", "index_copy",
    "isfinite", "isinf", "isnan", "logaddexp", "logit", "logsumexp", "movedim", "mv",
    "nan_to_num", "new_full", "new_ones", "new_zeros", "nn.functional.batch_norm",
    "nn.functional.binary_cross_entropy_with_logits", "nn.functional.celu",
    "nn.functional.conv3d", "nn.functional.glu", "nn.functional.hardshrink",
    "nn.functional.hardsigmoid", "nn.functional.hardswish", "nn.functional.huber_loss",
    "nn.functional.kl_div", "nn.functional.l1_loss", "nn.functional.logsigmoid",
    "nn.functional.margin_ranking_loss", "nn.functional.max_pool1d", "nn.functional.mish",
    "nn.functional.nll_loss", "nn.functional.pixel_shuffle", "nn.functional.pixel_unshuffle",
    "nn.functional.poisson_nll_loss", "nn.functional.relu6", "nn.functional.selu",
    "nn.functional.smooth_l1_loss", "nn.functional.soft_margin_loss",
    "nn.functional.softshrink", "nn.functional.softsign", "nn.functional.tanhshrink",
    "nn.functional.threshold", "nn.functional.unfold", "outer", "positive", "rad2deg",
    "ravel", "real", "reshape_as", "roll", "rsub", "scatter_add", "sgn", "sinc",
    "squeeze_copy", "std", "take_along_dim", "trapz", "unbind", "unflatten", "view_as",
    "vstack", "xlogy", "zero_",
    "fmax", "fmin", "copysign", "nextafter", "erfc", "lgamma", "digamma", "hypot", "signbit",
}

OPS = [op for op in op_db if op.name in SWEPT and not op.variant_test_name
       and torch.float32 in op.supported_dtypes("cpu")]


class _Case:
    """One op's first samples, as a function of their tensors."""

    def __init__(self, op, requires_grad: bool = False) -> None:
        self.op = op
        samples = list(op.sample_inputs("cpu", torch.float32, requires_grad=requires_grad))
        self.flat = [pytree.tree_flatten((s.input, s.args, s.kwargs))
                     for s in samples[:SAMPLES_PER_OP]]
        self.tensors = [leaf for leaves, _ in self.flat for leaf in leaves
                        if isinstance(leaf, torch.Tensor)]

    def run(self, tensors):
        it = iter(tensors)
        outs = []
        for leaves, spec in self.flat:
            values = [next(it) if isinstance(leaf, torch.Tensor) else leaf for leaf in leaves]
            x, args, kwargs = pytree.tree_unflatten(values, spec)
            outs.append(self.op.op(x, *args, **kwargs))
        return outs


def _on_ember(cases: list[_Case], tensors: list | None = None) -> list:
    """Every case's outputs from one program compiled by Ember (on ``tensors``, by
    default the cases' own)."""
    counts = [len(case.tensors) for case in cases]

    def run_all(*tensors):
        outs, start = [], 0
        for case, count in zip(cases, counts):
            outs.append(case.run(tensors[start:start + count]))
            start += count
        return outs

    torch._dynamo.reset()
    compiled = torch.compile(run_all, backend=ember.torch.strict_backend, fullgraph=True,
                             dynamic=False)
    if tensors is None:
        tensors = [t for case in cases for t in case.tensors]
    with ember.config.override(backend="reference"):
        return compiled(*tensors)


def _mismatch(actual, case: _Case) -> str | None:
    try:
        torch.testing.assert_close(actual, case.run(case.tensors), rtol=1e-5, atol=1e-5,
                                   equal_nan=True)
    except AssertionError as error:
        return str(error).splitlines()[0][:200]
    return None


def _failures(cases: list[_Case]) -> dict[str, str]:
    try:
        results = _on_ember(cases)
    except Exception:  # some op does not build: compile each alone to name it
        results = []
        for case in cases:
            try:
                results.append(_on_ember([case])[0])
            except Exception as error:
                results.append(error)
    failures = {}
    for case, actual in zip(cases, results):
        why = (f"{type(actual).__name__}: {str(actual).splitlines()[:3]}"
               if isinstance(actual, Exception) else _mismatch(actual, case))
        if why is not None:
            failures[case.op.name] = why
    return failures


def test_opinfo_sweep_float32_forward(capsys):
    failures = _failures([_Case(op) for op in OPS])
    with capsys.disabled():
        print(f"\nOpInfo float32 forward: {len(OPS) - len(failures)} of {len(OPS)} ops "
              f"({SAMPLES_PER_OP} samples each) match eager on Ember")
        for name, why in sorted(failures.items()):
            print(f"  {name}: {why}")
    assert len(OPS) == len(SWEPT)  # every op named is in this torch's op_db
    assert not failures, sorted(failures)


# (their backward graphs need ops with no lowering yet: polygamma, _efficientzerotensor)
NO_GRADIENT_LOWERING = {"digamma", "sgn"}
GRADIENT_OPS = [op for op in OPS if op.supports_autograd
                and op.name not in NO_GRADIENT_LOWERING]


def _weighted_sum(outputs) -> torch.Tensor:
    """A loss whose gradient differs per element (a plain sum would make softmax's zero)."""
    total = torch.zeros(())
    for out in pytree.tree_leaves(outputs):
        if isinstance(out, torch.Tensor) and out.requires_grad:
            weights = torch.cos(torch.arange(out.numel(), dtype=out.dtype)).reshape(out.shape)
            total = total + (out * weights).sum()
    return total


def _gradients(cases: list[_Case], on_ember: bool) -> list:
    """Each case's gradients of the weighted sum of its outputs, taken by eager autograd
    over the outputs of the compiled forward (so through Ember's backward graph)."""
    leaves = [t.detach().clone().requires_grad_(t.requires_grad)
              for case in cases for t in case.tensors]
    if on_ember:
        outputs = _on_ember(cases, leaves)
        with ember.config.override(backend="reference"):
            _weighted_sum(outputs).backward()
    else:
        start = 0
        for case in cases:
            _weighted_sum(case.run(leaves[start:start + len(case.tensors)])).backward()
            start += len(case.tensors)
    grads, start = [], 0
    for case in cases:
        grads.append([t.grad for t in leaves[start:start + len(case.tensors)]])
        start += len(case.tensors)
    return grads


def test_opinfo_sweep_float32_gradients(capsys):
    cases = [_Case(op, requires_grad=True) for op in GRADIENT_OPS]
    expected = _gradients(cases, on_ember=False)
    try:
        actual = _gradients(cases, on_ember=True)
    except Exception:  # some op does not build: take each alone to name it
        actual = []
        for case in cases:
            try:
                actual.append(_gradients([case], on_ember=True)[0])
            except Exception as error:
                actual.append(error)
    failures = {}
    for case, got, want in zip(cases, actual, expected):
        if isinstance(got, Exception):
            failures[case.op.name] = f"{type(got).__name__}: {str(got).splitlines()[:3]}"
            continue
        try:
            # (atol 1e-4: layer_norm over one element has a zero gradient, which eager's
            # rounding makes 2.4e-5 through rstd = 1 / sqrt(eps))
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4, equal_nan=True)
        except AssertionError as error:
            failures[case.op.name] = str(error).splitlines()[0][:200]
    with capsys.disabled():
        print(f"\nOpInfo float32 gradients: {len(cases) - len(failures)} of {len(cases)} "
              f"ops ({SAMPLES_PER_OP} samples each) match eager on Ember")
        for name, why in sorted(failures.items()):
            print(f"  {name}: {why}")
    assert not failures, sorted(failures)
