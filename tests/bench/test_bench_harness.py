"""The `ember bench` harness: structure of its output, its correctness gate, its ratios.

The harness is tested against stand-ins for Ember, injected through ``EmberPeer``'s
``loader`` (the shipped default imports ``ember`` itself): a NumPy-backed namespace that
computes right answers but has no autodiff, and one whose GELU is deliberately wrong.
Real peers (JAX, PyTorch) join wherever they are importable. Nothing here asserts speed.
"""
from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from ember.bench import floors, reference, report, workloads
from ember.bench.command import main
from ember.bench.harness import compare, run_bench, select
from ember.backends.cpu.toolchain import cpu_flags
from ember.bench.peers import EmberPeer, JaxPeer, NumPyPeer, TorchPeer
from ember.runtime.devices import available_backends

HERE = Path(__file__).resolve().parent
MODULE = Path(__file__).stem  # stand-ins are loaded by reference, also in probe processes
HAS_JAX = importlib.util.find_spec("jax") is not None
HAS_TORCH = importlib.util.find_spec("torch") is not None


# --- stand-ins for Ember -----------------------------------------------------------------

def _no_autodiff(fn):
    raise NotImplementedError("the NumPy stand-in has no autodiff")


def numpy_namespace() -> SimpleNamespace:
    """JAX-style namespace over NumPy: right answers for everything but gradients."""
    def gelu(x, approximate=False):
        assert approximate, "the suite uses the tanh approximation"
        return reference.gelu(x)

    def softmax(x, axis=-1):
        assert axis == -1
        return reference.softmax(x)

    def log_softmax(x, axis=-1):
        assert axis == -1
        return reference.log_softmax(x)

    nn = SimpleNamespace(gelu=gelu, softmax=softmax, log_softmax=log_softmax,
                         relu=lambda x: np.maximum(x, 0))
    return SimpleNamespace(numpy=np, nn=nn, jit=lambda fn: fn, grad=_no_autodiff,
                           value_and_grad=_no_autodiff, block_until_ready=lambda tree: tree,
                           device_put=lambda tree: tree)


def wrong_gelu_namespace() -> SimpleNamespace:
    ns = numpy_namespace()
    ns.nn.gelu = lambda x, approximate=False: np.maximum(x, 0)  # relu is not gelu
    return ns


def broken_namespace():
    raise ImportError("ember core is not importable")


def drifting_gelu_namespace() -> SimpleNamespace:
    """Right on the first call, wrong afterwards: as a bad compile-cache entry would be."""
    ns = numpy_namespace()
    calls = []

    def gelu(x, approximate=False):
        calls.append(None)
        return reference.gelu(x) if len(calls) == 1 else reference.gelu(x) + 1.0

    ns.nn.gelu = gelu
    return ns


@pytest.fixture
def loadable_stand_ins(monkeypatch):
    """Lets compile-probe processes import this module by name, as the parent does."""
    monkeypatch.syspath_prepend(str(HERE))


def _stand_in(name: str) -> EmberPeer:
    return EmberPeer(loader=f"{MODULE}:{name}")


def _real_peers() -> list:
    """The peers that are importable here; torch.compile is left out: minutes to compile."""
    return [NumPyPeer()] + ([JaxPeer()] if HAS_JAX else []) + ([TorchPeer(False)] if HAS_TORCH else [])


# --- runs of the harness -----------------------------------------------------------------

