"""``blas="auto"``: the decision from measured rates, the rates' disk entry, what modules
link for each decision, and a mixed module's products against NumPy (no timings are
asserted: the probe's rates are whatever this host measured)."""
from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember.backends.cpu import blas_choice, ember_gemm, toolchain
from ember.backends.cpu.blas_choice import ALL_CLASSES, Choice, decide
from ember.config import config
from ember.runtime import compile_cache
from tests.backends.cpu.cpu_testing import requires_cpu


def rates(wide: dict[str, float], narrow: dict[str, float],
          skinny: dict[str, float] | None = None) -> dict:
    """(the skinny class measures as the wide one unless given)"""
    return {"wide": wide, "narrow": narrow, "skinny": wide if skinny is None else skinny}


@pytest.mark.parametrize("measured, expected", [
    # Ember's GEMM fastest everywhere: no BLAS linked.
    (rates({"ember": 300, "openblas": 250}, {"ember": 60, "openblas": 50}),
     Choice(None, ALL_CLASSES)),
    # The BLAS everywhere.
    (rates({"ember": 200, "openblas": 250}, {"ember": 40, "openblas": 50}),
     Choice("openblas", 0)),
    # Mixed: the BLAS for wide products, Ember's narrow tile for thin ones.
    (rates({"ember": 200, "openblas": 250}, {"ember": 60, "openblas": 50}),
     Choice("openblas", 2)),
    (rates({"ember": 300, "openblas": 250}, {"ember": 40, "openblas": 50}),
     Choice("openblas", 5)),
    # Skinny products by the BLAS (packing costs Ember's GEMM as much as the products).
    (rates({"ember": 300, "openblas": 250}, {"ember": 60, "openblas": 50},
           {"ember": 80, "openblas": 190}), Choice("openblas", 3)),
    # Not by the vendor's name: MKL slower than OpenBLAS on the wide class loses.
    (rates({"ember": 100, "openblas": 250, "mkl": 215}, {"ember": 1, "openblas": 5, "mkl": 9}),
     Choice("openblas", 0)),
    (rates({"ember": 100, "openblas": 200, "mkl": 215}, {"ember": 1, "openblas": 5, "mkl": 9}),
     Choice("mkl", 0)),
    # One vendor linked: the narrow class compares Ember with the wide class's winner only.
    (rates({"ember": 100, "openblas": 250, "mkl": 215}, {"ember": 7, "openblas": 5, "mkl": 9}),
     Choice("openblas", 2)),
    # A near tie goes to Ember's GEMM: the BLAS must win by more than VENDOR_MARGIN.
    (rates({"ember": 250, "openblas": 250}, {"ember": 50, "openblas": 50}),
     Choice(None, ALL_CLASSES)),
    (rates({"ember": 250, "openblas": 270}, {"ember": 50, "openblas": 54},
           {"ember": 50, "openblas": 60}), Choice("openblas", 3)),
    # Ember's GEMM alone.
    (rates({"ember": 1}, {"ember": 1}), Choice(None, ALL_CLASSES)),
])
def test_decision(measured, expected):
    assert decide(measured) == expected


def info(name: str, version: str = "1") -> toolchain.BlasInfo:
    return toolchain.BlasInfo(name, "/lib", (), (), f"{name} {version}")


def test_no_probe_without_a_choice(monkeypatch):
    monkeypatch.setattr(blas_choice, "_measure", pytest.fail)
    assert blas_choice.auto_choice({"openblas": info("openblas")}, 2, "isa", "cpu") \
        == Choice("openblas", 0)
    assert blas_choice.auto_choice({"ember": info("ember")}, 2, "isa", "cpu") \
        == Choice(None, ALL_CLASSES)


@pytest.fixture
def fake_probe(monkeypatch, tmp_path):
    """The probe replaced by fixed rates (counted), in an empty cache directory."""
    measured = rates({"ember": 300.0, "openblas": 250.0}, {"ember": 40.0, "openblas": 50.0})
    calls = []

    def measure(candidates, threads):
        calls.append((sorted(candidates), threads))
        return measured

    monkeypatch.setattr(blas_choice, "_measure", measure)
    blas_choice._rates.cache_clear()
    with config.override(cache_dir=str(tmp_path / "cache")):
        yield calls, tmp_path / "cache"
    blas_choice._rates.cache_clear()
    compile_cache._default_cache = None


def choose(threads: int = 2, openblas: str = "0.3") -> Choice:
    return blas_choice.auto_choice({"openblas": info("openblas", openblas), "ember": info("ember")},
                                   threads, "isa", "cpu")


