"""The bridge's plumbing: ATen's dtype promotion, tensors crossing without a copy, numerical
gradients of compiled graphs, the entry point and the layering."""
from __future__ import annotations

import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch.fx")  # (not "torch": without it, this folder imports as "torch")
import torch
import torch.nn.functional as F

import ember.torch
from ember.backends.cpu import launcher
from ember.torch.exchange import to_ember, to_torch

ROOT = Path(__file__).resolve().parents[2]


def _strict(fn):
    return torch.compile(fn, backend=ember.torch.strict_backend, fullgraph=True, dynamic=False)


@pytest.mark.parametrize("fn, args", [
    (lambda x: x + 1.5, (torch.arange(4),)),                        # int tensor, float number
    (lambda x, y: x / y, (torch.arange(1, 5), torch.arange(2, 6))),  # int / int is float
    (lambda x, y: x * y, (torch.randn(3), torch.tensor(2.0, dtype=torch.float64))),  # 0-d yields
    (lambda x, y: x + y, (torch.arange(3, dtype=torch.int32), torch.tensor(2.5))),  # category
    (lambda x, y: x < y, (torch.arange(3), torch.tensor([0.5, 1.5, 1.0]))),
    (lambda x: torch.div(x, 3, rounding_mode="floor"), (torch.arange(-5, 5),)),
    (lambda x: torch.div(x, 3, rounding_mode="trunc"), (torch.arange(-5, 5),)),
    (lambda x: x.sum(), (torch.arange(6, dtype=torch.int32),)),  # integer sums are int64
    (lambda x: torch.where(x > 0, x, 0.5), (torch.randn(5, dtype=torch.float64),)),
    (lambda x: x.argmax(dim=1), (torch.randn(3, 4),)),
    # (hash_tensor: the XOR of 64-bit patterns, uint64; a float's as float64)
    (lambda x: torch.hash_tensor(x, dim=1, keepdim=True), (torch.randn(3, 4),)),
    (lambda x: torch.hash_tensor(x), (torch.tensor([-1, 2, 3], dtype=torch.int8),)),
    (lambda x: torch.hash_tensor(x, dim=(0, 2)), (torch.randn(2, 3, 4, dtype=torch.float16),)),
    (lambda x: torch.hash_tensor(x, dim=0), (torch.tensor([True, False, True]),)),
])
def test_dtype_promotion_matches_aten(fn, args):
    out, expected = _strict(fn)(*args), fn(*args)
    assert out.dtype == expected.dtype
    torch.testing.assert_close(out, expected)


def test_tensors_cross_without_a_copy():
    tensor = torch.randn(3, 4)
    array = to_ember(tensor)
    assert np.shares_memory(array, tensor.numpy())
    result = ember.jit(lambda a: a * 3)(np.ones((2, 2), np.float32))  # a program's result
    back = to_torch(result)
    assert back.data_ptr() == np.asarray(result).__array_interface__["data"][0]
    back.add_(1)  # results are writable: autograd accumulates gradients into them
    torch.testing.assert_close(back, torch.full((2, 2), 4.0))


def test_a_view_with_a_negative_stride_crosses_as_a_copy():
    # NumPy calls this C-contiguous (its reversed dim has size 1); torch refuses it
    reversed_row = np.arange(4, dtype=np.float32).reshape(1, 4)[::-1]
    assert reversed_row.flags.c_contiguous and reversed_row.strides[0] < 0
    torch.testing.assert_close(to_torch(reversed_row), torch.arange(4.0).reshape(1, 4))


def test_a_singular_matrix_raises_torchs_error_when_the_program_runs():
    inverse = _strict(torch.linalg.inv)  # (its error check is an effect in the graph)
    torch.testing.assert_close(inverse(torch.eye(3) * 2), torch.eye(3) / 2)
    with pytest.raises(torch.linalg.LinAlgError, match="singular"):
        inverse(torch.zeros(3, 3))