def test_quick_run_structure_json_and_table(tmp_path, capsys, loadable_stand_ins):
    json_path = tmp_path / "bench.json"
    peers = [_stand_in("numpy_namespace")] + _real_peers()
    only = ["gelu", "softmax", "layernorm", "mlp_step", "dispatch", "compile_cold"]
    summary = run_bench(None, str(json_path), quick=True, only=only, peers=peers)

    assert json.loads(json_path.read_text()) == json.loads(json.dumps(summary))
    assert set(summary) == {"machine", "settings", "frameworks", "floors", "workloads"}
    assert summary["frameworks"] == [peer.name for peer in peers]
    assert summary["settings"]["sizes"] == "quick"
    assert {"cpu", "cores", "date", "versions"} <= set(summary["machine"])
    assert list(summary["workloads"]) == only
    assert set(summary["floors"]) == {"copy", "sgemm"}  # brought in by gelu and mlp_step
    assert summary["floors"]["copy"]["gb_per_s"] > 0
    assert summary["floors"]["sgemm"]["blas"]["numpy"]["status"] == "ok"
    if "cpu" in available_backends():  # Ember's own GEMM and the FMA probe are built
        assert summary["floors"]["sgemm"]["blas"]["ember_gemm"]["status"] == "ok"
        assert summary["floors"]["sgemm"]["fma_peak"]["gflops"] > 0
        bf16 = summary["floors"]["sgemm"]["bf16"]  # (each checked against float64 products)
        assert bf16["ember_gemm"]["status"] == bf16["ember_gemm_to_bf16"]["status"] == "ok"
        assert bf16["dot_peak"]["status"] == ("ok" if "avx512_bf16" in cpu_flags() else "n/a")
        if not {"amx_tile", "amx_bf16"} <= cpu_flags():  # (with it: "ok" where the OS grants)
            assert bf16["amx_peak"]["status"] == "n/a"

    repeats = summary["settings"]["repeats"]
    for name in ["gelu", "softmax", "layernorm", "dispatch"]:
        entry = summary["workloads"][name]
        ember = entry["frameworks"]["ember"]
        assert ember["status"] == "ok", ember
        assert len(ember["samples_s"]) == repeats
        assert ember["median_s"] > 0
        assert ember["max_rel_error"] <= 1e-6
        numpy_entry = entry["frameworks"]["numpy"]
        assert entry["ratios"]["numpy"] == pytest.approx(numpy_entry["median_s"] / ember["median_s"])
    assert summary["workloads"]["gelu"]["floor"]["time_over_floor"]["ember"] > 0
    assert summary["workloads"]["dispatch"]["unit"] == "us"

    # No autodiff in the stand-in: an ERROR cell, and the run went on.
    for name in ["mlp_step", "compile_cold"]:
        ember = summary["workloads"][name]["frameworks"]["ember"]
        assert ember["status"] == "error"
        assert "no autodiff" in ember["reason"]
        assert summary["workloads"][name]["ratios"]["numpy"] is None
    assert summary["workloads"]["mlp_step"]["frameworks"]["numpy"]["status"] == "ok"
    assert summary["workloads"]["compile_cold"]["frameworks"]["numpy"]["status"] == "n/a"
    for fw in ["jax", "torch"]:
        if fw in summary["frameworks"]:
            assert summary["workloads"]["mlp_step"]["frameworks"][fw]["status"] == "ok"

    table = capsys.readouterr().out
    assert "workload" in table and "ember vs floor" in table
    assert "ERROR: NotImplementedError" in table
    assert "memory copy (np.copyto) of" in table and "SGEMM" in table
    assert summary["machine"]["cpu"] in table
    for name in only:
        assert any(line.startswith(name) for line in table.splitlines())


def test_wrong_answer_is_reported_and_not_timed(capsys):
    summary = run_bench(None, None, quick=True, only=["gelu"],
                        peers=[_stand_in("wrong_gelu_namespace"), NumPyPeer()])
    entry = summary["workloads"]["gelu"]
    ember = entry["frameworks"]["ember"]
    assert ember["status"] == "wrong"
    assert ember["samples_s"] == [] and ember["median_s"] is None
    assert ember["max_rel_error"] > 1e-2
    assert "relative error" in ember["reason"]
    assert entry["ratios"]["numpy"] is None
    assert entry["frameworks"]["numpy"]["status"] == "ok"
    table = capsys.readouterr().out
    gelu_row = next(line for line in table.splitlines() if line.startswith("gelu"))
    assert "WRONG" in gelu_row


def test_answers_are_checked_again_after_timing():
    summary = run_bench(None, None, quick=True, only=["gelu"],
                        peers=[_stand_in("drifting_gelu_namespace")])
    ember = summary["workloads"]["gelu"]["frameworks"]["ember"]
    assert ember["status"] == "wrong" and ember["median_s"] is None
    assert ember["reason"].startswith("last timed call: max relative error")


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
def test_torch_compile_failure_is_skipped_with_its_reason(monkeypatch):
    import torch

    def failing_compile(fn):
        def compiled(*args):
            raise RuntimeError("inductor needs a C++ compiler")
        return compiled

    monkeypatch.setattr(torch, "compile", failing_compile)
    summary = run_bench(None, None, quick=True, only=["dispatch"],
                        peers=[_stand_in("numpy_namespace"), TorchPeer(True)])
    cell = summary["workloads"]["dispatch"]["frameworks"]["torch.compile"]
    assert cell["status"] == "n/a"
    assert cell["reason"] == "skipped: torch.compile failed: RuntimeError: inductor needs a C++ compiler"


