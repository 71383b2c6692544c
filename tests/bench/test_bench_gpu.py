"""`ember bench --backend cuda` without a GPU: everything about a GPU run that the CPU can
check. The sizes per platform, the peers' placement (PyTorch and JAX on the CPU device
here), the card's floors over a host-memory stand-in for the CUDA driver and cuBLAS,
the table with GPU floors, and the clean stop where there is no GPU. Nothing here has
run on a GPU, and nothing asserts speed.
"""
from __future__ import annotations

import ctypes
import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

import ember
from ember.backends.cuda import cublas, driver
from ember.backends.cuda.nvrtc import nvrtc_version
from ember.bench import floors, gpu_floors, harness, peers, report, target, workloads
from ember.bench.command import main
from ember.bench.harness import Settings, run_bench
from ember.bench.peers import EmberPeer, JaxPeer, TorchPeer, Unavailable, default_peers

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "backends" / "cuda"))
from test_cuda_driver_plumbing import fake_gpu  # noqa: E402,F401  (fixture)

MODULE = "test_bench_harness"  # its stand-ins for Ember, loaded by reference
HAS_JAX = importlib.util.find_spec("jax") is not None
HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_nvrtc = pytest.mark.skipif(nvrtc_version() is None, reason="NVRTC is not installed")
QUICK = Settings.for_run("gpu", quick=True)


@pytest.fixture(autouse=True)
def _stand_ins_importable(monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parent))


# --- where a run measures, and at which sizes --------------------------------------------

def test_the_platform_follows_the_backend():
    assert target.platform("cuda") == "gpu"
    for backend in ["cpu", "opencl", "reference"]:
        assert target.platform(backend) == "cpu"
    with ember.config.override(backend="cuda"):
        assert target.platform(None) == "gpu"
    with ember.config.override(backend=None):
        assert target.platform(None) == "cpu"
    assert target.sizes("gpu", quick=True) == "quick" and target.sizes("gpu", False) == "gpu"
    assert [Settings.for_run(p, False).sizes for p in ["cpu", "gpu"]] == ["cpu", "gpu"]


DESCRIPTIONS = {  # the CPU's are the ones the CPU targets were stated for: unchanged
    "cpu": ["tanh-GELU on 16M float32", "softmax over rows of 8192x1024 float32",
            "layernorm over rows of 8192x1024 float32",
            "MLP 784-1024-1024-10 SGD train step, batch 256",
            "transformer block fwd+bwd: d_model 512, 8 heads, seq 256, batch 8, causal"],
    "gpu": ["tanh-GELU on 128M float32", "softmax over rows of 65536x1024 float32",
            "layernorm over rows of 65536x1024 float32",
            "MLP 784-1024-1024-10 SGD train step, batch 32768",
            "transformer block fwd+bwd: d_model 512, 8 heads, seq 256, batch 64, causal"],
}


@pytest.mark.parametrize("sizes", ["cpu", "gpu"])
def test_descriptions_name_the_sizes_run(sizes):
    timed = [workloads.GELU, workloads.SOFTMAX, workloads.LAYERNORM, workloads.MLP_STEP,
             workloads.TRANSFORMER]
    assert [w.describe(sizes) for w in timed] == DESCRIPTIONS[sizes]
    assert workloads.COMPILE_COLD.describe(sizes) == workloads.COMPILE_COLD.description


def test_gpu_sizes_scale_the_batches_of_the_matmul_workloads():
    cpu_params, cpu_x, _ = workloads.MLP_STEP.inputs("cpu")
    gpu_params, gpu_x, gpu_y = workloads.MLP_STEP.inputs("gpu")
    assert {k: v.shape for k, v in gpu_params.items()} == {k: v.shape for k, v in cpu_params.items()}
    assert gpu_x.shape == (32768, 784) and gpu_y.shape == (32768, 10)
    assert workloads.MLP_STEP.floor_work((gpu_params, gpu_x, gpu_y)) == \
        128 * workloads.MLP_STEP.floor_work((cpu_params, cpu_x, None))
    _, x = workloads.TRANSFORMER.inputs("gpu")
    assert x.shape == (64, 256, 512) and x.dtype == np.float32


# --- the peers on the run's device -------------------------------------------------------

