"""The lazy-tensor device against PyTorch eager: ops recorded and compiled when a value is
needed or at mark_step, an MLP's forward, and a training loop that compiles once."""
from __future__ import annotations

import copy
import inspect

import pytest

pytest.importorskip("torch.fx")  # (not "torch": without it, this folder imports as "torch")
import torch
import torch.nn.functional as F
from torch import nn

import ember.errors
import ember.torch
from ember.bench.torch_resnet import ResNet18
from ember.torch import lazy
from ember.torch.lowerings import LOWERINGS

STEPS = 20


@pytest.fixture(autouse=True)
def _fresh_lazy_device():
    lazy.clear_cache()
    ember.torch.reset_metrics()
    yield
    lazy.mark_step()


def _mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 32), nn.Tanh(),
                         nn.Linear(32, 5))


def test_ops_are_recorded_until_a_value_is_needed():
    x = torch.randn(4, 3)
    y = torch.exp(ember.torch.to_lazy(x)) * 2.0 + 1
    assert isinstance(y, lazy.LazyTensor) and y.shape == (4, 3) and y.dtype == torch.float32
    assert lazy.metrics().executions == 0
    torch.testing.assert_close(y.cpu(), torch.exp(x) * 2.0 + 1)
    assert lazy.metrics().executions == 1 and lazy.metrics().compiles == 1


@pytest.mark.parametrize("materialize", [
    lambda t: t.sum().item(),
    lambda t: t.cpu().sum().item(),
    lambda t: 1.0 if t.sum() > 0 else -1.0,  # a Python if on a value (__bool__)
], ids=["item", "cpu", "bool"])
def test_a_needed_value_runs_the_graph(materialize):
    x = torch.randn(6)
    expected = materialize(torch.sin(x) * 3)
    assert materialize(torch.sin(ember.torch.to_lazy(x)) * 3) == pytest.approx(expected,
                                                                              rel=1e-4)
    assert lazy.metrics().executions >= 1


def test_print_shows_the_value(capsys):
    x = torch.arange(6.0).reshape(2, 3)
    print(ember.torch.to_lazy(x) * 2 - 1)
    assert capsys.readouterr().out == f"LazyTensor({x * 2 - 1!r})\n"
    assert lazy.metrics().executions == 1


def test_inplace_ops_rebind_the_tensor():
    x = torch.randn(5)
    lazy_x = ember.torch.to_lazy(x)
    lazy_x.mul_(2.0).add_(1)
    lazy_x.clamp_(max=1.5)
    torch.testing.assert_close(lazy_x.cpu(), (x * 2.0 + 1).clamp(max=1.5))


def test_mlp_forward_matches_eager():
    model, x = _mlp(), torch.randn(8, 12)
    expected = model(x)
    ember.torch.to_lazy(model)
    assert all(isinstance(p, lazy.LazyTensor) for p in model.parameters())
    torch.testing.assert_close(model(ember.torch.to_lazy(x)).cpu(), expected)
    assert lazy.metrics().compiles == 1 and lazy.metrics().eager_fallbacks == 0


def test_gradients_match_eager():
    model, x = _mlp(), torch.randn(8, 12)
    eager = copy.deepcopy(model)
    eager(x).square().mean().backward()
    ember.torch.to_lazy(model)
    model(ember.torch.to_lazy(x)).square().mean().backward()
    for reference, param in zip(eager.parameters(), model.parameters()):
        assert isinstance(param.grad, lazy.LazyTensor)
        torch.testing.assert_close(param.grad.cpu(), reference.grad, rtol=1e-5, atol=1e-6)


def test_gradient_flows_back_through_cpu():
    x = torch.randn(3, requires_grad=True)
    lazy_x = ember.torch.to_lazy(x.detach()).requires_grad_()
    (lazy_x.exp().cpu() * torch.arange(3.0)).sum().backward()
    torch.testing.assert_close(lazy_x.grad.cpu(), x.detach().exp() * torch.arange(3.0))


def _sgd_train(model: nn.Module, x, y, step=lambda: None) -> list[float]:
    losses = []
    for _ in range(STEPS):
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        with torch.no_grad():
            for param in model.parameters():
                param -= 0.1 * param.grad
                param.grad = None
        step()
        losses.append(loss.item())
    return losses