def test_missing_frameworks_are_na_and_a_broken_ember_is_an_error(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "jax", None)  # makes `import jax` fail
    monkeypatch.setitem(sys.modules, "torch", None)
    peers = [_stand_in("broken_namespace"), NumPyPeer(), JaxPeer(), TorchPeer(False), TorchPeer(True)]
    summary = run_bench(None, None, quick=True, only=["softmax", "dispatch"], peers=peers)
    for entry in summary["workloads"].values():
        frameworks = entry["frameworks"]
        assert frameworks["ember"]["status"] == "error"
        assert "not importable" in frameworks["ember"]["reason"]
        assert frameworks["numpy"]["status"] == "ok"
        for fw in ["jax", "torch", "torch.compile"]:
            assert frameworks[fw]["status"] == "n/a"
            assert "not installed" in frameworks[fw]["reason"]
    table = capsys.readouterr().out
    assert "jax n/a on all workloads: jax is not installed" in table
    assert "ERROR: ImportError" in table


@pytest.mark.skipif(not HAS_JAX, reason="jax is not installed")
def test_compile_probes_run_in_fresh_processes_and_are_checked():
    """JAX stands in for Ember here: the subprocess path, cold and warm, end to end."""
    peers = [EmberPeer(loader="ember.bench.peers:load_jax"), JaxPeer(), NumPyPeer()]
    summary = run_bench(None, None, quick=True, only=["compile_cold", "compile_warm"], peers=peers)
    for name in ["compile_cold", "compile_warm"]:
        frameworks = summary["workloads"][name]["frameworks"]
        for fw in ["ember", "jax"]:
            assert frameworks[fw]["status"] == "ok", frameworks[fw]
            assert frameworks[fw]["max_rel_error"] <= 1e-4
        assert frameworks["numpy"]["status"] == "n/a"


def test_command_line(tmp_path, capsys):
    assert main(["--list"]) == 0
    listed = capsys.readouterr().out
    for name in ["gelu", "softmax", "layernorm", "mlp_step", "transformer", "dispatch",
                 "compile_cold", "compile_warm", "floor_copy", "floor_sgemm"]:
        assert name in listed
    with pytest.raises(SystemExit):
        main(["--only", "no_such_workload"])
    json_path = tmp_path / "floor.json"
    assert main(["--quick", "--only", "floor_copy", "--json", str(json_path)]) == 0
    assert json.loads(json_path.read_text())["floors"]["copy"]["bytes"] > 0


def test_select_brings_the_floors_a_workload_needs():
    chosen, floor_names = select(["softmax", "transformer"])
    assert [w.name for w in chosen] == ["softmax", "transformer"]
    assert floor_names == {"floor_copy"}
    assert select(["mlp_step"])[1] == {"floor_sgemm"}
    assert select(["floor_sgemm"]) == ([], {"floor_sgemm"})
    with pytest.raises(ValueError, match="unknown"):
        select(["gelu", "nope"])


# --- the correctness check ---------------------------------------------------------------

def test_compare():
    expected = {"a": np.array([1.0, -2.0]), "b": np.array(4.0)}
    assert compare({"b": np.float32(4.0), "a": np.array([1.0, -2.0], np.float32)}, expected) == (0.0, None)
    error, problem = compare({"a": np.array([1.0, -2.2]), "b": np.array(4.0)}, expected)
    assert problem is None and error == pytest.approx(0.2 / 2.0)  # scaled per array
    assert compare({"a": np.array([1.0, np.nan]), "b": np.array(4.0)}, expected)[1] == "['a']: non-finite values"
    assert "shape" in compare({"a": np.array([1.0]), "b": np.array(4.0)}, expected)[1]
    assert "structure" in compare({"a": np.array([1.0, -2.0])}, expected)[1]
    assert compare((np.zeros(2),), (np.zeros(2),)) == (0.0, None)


# --- the ratio arithmetic ----------------------------------------------------------------

def _measured(seconds: float | None, status: str = "ok") -> dict:
    return {"status": status, "median_s": seconds, "samples_s": [seconds] if seconds else [],
            "max_rel_error": 0.0, "reason": None}


@pytest.mark.parametrize("mkl, expected", [
    ({"status": "ok", "gflops": 300.0}, ("mkl", 300.0)),
    ({"status": "ok", "gflops": 150.0}, ("numpy", 250.0)),
    ({"status": "n/a", "reason": "mkl is not installed"}, ("numpy", 250.0))])
def test_sgemm_floor_is_the_best_rate_measured(mkl, expected):
    ok = {"status": "ok", "median_s": 0.01, "samples_s": [0.01]}
    sgemm = {"n": 1024, "flops": 2.0 * 1024**3, "ember_blas": "mkl", "blas": {
        "numpy": {**ok, "gflops": 250.0}, "scipy_openblas32": {**ok, "gflops": 200.0},
        "mkl": mkl}}
    assert floors.sgemm_rate(sgemm) == expected