def test_compiled_gradients_match_numerical_gradients():
    def f(x, w, q):
        h = F.max_pool2d(torch.tanh(F.conv2d(x, w, padding=1)), 2)
        h = F.layer_norm(h.flatten(2), (h.shape[-1] * h.shape[-2],))
        a = F.scaled_dot_product_attention(q, h, h, is_causal=True)
        return F.gelu(a).sum(dim=-1)

    x = torch.randn(2, 3, 4, 4, dtype=torch.float64, requires_grad=True)
    w = torch.randn(2, 3, 3, 3, dtype=torch.float64, requires_grad=True)
    q = torch.randn(2, 2, 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(ember.torch.compile(f, fallback=False), (x, w, q))


def test_the_entry_point_registers_the_backend_without_importing_ember(tmp_path):
    """An installed package's entry point, as pip writes it from pyproject.toml."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    target = project["project"]["entry-points"]["torch_dynamo_backends"]["ember"]
    info = tmp_path / "ember-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ember\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text(f"[torch_dynamo_backends]\nember = {target}\n")
    script = textwrap.dedent("""
        import sys, torch
        f = torch.compile(lambda x: torch.relu(x) * 2, backend="ember", dynamic=False)
        x = torch.randn(5)
        torch.testing.assert_close(f(x), torch.relu(x) * 2)
        print("ember" in sys.modules)
    """)
    env = {"PYTHONPATH": f"{ROOT}:{tmp_path}", "PATH": "/usr/bin:/bin"}
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=env, cwd=tmp_path, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split()[-1] == "True"  # torch imported Ember through the entry point


def test_import_ember_does_not_import_torch():
    run = subprocess.run([sys.executable, "-c", "import sys, ember, ember.numpy, ember.nn; "
                          "print('torch' in sys.modules)"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == "False"


def test_bench_torch_names_its_models_on_a_wrong_one(capsys):
    from ember.bench.command import main

    with pytest.raises(SystemExit):
        main(["--torch", "--only", "mlp,resnet1000"])
    error = capsys.readouterr().err
    assert "unknown torch model(s) resnet1000" in error and "gpt_block" in error


def test_a_tensor_constant_of_the_graph_reaches_ember():
    # (a tensor made inside the compiled code is a constant of the ATen graph, as the
    # empty KV cache that transformers' GPT-2 concatenates to)
    def fn(x):
        return torch.cat([torch.tensor([[1.0, -2.0]]), x]) * 3

    x = torch.randn(2, 2)
    torch.testing.assert_close(ember.torch.compile(fn, fallback=False)(x), fn(x))


def _graph_call(fn, *args):
    """``fn``'s ATen graph compiled by Ember, called with ``args`` (the outputs as the
    compiled callable returns them, before AOTAutograd's wrappers)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from ember.torch.stages import compile_graph

    return compile_graph(make_fx(fn)(*args))(*args)


def test_an_output_that_is_an_input_is_that_tensor():
    x, y = torch.randn(3), torch.randn(3)
    same, total, none = _graph_call(lambda a, b: (a, a + b, None), x, y)
    assert same is x and none is None
    torch.testing.assert_close(total, x + y)


def test_contiguous_tensors_cross_by_address(monkeypatch):
    # (no NumPy view of each input: a call passes the tensors' addresses; an input that
    # is returned as it is stays that tensor)
    import ember.torch.program_call as program_call

    def no_view(tensor):
        raise AssertionError("a contiguous input took the NumPy path")

    x, w = torch.randn(4, 3), torch.randn(3, 5)
    monkeypatch.setattr(program_call, "to_ember", no_view)
    launcher.launcher()  # (built: the address path needs it)
    same, product, gelu = _graph_call(lambda a, b: (a, a @ b, F.gelu(a)), x, w)
    assert same is x
    torch.testing.assert_close(product, x @ w)
    torch.testing.assert_close(gelu, F.gelu(x))
    product.add_(1.0)  # (results are the program's fresh, writable memory)


def test_a_result_never_shares_an_inputs_memory():
    # (a view of an input comes back from the program as a read-only view of the input's
    # memory: the bridge copies it, as a caller may write to a result in place)
    x = torch.randn(2, 3)
    (flat,) = _graph_call(lambda a: (a.reshape(6),), x)
    flat.add_(1.0)
    assert not np.shares_memory(flat.numpy(), x.numpy())
    torch.testing.assert_close(flat, x.reshape(6) + 1.0)


def test_inputs_of_every_layout_and_dtype_cross():
    # (strided and expanded inputs take a copy on the way in; int64 and bool stay exact)
    x = torch.randn(4, 3).t()  # not contiguous
    e = torch.randn(3, 1).expand(3, 4)  # zero strides
    i = torch.arange(12).reshape(3, 4)
    m = i % 2 == 0
    (out,) = _graph_call(lambda a, b, c, d: (torch.where(d, a * b, c.float()),), x, e, i, m)
    torch.testing.assert_close(out, torch.where(m, x * e, i.float()))



def test_bench_torch_ops_counts_and_names_the_failures(capsys):
    pytest.importorskip("expecttest")  # (PyTorch's OpInfo database needs it)
    from ember.bench.command import main

    # add and sort compile; uniform draws random numbers, which PyTorch cannot compile
    # whole (and has no gradient to check)
    assert main(["--torch-ops", "--ops", "add,sort,uniform", "--backends", "ember",
                 "--reference", "--gradients"]) == 0
    out = capsys.readouterr().out
    assert "ember: forward 2 of 3, gradients 2 of 2" in out
    assert "ember, forward: 1 failed" in out and "  uniform: error: " in out


def test_the_decomposition_table_is_read_once_per_process(monkeypatch):
    """Both graphs of two compiled models share one table (building one costs 45 ms a
    compile), and it decomposes what AOTAutograd needs decomposed (addcmul here)."""
    from ember.torch import decompositions

    built = []
    original = decompositions.core_aten_decompositions
    monkeypatch.setattr(decompositions, "core_aten_decompositions",
                        lambda: built.append(1) or original())
    decompositions.core_aten_table.cache_clear()
    x = torch.randn(4, 3, requires_grad=True)
    for scale in (0.5, 2.0):
        torch._dynamo.reset()
        model = torch.compile(lambda x: torch.addcmul(x, x, x, value=scale).sum(),
                              backend="ember")
        model(x).backward()
    assert built == [1]
    assert torch.ops.aten.addcmul.default in decompositions.core_aten_table()
    np.testing.assert_allclose(x.grad.numpy(), (1 + 2 * 0.5 * x + 1 + 2 * 2.0 * x).detach().numpy(),
                               rtol=1e-5)