def test_rates_are_measured_once_and_kept_on_disk(fake_probe):
    calls, folder = fake_probe
    assert choose() == Choice("openblas", 5)
    assert calls == [(["ember", "openblas"], 2)]
    [entry] = folder.glob("??/*.blas-rates")
    assert json.loads(entry.read_text())["wide"] == {"ember": 300.0, "openblas": 250.0}
    blas_choice._rates.cache_clear()  # (a new process)
    hits = blas_choice.probe_stats.disk_hits
    assert choose() == Choice("openblas", 5)
    assert len(calls) == 1 and blas_choice.probe_stats.disk_hits == hits + 1


def test_what_decides_the_rates_is_in_the_key(fake_probe):
    calls, folder = fake_probe
    choose()
    choose(threads=1)
    choose(openblas="0.4")  # an upgraded BLAS is measured again
    assert len(calls) == 3 and len(list(folder.glob("??/*.blas-rates"))) == 3


@pytest.mark.parametrize("damage", [
    "not json", json.dumps([1]), json.dumps({"wide": {}}), "negative", "missing class"])
def test_a_damaged_entry_is_measured_again(fake_probe, damage):
    """Damaged on disk (the content hash fails), or a valid entry of another layout."""
    calls, folder = fake_probe
    choose()
    [entry] = folder.glob("??/*.blas-rates")
    data = json.loads(entry.read_text())
    if damage == "negative":
        data["wide"]["ember"] = -1
        damage = json.dumps(data)
    elif damage == "missing class":
        del data["narrow"]
        damage = json.dumps(data)
    entry.write_text(damage)
    if damage != "not json":  # (hashed as if valid: only the layout check refuses it)
        entry.with_suffix(".sha256").write_text(hashlib.sha256(entry.read_bytes()).hexdigest())
    blas_choice._rates.cache_clear()
    compile_cache._default_cache = None  # (a new process: nothing checked yet)
    assert choose() == Choice("openblas", 5)
    assert len(calls) == 2
    assert json.loads(entry.read_text())["narrow"]["openblas"] == 50.0  # rewritten


@pytest.fixture
def chosen(monkeypatch):
    """blas="auto" deciding as the test says, for the toolchain's real libraries."""
    def use(choice: Choice):
        monkeypatch.setattr(blas_choice, "auto_choice", lambda *args: choice)
        toolchain._measured_blas.cache_clear()

    with config.override(blas="auto"):
        yield use
    toolchain._measured_blas.cache_clear()


@requires_cpu
def test_auto_waits_for_embers_library(tmp_path, monkeypatch):
    """With an empty cache "auto" is the BLAS, unmeasured (nothing timed), and Ember's
    GEMM library starts building in the background; once it is built, the next process
    measures and chooses."""
    if toolchain._openblas() is None:
        pytest.skip("scipy-openblas32 is not installed")
    monkeypatch.setattr(toolchain, "_mkl", lambda: None)
    monkeypatch.setattr(blas_choice, "_measure", pytest.fail)
    started = []
    monkeypatch.setattr(ember_gemm, "start_building", lambda: started.append(True))
    toolchain._measured_blas.cache_clear()
    blas_choice._rates.cache_clear()
    try:
        with config.override(blas="auto", cache_dir=str(tmp_path / "cache")):
            assert toolchain.blas() == toolchain._openblas()
            assert ember_gemm.built_library_path() is None and started == [True]
            ember_gemm.library_path()  # (what the background build does)
            toolchain._measured_blas.cache_clear()  # (a new process)
            measured = rates({"ember": 300.0, "openblas": 250.0}, {"ember": 1.0, "openblas": 2.0})
            monkeypatch.setattr(blas_choice, "_measure", lambda candidates, threads: measured)
            info = toolchain.blas()
        assert info.name == "ember" and "-DEMBER_GEMM_OWN_CLASSES=5" in info.compile_flags
    finally:
        toolchain._measured_blas.cache_clear()
        blas_choice._rates.cache_clear()


@requires_cpu
def test_auto_links_what_was_chosen(chosen):
    if toolchain._openblas() is None:
        pytest.skip("scipy-openblas32 is not installed")
    ember_gemm.library_path()
    chosen(Choice("openblas", 0))  # (Ember's library linked for 16-bit operands alone)
    info, own = toolchain.blas(), toolchain._ember_gemm()
    assert "-DEMBER_GEMM_OWN_CLASSES=0" in info.compile_flags and info.half
    assert info.link_flags == (*own.link_flags, *toolchain._openblas().link_flags)
    chosen(Choice(None, ALL_CLASSES))
    assert toolchain.blas() == toolchain._ember_gemm()
    chosen(Choice("openblas", 2))
    info, own = toolchain.blas(), toolchain._ember_gemm()
    assert info.name == "openblas" and "-DEMBER_GEMM_OWN_CLASSES=2" in info.compile_flags
    assert info.link_flags == (*own.link_flags, *toolchain._openblas().link_flags)
    assert info.version.endswith("for narrow")  # (in every cache key of the modules)