def test_training_loop_matches_eager_and_compiles_once():
    model, x, y = _mlp(), torch.randn(16, 12), torch.randint(0, 5, (16,))
    eager = copy.deepcopy(model)
    expected_losses = _sgd_train(eager, x, y)
    ember.torch.to_lazy(model)
    losses = _sgd_train(model, ember.torch.to_lazy(x), ember.torch.to_lazy(y),
                        step=ember.torch.mark_step)
    assert losses == pytest.approx(expected_losses, rel=1e-4)
    for reference, param in zip(eager.parameters(), model.parameters()):
        torch.testing.assert_close(param.cpu(), reference.detach(), rtol=1e-4, atol=1e-5)
    metrics = lazy.metrics()
    assert (metrics.compiles, metrics.cache_hits) == (1, STEPS - 1)
    assert metrics.eager_fallbacks == 0


def test_a_new_shape_compiles_and_a_seen_one_hits_the_cache():
    for n in (3, 4, 3, 4):
        x = torch.randn(n)
        torch.testing.assert_close((ember.torch.to_lazy(x) * 2).cpu(), x * 2)
    assert (lazy.metrics().compiles, lazy.metrics().cache_hits) == (2, 2)


def test_a_float_scaling_a_tensor_is_an_input_not_a_constant():
    x = torch.randn(4)
    for scale in (2.0, 3.0, 0.1):
        torch.testing.assert_close((ember.torch.to_lazy(x) * scale / scale ** 2).cpu(),
                                   x * scale / scale ** 2)
    assert (lazy.metrics().compiles, lazy.metrics().cache_hits) == (1, 2)


@pytest.mark.parametrize("dtype", [torch.int64, torch.float64, torch.float32])
def test_a_lifted_float_keeps_atens_dtype_and_precision(dtype):
    x = torch.arange(1, 6, dtype=dtype)
    for scale in (1 / 3, 2.5):
        result = (ember.torch.to_lazy(x) * scale - scale).cpu()
        assert result.dtype == (x * scale).dtype
        # (float64 tight: a float rounded to float32 on the way in would be off by 1e-8)
        tolerance = {"rtol": 1e-15, "atol": 0} if dtype == torch.float64 else {}
        torch.testing.assert_close(result, x * scale - scale, **tolerance)


def test_other_numbers_stay_constants_of_the_graph():
    x, zero_d = torch.randn(4), torch.tensor(1.5)
    for bound in (0.5, 1.0):
        torch.testing.assert_close(ember.torch.to_lazy(x).clamp(max=bound).cpu(),
                                   x.clamp(max=bound))
    for scale in (2.0, 3.0):  # (against a 0-d tensor a float may decide the dtype)
        torch.testing.assert_close((ember.torch.to_lazy(zero_d) * scale).cpu(), zero_d * scale)
    assert lazy.metrics().compiles == 4


class _CNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(8)
        self.head = nn.Linear(8 * 4 * 4, 10)

    def forward(self, x):
        return self.head(F.max_pool2d(F.relu(self.bn(self.conv(x))), 2).flatten(1))