def test_fma_peak_is_the_sgemm_floor_where_measured():
    ok = {"status": "ok", "median_s": 0.01, "samples_s": [0.01]}
    sgemm = {"n": 1024, "flops": 2.0 * 1024**3, "ember_blas": "ember_gemm", "blas": {
        "numpy": {**ok, "gflops": 250.0}, "ember_gemm": {**ok, "gflops": 400.0}}}
    assert floors.library_rate(sgemm) == ("numpy", 250.0)  # never Ember's own GEMM
    assert floors.sgemm_rate(sgemm) == ("numpy", 250.0)
    sgemm["fma_peak"] = {**ok, "threads": 2, "flops": 1e9, "gflops": 500.0}
    assert floors.sgemm_rate(sgemm) == ("fma_peak", 500.0)
    line = report.floor_line("sgemm", {"status": "ok", **sgemm})
    assert "ember_gemm 400 GFLOP/s" in line and "FMA peak: 500 GFLOP/s on 2 threads" in line
    sgemm["bf16"] = {"dot_peak": {**ok, "gflops": 1000.0}, "amx_peak": {**ok, "gflops": 4000.0},
                     "ember_gemm": {**ok, "gflops": 800.0},
                     "jax_dot": {"status": "n/a", "reason": "jax is not installed"}}
    line = report.floor_line("sgemm", {"status": "ok", **sgemm})
    assert ("bfloat16 GEMM: dot_peak 1000 GFLOP/s, amx_peak 4000 GFLOP/s, ember_gemm 800 GFLOP/s, "
            "jax_dot n/a") in line


def test_ratio_arithmetic_and_table_cells():
    copy = {"status": "ok", "what": "memory copy", "bytes": 64 * 2**20, "traffic_bytes": 128 * 2**20, "median_s": 0.004,
            "samples_s": [0.004], "gb_per_s": 128 * 2**20 / 0.004 / 1e9}
    sgemm = {"status": "ok", "n": 1024, "flops": 2.0 * 1024**3, "blas": {
        "numpy": {"status": "ok", "gflops": 150.0, "median_s": 0.01, "samples_s": [0.01]},
        "scipy_openblas32": {"status": "ok", "gflops": 200.0, "median_s": 0.01, "samples_s": [0.01]},
    }, "ember_blas": "scipy_openblas32"}
    summary = report.build(
        machine={"date": "today", "cpu": "a CPU", "cores": 2, "platform": "p", "python": "3",
                 "versions": {"numpy": "2"}, "ember_backend": "cpu", "env": {}},
        settings={"sizes": "cpu", "repeats": 7, "warmup": 2, "compile_repeats": 3},
        frameworks=["ember", "jax", "torch"],
        floors={"copy": copy, "sgemm": sgemm},
        workloads=[workloads.SOFTMAX, workloads.MLP_STEP, workloads.DISPATCH],
        results={
            # softmax moves 64 MiB (read + write): half the copy's traffic, a 2 ms floor.
            "softmax": {"ember": _measured(0.0026), "jax": _measured(0.0039), "torch": _measured(None, "n/a")},
            # 2 GFLOP at scipy-openblas32's 200 GFLOP/s: a 10 ms floor.
            "mlp_step": {"ember": _measured(0.0125), "jax": _measured(0.010), "torch": _measured(0.025)},
            "dispatch": {"ember": _measured(None, "wrong"), "jax": _measured(9e-6), "torch": _measured(2e-5)},
        },
        floor_work={"softmax": 64 * 2**20, "mlp_step": 2e9, "dispatch": None},
    )
    softmax, mlp, dispatch = (summary["workloads"][n] for n in ["softmax", "mlp_step", "dispatch"])
    assert softmax["ratios"] == {"jax": pytest.approx(1.5), "torch": None}
    assert softmax["floor"]["floor_s"] == pytest.approx(0.002)
    assert softmax["floor"]["time_over_floor"]["ember"] == pytest.approx(1.3)
    assert mlp["ratios"] == {"jax": pytest.approx(0.8), "torch": pytest.approx(2.0)}
    assert mlp["floor"]["blas"] == "scipy_openblas32"
    assert mlp["floor"]["floor_s"] == pytest.approx(0.010)
    assert 1 / mlp["floor"]["time_over_floor"]["ember"] == pytest.approx(0.8)
    assert dispatch["ratios"] == {"jax": None, "torch": None}
    assert dispatch["floor"] is None

    rows = {line.split()[0]: line for line in report.format_table(summary).splitlines() if line}
    assert "2.60" in rows["softmax"] and "3.90 (1.50x)" in rows["softmax"]
    assert "1.30x copy" in rows["softmax"] and "n/a" in rows["softmax"]
    assert "12.5" in rows["mlp_step"] and "10.0 (0.80x)" in rows["mlp_step"]
    assert "25.0 (2.00x)" in rows["mlp_step"] and "80% of SGEMM" in rows["mlp_step"]
    assert "WRONG" in rows["dispatch"] and "9.00" in rows["dispatch"] and "x)" not in rows["dispatch"]