def test_default_peers_follow_the_platform():
    gpu = default_peers("cuda")
    assert [p.name for p in gpu] == ["ember", "jax", "torch", "torch.compile"]  # no NumPy
    assert [p.device for p in gpu[2:]] == ["cuda", "cuda"]
    assert gpu[1].loader == "ember.bench.peers:load_jax_gpu" and gpu[0].backend == "cuda"
    cpu = default_peers("cpu")
    assert [p.name for p in cpu] == ["ember", "numpy", "jax", "torch", "torch.compile"]
    assert [p.device for p in cpu[3:]] == ["cpu", "cpu"]


def test_a_sample_waits_for_its_last_result_before_the_clock_stops():
    events = []

    def fn(x):
        events.append("call")
        return x

    sample = peers.timed_calls(fn, (1,), lambda out: events.append(f"wait {out}"), calls=3)
    seconds, out = sample()
    assert events == ["call", "call", "call", "wait 1"] and out == 1 and seconds >= 0


def _gelu_runner(peer):
    args = workloads.GELU.inputs("quick")
    return peer.runner(workloads.GELU, args, "quick", Path(".")), args


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
def test_torch_runs_on_the_device_it_is_given():
    runner, (x,) = _gelu_runner(TorchPeer(compiled=False, device="cpu"))
    _, out = runner.call()
    np.testing.assert_allclose(runner.to_numpy(out), workloads.reference.gelu(x), rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
def test_torch_without_a_cuda_device_is_unavailable():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    with pytest.raises(Unavailable, match="sees no CUDA device"):
        _gelu_runner(TorchPeer(compiled=True, device="cuda"))


@pytest.mark.skipif(not HAS_JAX, reason="jax is not installed")
def test_jax_places_the_inputs_on_its_device():
    import jax

    ns = peers.load_jax()
    placed = ns.device_put({"w": np.ones((2, 3), np.float32), "b": np.zeros(3, np.float32)})
    assert {leaf.devices().pop() for leaf in jax.tree_util.tree_leaves(placed)} == {jax.devices("cpu")[0]}
    runner, (x,) = _gelu_runner(JaxPeer("cpu"))
    np.testing.assert_allclose(runner.to_numpy(runner.call()[1]), workloads.reference.gelu(x),
                               rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(not HAS_JAX, reason="jax is not installed")
def test_jax_without_a_gpu_is_unavailable(monkeypatch):
    import jax

    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    monkeypatch.setenv("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    precision = jax.config.jax_default_matmul_precision
    with pytest.raises(Unavailable, match="jax has no gpu device"):
        _gelu_runner(JaxPeer("gpu"))
    assert jax.config.jax_default_matmul_precision == precision  # set only on a GPU


# --- no GPU: one clear message, nothing measured ------------------------------------------

def test_without_a_gpu_a_gpu_run_stops_at_once(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(driver, "gpus", lambda: ())
    monkeypatch.setattr(harness, "_measure_floor", lambda *args: pytest.fail("measured a floor"))
    json_path = tmp_path / "bench.json"
    assert main(["--backend", "cuda", "--quick", "--json", str(json_path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and not json_path.exists()
    assert captured.err.strip().splitlines()[-1].startswith("ember bench: no CUDA device found")
    assert main(["--backend", "cuda", "--list"]) == 0  # listing needs no GPU
    assert "tanh-GELU on 128M float32" in capsys.readouterr().out


# --- the card's floors, over a host-memory stand-in ---------------------------------------

class FakeGemmEx:
    """``cublasGemmEx`` as cuBLAS documents it (column-major, no transposes) over the fake
    driver's host memory; bfloat16 converted by ml_dtypes, not by the code under test."""

    def __init__(self, transposes: bool = False) -> None:
        self.calls = 0
        self.transposes = transposes  # a broken library: its result transposed

    def cublasCreate_v2(self, handle):
        ctypes.cast(handle, ctypes.POINTER(ctypes.c_void_p))[0] = 0x1234
        return 0

    def cublasSetStream_v2(self, handle, stream):
        return 0

    def cublasGemmEx(self, handle, transa, transb, m, n, k, alpha, a, a_type, lda, b, b_type,
                     ldb, beta, c, c_type, ldc, compute, algo):
        import ml_dtypes

        assert (transa, transb, compute, algo) == (0, 0, 68, -1) and a_type == b_type == c_type
        assert (alpha._obj.value, beta._obj.value) == (1.0, 0.0)
        self.calls += 1
        dtype = {0: np.dtype(np.float32), 14: np.dtype(ml_dtypes.bfloat16)}[a_type]

        def column_major(pointer, rows, cols, ld):
            raw = (ctypes.c_char * (ld * cols * dtype.itemsize)).from_address(pointer.value)
            return np.frombuffer(raw, dtype).reshape(cols, ld)[:, :rows].T

        product = (column_major(a, m, k, lda).astype(np.float32)
                   @ column_major(b, k, n, ldb).astype(np.float32))
        out = column_major(c, m, n, ldc)
        out[...] = (product.T if self.transposes else product).astype(dtype)
        return 0


@pytest.fixture
def card(fake_gpu, monkeypatch):  # noqa: F811
    """The fake driver, copying device to device, with the stand-in cuBLAS."""
    def copy(dst, src, nbytes, stream):
        fake_gpu.copies += 1
        ctypes.memmove(dst, src, nbytes)
        return (0,)

    fake_gpu.copies = 0
    fake_gpu.cuMemcpyDtoDAsync = copy
    library = FakeGemmEx()
    monkeypatch.setattr(cublas, "load_library", lambda: library)
    fake_gpu.cublas = library
    return fake_gpu


@needs_nvrtc
def test_copy_floor_copies_on_the_card_and_counts_read_plus_write(card):
    copy = gpu_floors.measure_copy(QUICK)
    assert copy["status"] == "ok" and copy["what"].startswith("device-to-device copy")
    assert copy["bytes"] == gpu_floors.COPY_BYTES["quick"] and copy["traffic_bytes"] == 2 * copy["bytes"]
    assert len(copy["samples_s"]) == QUICK.repeats
    assert card.copies == (QUICK.warmup + QUICK.repeats) * gpu_floors.COPY_CALLS


@needs_nvrtc
def test_gemm_floor_measures_float32_and_bfloat16_through_cublas(card):
    gemm = gpu_floors.measure_gemm(QUICK)
    n = gpu_floors.GEMM_N["quick"]
    assert (gemm["status"], gemm["n"], gemm["flops"], gemm["ember_blas"]) == ("ok", n, 2.0 * n**3, "cublas")
    assert list(gemm["blas"]) == ["cublas"]  # the float32 rate: the SGEMM floor
    for entry in (gemm["blas"]["cublas"], gemm["bf16"]):
        assert entry["status"] == "ok", entry
        assert len(entry["samples_s"]) == QUICK.repeats and entry["gflops"] > 0
    assert card.cublas.calls == 2 * (QUICK.warmup + QUICK.repeats) * gpu_floors.GEMM_CALLS
    assert floors.sgemm_rate(gemm) == ("cublas", gemm["blas"]["cublas"]["gflops"])


@needs_nvrtc
def test_a_wrong_gemm_gives_no_rate(card):
    card.cublas.transposes = True
    gemm = gpu_floors.measure_gemm(QUICK)
    for entry in (gemm["blas"]["cublas"], gemm["bf16"]):
        assert entry["status"] == "wrong" and "relative error" in entry["reason"]
    assert floors.sgemm_rate(gemm) is None


@needs_nvrtc
def test_without_cublas_the_gemm_floor_is_unavailable(card, monkeypatch):
    monkeypatch.setattr(cublas, "load_library", lambda: None)
    gemm = gpu_floors.measure_gemm(QUICK)
    assert gemm["blas"]["cublas"]["status"] == gemm["bf16"]["status"] == "n/a"
    assert "cuBLAS is not installed" in gemm["bf16"]["reason"]


@needs_nvrtc
def test_a_gpu_run_on_the_stand_in_card(card, capsys, tmp_path):
    ember_on_host = EmberPeer(loader=f"{MODULE}:numpy_namespace")
    json_path = tmp_path / "bench.json"
    summary = run_bench("cuda", str(json_path), quick=True, only=["gelu", "floor_sgemm"],
                        peers=[ember_on_host])
    assert json.loads(json_path.read_text()) == json.loads(json.dumps(summary))
    assert summary["machine"]["gpu"] == "Fake H200 (sm_90)"
    assert "nvidia-cublas" in summary["machine"]["versions"]
    assert summary["floors"]["copy"]["what"].startswith("device-to-device")
    assert summary["floors"]["sgemm"]["bf16"]["status"] == "ok"
    assert summary["workloads"]["gelu"]["floor"]["time_over_floor"]["ember"] > 0
    table = capsys.readouterr().out
    assert "gpu: Fake H200 (sm_90); the peers run on it too" in table
    assert "device-to-device copy (cuMemcpyDtoDAsync) of 1 MiB" in table
    assert "(Ember links cublas); bfloat16 GEMM:" in table


# --- the table with the card's floors ----------------------------------------------------

def _gpu_summary(copy: dict) -> dict:
    ok = {"status": "ok", "median_s": 0.02, "samples_s": [0.02]}
    sgemm = {"status": "ok", "n": 8192, "flops": 2.0 * 8192**3, "ember_blas": "cublas",
             "blas": {"cublas": {**ok, "gflops": 50000.0}}, "bf16": {**ok, "gflops": 700000.0}}
    measured = {"status": "ok", "median_s": 0.0125, "samples_s": [0.0125], "max_rel_error": 0.0,
                "reason": None}
    return report.build(
        machine={"date": "today", "cpu": "a CPU", "cores": 16, "platform": "p", "python": "3",
                 "versions": {"torch": "2"}, "ember_backend": "cuda", "env": {},
                 "gpu": "NVIDIA H200 (sm_90)"},
        settings={"sizes": "gpu", "repeats": 7, "warmup": 2, "compile_repeats": 1},
        frameworks=["ember"], floors={"copy": copy, "sgemm": sgemm},
        workloads=[workloads.GELU, workloads.MLP_STEP],
        results={"gelu": {"ember": measured}, "mlp_step": {"ember": measured}},
        floor_work={"gelu": 2.0**30, "mlp_step": 5e11},
    )


def test_the_table_holds_ember_to_the_cards_floors():
    copy = {"status": "ok", "what": "device-to-device copy (cuMemcpyDtoDAsync)", "bytes": 2**30,
            "traffic_bytes": 2**31, "median_s": 0.0005, "samples_s": [0.0005],
            "gb_per_s": 2**31 / 0.0005 / 1e9}
    summary = _gpu_summary(copy)
    gelu, mlp = summary["workloads"]["gelu"], summary["workloads"]["mlp_step"]
    assert gelu["description"] == "tanh-GELU on 128M float32"
    assert gelu["floor"]["floor_s"] == pytest.approx(0.00025)  # half the copy's traffic
    assert mlp["floor"]["blas"] == "cublas"  # held to float32, not to bfloat16
    assert mlp["floor"]["floor_s"] == pytest.approx(0.01)  # 5e11 flops at 50 TFLOP/s
    table = report.format_table(summary)
    assert "gpu sizes" in table and "gpu: NVIDIA H200 (sm_90)" in table
    assert "device-to-device copy (cuMemcpyDtoDAsync) of 1024 MiB: 0.50 ms (4295.0 GB/s" in table
    assert "SGEMM 8192^3: cublas 50000 GFLOP/s (Ember links cublas); bfloat16 GEMM: 700000 GFLOP/s" in table
    rows = {line.split()[0]: line for line in table.splitlines() if line}
    assert "50.00x copy" in rows["gelu"] and "80% of SGEMM" in rows["mlp_step"]


def test_a_floor_that_could_not_be_measured_bounds_nothing():
    summary = _gpu_summary({"status": "error", "reason": "RuntimeError: CUDA driver call failed"})
    assert "floor_s" not in summary["workloads"]["gelu"]["floor"]
    table = report.format_table(summary)
    assert "copy floor ERROR: RuntimeError: CUDA driver call failed" in table
    rows = {line.split()[0]: line for line in table.splitlines() if line}
    assert rows["gelu"].endswith("n/a")


# --- a run cut short keeps what it measured ----------------------------------------------

def test_the_json_is_written_after_every_workload(monkeypatch, tmp_path):
    measure = harness.measure_workload

    def measure_then_stop(workload, *args):
        if workload.name == "softmax":
            raise KeyboardInterrupt  # as a timeout would stop the run
        return measure(workload, *args)

    monkeypatch.setattr(harness, "measure_workload", measure_then_stop)
    json_path = tmp_path / "bench.json"
    with pytest.raises(KeyboardInterrupt):
        run_bench(None, str(json_path), quick=True, only=["gelu", "softmax"],
                  peers=[EmberPeer(loader=f"{MODULE}:numpy_namespace")])
    written = json.loads(json_path.read_text())
    assert list(written["workloads"]) == ["gelu"]
    assert written["workloads"]["gelu"]["frameworks"]["ember"]["status"] == "ok"
    assert "copy" in written["floors"]