def test_cnn_with_batchnorm_trains_like_eager_and_compiles_once():
    # (batch norm updates its running statistics in place: recorded functionally)
    model, x, y = _CNN(), torch.randn(4, 3, 8, 8), torch.randint(0, 10, (4,))
    eager = copy.deepcopy(model)
    expected_losses = _sgd_train(eager, x, y)
    ember.torch.to_lazy(model)
    losses = _sgd_train(model, ember.torch.to_lazy(x), ember.torch.to_lazy(y),
                        step=ember.torch.mark_step)
    assert losses == pytest.approx(expected_losses, rel=1e-4, abs=1e-6)
    for reference, param in zip(eager.parameters(), model.parameters()):
        torch.testing.assert_close(param.cpu(), reference.detach(), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(model.bn.running_mean.cpu(), eager.bn.running_mean)
    torch.testing.assert_close(model.bn.running_var.cpu(), eager.bn.running_var)
    metrics = lazy.metrics()
    assert (metrics.compiles, metrics.cache_hits, metrics.eager_fallbacks) == (1, STEPS - 1, 0)


def _cross_entropy(x, y):
    return lambda model: F.cross_entropy(model(x), y)


def _adamw_train(model: nn.Module, loss_of, step=lambda: None, steps: int = STEPS
                 ) -> list[float]:
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(steps):
        loss = loss_of(model)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        step()
        losses.append(loss.item())
    return losses


class _CausalAttention(nn.Module):
    """A pre-norm causal self-attention block (scaled_dot_product_attention) and a head."""

    def __init__(self, width: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.norm = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width, bias=False)  # (no key bias: see test_models)
        self.mlp = nn.Sequential(nn.Linear(width, 2 * width), nn.GELU(),
                                 nn.Linear(2 * width, width))
        self.head = nn.Linear(width, 5)

    def forward(self, x):
        batch, length, width = x.shape
        q, k, v = self.qkv(self.norm(x)).split(width, dim=2)
        q, k, v = (t.view(batch, length, self.heads, -1).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + y.transpose(1, 2).reshape(batch, length, width)
        return self.head((x + self.mlp(x)).mean(dim=1))


class _MultiheadAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        # (no bias: the key's cancels in the softmax, as in _CausalAttention)
        self.attention = nn.MultiheadAttention(16, 2, batch_first=True, bias=False)
        self.head = nn.Linear(16, 5)

    def forward(self, x):
        y, _ = self.attention(x, x, x, need_weights=False)
        return self.head(y.mean(dim=1))


class _LSTM(nn.Module):
    # (its cell updates chunks of its gates in place: written through into the gates)
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(8, 16, num_layers=2, batch_first=True)
        self.head = nn.Linear(16, 5)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.head(out[:, -1])


_INPUTS = {_mlp: (16, 12), _CNN: (4, 3, 8, 8), _CausalAttention: (4, 6, 16),
           _MultiheadAttention: (4, 5, 16), _LSTM: (3, 4, 8)}


def _batch(make_model) -> tuple[torch.Tensor, torch.Tensor]:
    """Random inputs of ``make_model``'s shape, and labels of its 5 classes."""
    x = torch.randn(_INPUTS[make_model])
    return x, torch.randint(0, 5, (x.shape[0],))


def _trained_like_eager(model: nn.Module, x, y, step=lambda: None) -> tuple:
    """``model`` trained by AdamW on the lazy device, a copy of it trained in eager
    PyTorch, and the lazy losses, checked against eager's."""
    eager = copy.deepcopy(model)
    expected_losses = _adamw_train(eager, _cross_entropy(x, y))
    ember.torch.to_lazy(model)
    losses = _adamw_train(model, _cross_entropy(ember.torch.to_lazy(x), ember.torch.to_lazy(y)),
                          step=step)
    assert losses == pytest.approx(expected_losses, rel=1e-4, abs=1e-5)
    return model, eager, losses


@pytest.mark.parametrize("make_model", list(_INPUTS),
                         ids=["mlp", "cnn", "attention", "multihead-attention", "lstm"])
def test_torch_optim_adamw_trains_like_eager_and_compiles_once(make_model):
    # (AdamW's step size and bias corrections are new Python floats every step, and its
    # first step creates the state with zeros_like: neither makes a new graph)
    model, eager, losses = _trained_like_eager(make_model(), *_batch(make_model),
                                               step=ember.torch.mark_step)
    assert losses[-1] < 0.5 * losses[0]
    for (name, param), reference in zip(model.state_dict().items(), eager.state_dict().values()):
        torch.testing.assert_close(param.cpu(), reference, rtol=1e-4, atol=1e-4, msg=name)
    metrics = lazy.metrics()
    assert (metrics.compiles, metrics.cache_hits, metrics.eager_fallbacks) == (1, STEPS - 1, 0)


def test_a_step_recorded_again_runs_no_meta_kernel(monkeypatch):
    # (the outputs' metadata of an op on the same shapes comes from the memo)
    model = ember.torch.to_lazy(_CNN())
    x, y = map(ember.torch.to_lazy, _batch(_CNN))
    calls = []
    run_meta_kernel = lazy._run_meta_kernel
    monkeypatch.setattr(lazy, "_run_meta_kernel", lambda *a: calls.append(a[0])
                        or run_meta_kernel(*a))
    _adamw_train(model, _cross_entropy(x, y), step=ember.torch.mark_step, steps=1)
    assert calls
    calls.clear()
    _adamw_train(model, _cross_entropy(x, y), step=ember.torch.mark_step, steps=2)
    assert calls == []


@pytest.mark.parametrize("make_model", [_mlp, _CNN], ids=["mlp", "cnn"])
def test_a_loop_that_reads_its_loss_compiles_once_without_mark_step(make_model):
    # (loss.item() runs every live pending value, the updated parameters, optimizer state
    # and batch statistics included, so each step starts from concrete values)
    _trained_like_eager(make_model(), *_batch(make_model))
    metrics = lazy.metrics()
    assert (metrics.compiles, metrics.cache_hits, metrics.executions) == (1, STEPS - 1, STEPS)


def test_resnet18_computes_eager_gradients_then_trains_with_one_compile():
    # (as its torch.compile test: the first step against eager's, then a loop that
    # learns; eager's own convolution paths part within three steps on 4 images)
    torch.manual_seed(0)
    x, y = torch.randn(4, 3, 32, 32), torch.randint(0, 10, (4,))
    model = ResNet18()
    eager = copy.deepcopy(model)
    ember.torch.to_lazy(model)
    lazy_x, lazy_y = ember.torch.to_lazy(x), ember.torch.to_lazy(y)
    loss = F.cross_entropy(model(lazy_x), lazy_y)
    loss.backward()
    expected = F.cross_entropy(eager(x), y)
    expected.backward()
    torch.testing.assert_close(loss.cpu(), expected.detach(), rtol=1e-5, atol=1e-6)
    for (name, value), reference in zip(model.named_parameters(), eager.parameters()):
        torch.testing.assert_close(value.grad.cpu(), reference.grad, rtol=0, msg=name,
                                   atol=1e-3 * reference.grad.abs().max().item())
    for (name, value), reference in zip(model.named_buffers(), eager.buffers()):
        torch.testing.assert_close(value.cpu(), reference, rtol=1e-4, atol=1e-5, msg=name)
    model.zero_grad()
    ember.torch.reset_metrics()
    losses = _adamw_train(model, _cross_entropy(lazy_x, lazy_y), step=ember.torch.mark_step)
    assert losses[-1] < 0.5 * losses[0]
    metrics = lazy.metrics()
    assert (metrics.compiles, metrics.cache_hits, metrics.eager_fallbacks) == (1, STEPS - 1, 0)


class _TiedLanguageModel(nn.Module):
    """An embedding whose weight is also the output layer's, as GPT-2 ties them."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(11, 8)
        self.out = nn.Linear(8, 11, bias=False)
        self.out.weight = self.embed.weight

    def forward(self, ids):
        return self.out(torch.tanh(self.embed(ids))).flatten(0, 1)


def test_a_tied_weight_stays_one_parameter_and_gets_both_gradients():
    model = _TiedLanguageModel()
    eager = copy.deepcopy(model)
    ember.torch.to_lazy(model)
    assert model.out.weight is model.embed.weight
    assert len(list(model.parameters())) == 1
    ids, targets = torch.randint(0, 11, (2, 5)), torch.randint(0, 11, (10,))
    F.cross_entropy(model(ember.torch.to_lazy(ids)), ember.torch.to_lazy(targets)).backward()
    F.cross_entropy(eager(ids), targets).backward()
    torch.testing.assert_close(model.embed.weight.grad.cpu(), eager.embed.weight.grad)


def test_huggingface_gpt2_with_a_tiny_config_trains_like_eager():
    # (its output layer shares the token embedding's weight)
    transformers = pytest.importorskip("transformers")
    from tests.torch.test_torch_models import HuggingFaceGPT2

    torch.manual_seed(0)
    model = HuggingFaceGPT2(transformers)
    ids = torch.randint(0, 64, (2, 9))
    x, y = ids[:, :-1], ids[:, 1:].flatten()
    _, _, losses = _trained_like_eager(model, x, y, step=ember.torch.mark_step)
    assert losses[-1] < 0.5 * losses[0]
    metrics = lazy.metrics()
    assert (metrics.compiles, metrics.cache_hits, metrics.eager_fallbacks) == (1, STEPS - 1, 0)


def test_autocast_to_bfloat16_trains_like_eager():
    model = _mlp()
    x, y = torch.randn(16, 12), torch.randint(0, 5, (16,))
    eager = copy.deepcopy(model)

    def loss_of(x, y):
        def loss(model):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                return F.cross_entropy(model(x), y)
        return loss

    expected_losses = _adamw_train(eager, loss_of(x, y), steps=5)
    ember.torch.to_lazy(model)
    losses = _adamw_train(model, loss_of(ember.torch.to_lazy(x), ember.torch.to_lazy(y)),
                          step=ember.torch.mark_step, steps=5)
    assert losses == pytest.approx(expected_losses, rel=2e-3)  # (bfloat16's precision)
    metrics = lazy.metrics()
    assert (metrics.compiles, metrics.eager_fallbacks) == (1, 0)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits, expected = model(ember.torch.to_lazy(x)), eager(x)
    assert logits.dtype == expected.dtype == torch.bfloat16
    torch.testing.assert_close(logits.cpu(), expected, rtol=2e-2, atol=2e-2)


def test_an_inplace_update_of_a_tensor_off_the_device_says_how_to_fix_it():
    bn = nn.BatchNorm1d(3)  # (its running statistics stay plain tensors)
    bn.weight = nn.Parameter(ember.torch.to_lazy(bn.weight.detach()))
    with pytest.raises(ember.errors.EmberTypeError, match="to_lazy"):
        bn(ember.torch.to_lazy(torch.randn(4, 3)))


def test_metrics_name_the_line_that_forced_a_value():
    lazy_x = ember.torch.to_lazy(torch.randn(3)) * 2
    line = inspect.currentframe().f_lineno + 1
    lazy_x.sum().item()
    assert lazy.metrics().forced_by == [f"{__file__}:{line}"]
    (lazy_x + 1).sum()
    ember.torch.mark_step()  # (a step's end forces nothing: it is the expected sync)
    assert len(lazy.metrics().forced_by) == 1


def test_an_op_run_eagerly_materializes_its_inputs_as_one_graph():
    x = torch.randn(5)
    a, b = ember.torch.to_lazy(x) * 2, ember.torch.to_lazy(x) + x
    line = inspect.currentframe().f_lineno + 1
    same = torch.equal(a, b)  # (both pending: one graph runs for the two)
    assert same == torch.equal(x * 2, x + x)
    assert lazy.metrics().forced_by == [f"{__file__}:{line}"]
    assert lazy.metrics().executions == 1


def test_reading_gradients_one_by_one_runs_one_graph():
    model = _mlp()
    lazy_model = ember.torch.to_lazy(copy.deepcopy(model))
    x = torch.randn(8, 12)
    model(x).square().mean().backward()
    lazy_model(ember.torch.to_lazy(x)).square().mean().backward()
    for param, lazy_param in zip(model.parameters(), lazy_model.parameters()):
        torch.testing.assert_close(lazy_param.grad.cpu(), param.grad)
    # (the first read ran every live pending value, so the backward ran once, not once
    # per gradient with its shared part compiled each time)
    assert (lazy.metrics().compiles, lazy.metrics().executions) == (1, 1)


def _updates_through_views(x):
    row = x[1]  # (a view made before its base changes: it sees the changes)
    x[0] = 1.0
    x.t().mul_(2)
    x[:, 1:].add_(1)
    first, second = x.split(1)
    second.sigmoid_()
    x.view(3, 2)[2].neg_()
    x.unsqueeze(0).permute(2, 0, 1)[1].sub_(3)
    return x, row, first


def test_an_inplace_update_of_a_view_reaches_its_base_and_its_other_views():
    x = torch.randn(2, 3)
    expected = _updates_through_views(x.clone())
    results = _updates_through_views(ember.torch.to_lazy(x))
    for result, reference in zip(results, expected):
        torch.testing.assert_close(result.cpu(), reference)
    assert lazy.metrics().eager_fallbacks == 0


def test_an_inplace_update_of_another_view_is_an_error_not_a_wrong_value():
    lazy_x = ember.torch.to_lazy(torch.zeros(3, 3))
    with pytest.raises(ember.errors.EmberTypeError, match="diagonal"):
        lazy_x.diagonal().mul_(2)


def test_to_lazy_takes_the_lazy_device():
    x = torch.randn(2)
    torch.testing.assert_close(ember.torch.to_lazy(x, lazy.device()).cpu(), x)
    with pytest.raises(TypeError, match="lazy.device"):
        ember.torch.to_lazy(x, torch.device("cpu"))


def test_an_inplace_update_of_a_detached_alias_reaches_its_source():
    x = torch.randn(3)
    lazy_x = ember.torch.to_lazy(x)
    alias = lazy_x.detach()
    alias.mul_(2)
    torch.testing.assert_close(lazy_x.cpu(), x * 2)
    torch.testing.assert_close(alias.cpu(), x * 2)


# --- ops whose output shape depends on values: the graph runs, Ember's lowering computes them

def _expect_like_eager(result, expected) -> None:
    if isinstance(expected, torch.Tensor):
        assert isinstance(result, lazy.LazyTensor)
        torch.testing.assert_close(result.cpu(), expected)
        return
    assert len(result) == len(expected)
    for lazy_part, eager_part in zip(result, expected):
        _expect_like_eager(lazy_part, eager_part)


def _spy_on_lowerings(monkeypatch) -> list:
    """The ops with a value-dependent shape that Ember's lowerings compute, as called."""
    called = []

    def spy(func, lowering):
        return lambda *args, **kwargs: called.append(func) or lowering(*args, **kwargs)

    for func, lowering in list(LOWERINGS.items()):
        if isinstance(func, torch._ops.OpOverload) and torch.Tag.dynamic_output_shape in func.tags:
            monkeypatch.setitem(LOWERINGS, func, spy(func, lowering))
    return called


@pytest.mark.parametrize("op", [
    lambda t: torch.nonzero(t * 2),
    lambda t: torch.nonzero(t - 1, as_tuple=True),
    lambda t: torch.argwhere(t.reshape(2, 3)),
    lambda t: torch.unique(t + 0, return_inverse=True, return_counts=True),
    lambda t: torch.unique(t.reshape(3, 2).abs(), dim=0, return_inverse=True),
    lambda t: torch.unique_consecutive(t * 1, return_inverse=True, return_counts=True),
    lambda t: torch.masked_select(t, t > 0),
], ids=["nonzero", "nonzero-tuple", "argwhere", "unique", "unique-dim", "unique-consecutive",
        "masked-select"])
def test_an_op_whose_shape_depends_on_values_matches_eager(op, monkeypatch):
    x = torch.tensor([0.0, 1, 2, 0, -2, 1])
    expected = op(x)
    lowered = _spy_on_lowerings(monkeypatch)
    _expect_like_eager(op(ember.torch.to_lazy(x)), expected)
    assert lowered and lazy.metrics().eager_fallbacks == 0


def test_a_boolean_mask_index_matches_eager_and_later_ops_record_on_its_result(monkeypatch):
    x = torch.randn(4, 5)
    lowered = _spy_on_lowerings(monkeypatch)

    def masked(t):
        rows = t[t.sum(dim=1) > 0]  # (a mask computed in the same graph)
        return t[t > 0].exp().sum() + rows[:, torch.tensor([True, False, True, False, True])]

    expected = masked(x)
    result = masked(ember.torch.to_lazy(x))
    assert isinstance(result, lazy.LazyTensor) and result._value.data is None
    torch.testing.assert_close(result.cpu(), expected)
    assert lowered.count(torch.ops.aten.index.Tensor) == 3
    assert lazy.metrics().eager_fallbacks == 0


def test_a_masked_loss_trains_like_eager():
    # (the backward of x[mask] puts the gradient back by the mask: aten.index_put with a
    # boolean mask, recorded with static shapes; the graph after the mask compiles once
    # per count of True values)
    torch.manual_seed(0)
    model, x = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3)), torch.randn(16, 4)
    eager = copy.deepcopy(model)

    def masked_loss(x):
        def loss_of(model):
            y = model(x)
            return y[y > 0].mean()
        return loss_of

    expected_losses = _adamw_train(eager, masked_loss(x), steps=5)
    ember.torch.to_lazy(model)
    losses = _adamw_train(model, masked_loss(ember.torch.to_lazy(x)), ember.torch.mark_step,
                          steps=5)
    assert losses == pytest.approx(expected_losses, rel=1e-4)
    for reference, param in zip(eager.parameters(), model.parameters()):
        torch.testing.assert_close(param.cpu(), reference.detach(), rtol=1e-4, atol=1e-5)
    assert lazy.metrics().eager_fallbacks == 0