def test_bytes_and_flops_the_floors_scale_by():
    (x,) = workloads.SOFTMAX.inputs("cpu")
    assert workloads.SOFTMAX.floor_work((x,)) == 2 * 32 * 2**20  # 32 MiB in, 32 MiB out
    (x,) = workloads.GELU.inputs("cpu")
    assert workloads.GELU.floor_work((x,)) == 2 * 64 * 2**20  # exactly the copy floor's traffic
    params, x, y = workloads.MLP_STEP.inputs("cpu")
    forward = 2 * 256 * (784 * 1024 + 1024 * 1024 + 1024 * 10)
    assert workloads.MLP_STEP.floor_work((params, x, y)) == 3 * forward - 2 * 256 * 784 * 1024


# --- the oracle --------------------------------------------------------------------------

def _as_float64(tree):
    if isinstance(tree, dict):
        return {k: v.astype(np.float64) for k, v in tree.items()}
    return tree.astype(np.float64)


def _check_gradients(loss, grads, params, args, rng, per_param=3, eps=1e-6):
    """Central differences of ``loss`` at a few entries of every parameter."""
    for name, value in params.items():
        for flat_index in rng.choice(value.size, size=min(per_param, value.size), replace=False):
            index = np.unravel_index(flat_index, value.shape)
            shifted = {k: v.copy() for k, v in params.items()}
            shifted[name][index] += eps
            up = loss(shifted, *args)
            shifted[name][index] -= 2 * eps
            down = loss(shifted, *args)
            numeric = (up - down) / (2 * eps)
            assert math.isclose(grads[name][index], numeric, rel_tol=1e-5, abs_tol=1e-9), (name, index)


def test_reference_transformer_gradients_match_finite_differences():
    params, x = workloads.TRANSFORMER.inputs("quick")
    params, x = _as_float64(params), _as_float64(x)
    loss = workloads.transformer_loss(numpy_namespace())
    grads = reference.transformer_grads(params, x)
    assert set(grads) == set(params)
    _check_gradients(loss, grads, params, (x,), np.random.default_rng(0))


def test_reference_mlp_step_matches_finite_differences():
    params, x, y = (_as_float64(a) for a in workloads.MLP_STEP.inputs("quick"))
    loss = workloads.mlp_loss(numpy_namespace())
    new_params, step_loss = reference.mlp_step(params, x, y)
    assert float(step_loss) == pytest.approx(loss(params, x, y), rel=1e-12)
    grads = {k: (params[k] - new_params[k]) / reference.LEARNING_RATE for k in params}
    _check_gradients(loss, grads, params, (x, y), np.random.default_rng(1))


def test_each_sample_follows_the_pause_and_untimed_calls(monkeypatch):
    """After the settle pause, ``rewarm`` untimed calls, then the timed one; a compile
    sample (a fresh process each) is never re-warmed."""
    from ember.bench import harness
    from ember.bench.peers import Runner

    events = []

    class CountingPeer(NumPyPeer):
        def runner(self, workload, args, sizes, scratch):
            inner = super().runner(workload, args, sizes, scratch)

            def call():
                events.append("call")
                return inner.call()
            return Runner(call, inner.to_numpy)

    monkeypatch.setattr(harness.time, "sleep", lambda seconds: events.append("pause"))
    settings = harness.Settings("quick", warmup=1, repeats=3, compile_repeats=1,
                                settle_s=0.2, rewarm=2)
    (gelu,) = [w for w in workloads.SUITE if w.name == "gelu"]
    results, _ = harness.measure_workload(gelu, [CountingPeer()], settings)
    assert len(results["numpy"].samples_s) == 3
    assert events == ["call"] + ["pause", "call", "call", "call"] * 3

    samples = floors.settled_samples(lambda: (events.append("floor") or 1.0, None), settings)
    assert samples == [1.0] * 3
    assert events[-13:] == ["floor"] + ["pause", "floor", "floor", "floor"] * 3