@requires_cpu
@pytest.mark.parametrize("own_classes", [1, 2, 4, 5])
def test_a_mixed_module_computes_each_class_right(chosen, own_classes):
    """Products of every class in one module: some classes through Ember's library, the
    others through the BLAS, transposed operands and a batch included."""
    if toolchain._openblas() is None:
        pytest.skip("scipy-openblas32 is not installed")
    ember_gemm.library_path()
    chosen(Choice("openblas", own_classes))
    rng = np.random.default_rng(own_classes)
    a = rng.standard_normal((3, 70, 50), dtype=np.float32)
    wide = rng.standard_normal((90, 50), dtype=np.float32)
    narrow = rng.standard_normal((50, 10), dtype=np.float32)

    def f(a, wide, narrow):
        return enp.matmul(a, wide.T), enp.matmul(a, narrow), enp.matmul(a[:, :24], wide.T)

    got_wide, got_narrow, got_skinny = ember.jit(f)(a, wide, narrow)
    np.testing.assert_allclose(got_wide, a.astype(np.float64) @ wide.T, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got_narrow, a.astype(np.float64) @ narrow, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got_skinny, a[:, :24].astype(np.float64) @ wide.T, rtol=1e-4,
                               atol=1e-4)


@requires_cpu
def test_the_real_probe_measures_every_candidate(tmp_path):
    """Once, small: the candidates compile, run and get a rate for every class."""
    if toolchain._openblas() is None:
        pytest.skip("scipy-openblas32 is not installed")
    with config.override(cache_dir=str(tmp_path / "cache")):
        candidates = {"ember": toolchain._ember_gemm(), "openblas": toolchain._openblas()}
        measured = blas_choice._measure(candidates, 2)
    assert set(measured) == {"wide", "narrow", "skinny"}
    assert all(set(by_name) == {"ember", "openblas"} and min(by_name.values()) > 0
               for by_name in measured.values())


@requires_cpu
def test_each_class_runs_on_the_library_chosen_for_it(chosen):
    """Bit for bit: in a mixed module the wide product is the BLAS's and the narrow and
    skinny ones Ember's (their sums round differently, so each shows who computed it)."""
    if toolchain._openblas() is None:
        pytest.skip("scipy-openblas32 is not installed")
    ember_gemm.library_path()
    rng = np.random.default_rng(7)
    # (a sum longer than either library's blocks of it: they split it differently)
    a = rng.standard_normal((96, 1700), dtype=np.float32)
    wide = rng.standard_normal((1700, 96), dtype=np.float32)
    narrow = rng.standard_normal((1700, 10), dtype=np.float32)

    def f(a, wide, narrow):  # (the last: 24 rows, a skinny product)
        return enp.matmul(a, wide), enp.matmul(a, narrow), enp.matmul(a[:24], wide)

    results = {}
    for name, choice in [("ember", Choice(None, ALL_CLASSES)), ("blas", Choice("openblas", 0)),
                         ("mixed", Choice("openblas", 6))]:
        chosen(choice)
        results[name] = [np.asarray(out) for out in ember.jit(f)(a, wide, narrow)]
    for index in range(3):  # (distinguishable)
        assert not np.array_equal(results["ember"][index], results["blas"][index])
    np.testing.assert_array_equal(results["mixed"][0], results["blas"][0])
    np.testing.assert_array_equal(results["mixed"][1], results["ember"][1])
    np.testing.assert_array_equal(results["mixed"][2], results["ember"][2])


@requires_cpu
def test_the_probe_computes_each_product_it_times(tmp_path):
    """Every probe product, each layout and the Linear layer's epilogue, called through
    each candidate's probe as it is timed: the product it times is the right one."""
    candidates = {"ember": toolchain._ember_gemm()}
    if toolchain._openblas() is not None:
        candidates["openblas"] = toolchain._openblas()
    rng = np.random.default_rng(1)
    with config.override(cache_dir=str(tmp_path / "cache")):
        for name, info in candidates.items():
            function = blas_choice._probe_function(info)
            for product in [p for shapes in blas_choice.PROBE_SHAPES.values() for p in shapes]:
                m, k, n = product.m, product.k, product.n
                a = rng.standard_normal((k, m) if product.a_transposed else (m, k), np.float32)
                b = rng.standard_normal((n, k) if product.b_transposed else (k, n), np.float32)
                bias = rng.standard_normal(n, dtype=np.float32) if product.linear else None
                c = np.full((m, n), np.nan, np.float32)
                blas_choice._time(function, product, a, b, c, bias, 2)
                want = (a.T if product.a_transposed else a) @ (b.T if product.b_transposed else b)
                if product.linear:
                    want = np.maximum(want + bias, 0)
                np.testing.assert_allclose(c, want, rtol=1e-3, atol=1e-3,
                                           err_msg=f"{name} {product}")