def test_metrics_name_the_line_and_the_op_whose_shape_depends_on_values():
    lazy_x = ember.torch.to_lazy(torch.tensor([0.0, 3, 0, 1])) * 2
    line = inspect.currentframe().f_lineno + 1
    indices = torch.nonzero(lazy_x)
    assert lazy.metrics().forced_by == [
        f"{__file__}:{line}: aten.nonzero: output shape depends on values"]
    torch.nonzero(indices)  # (its input is concrete: nothing is forced)
    assert len(lazy.metrics().forced_by) == 1


def test_a_data_dependent_op_that_fails_names_the_op_and_the_line():
    lazy_x = ember.torch.to_lazy(torch.tensor([1, -2, 3]))
    line = inspect.currentframe().f_lineno + 2
    with pytest.raises(ember.errors.EmberTypeError, match=rf"aten.bincount.*:{line}: .*negative"):
        torch.bincount(lazy_x * 1)


def test_a_data_dependent_op_sees_a_view_of_an_updated_base():
    base = ember.torch.to_lazy(torch.zeros(2, 3))
    row = base[1]
    base.add_(torch.tensor([[0.0, 1.0, 0.0], [2.0, 0.0, 3.0]]).to(base.device) * 1)
    torch.testing.assert_close(torch.nonzero(row).cpu(), torch.tensor([[0], [2]]))
