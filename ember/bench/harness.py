"""Runs the suite: every framework on every workload, interleaved, checked, then timed.

Per workload, each framework's runner is built and called once; that first result is
compared with the float64 NumPy oracle, and a framework whose answer disagrees is
reported WRONG and never timed. The survivors are warmed up, then timed round-robin:
in each repeat every framework takes one sample, the starting framework rotating, so
that drift on a shared machine (other jobs, thermal state) hits all of them alike. The
median of the samples is the result; the last sample's answer is checked again, which
catches a framework whose results change after warm-up (a bad compile-cache entry).

A GPU run (``--backend cuda``) measures the card's floors (gpu_floors), uses the GPU
sizes and the peers on the card, and stops at once, before measuring anything, where
there is no GPU.
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ember.bench import floors, gpu_floors, machine, report, target
from ember.bench.peers import Peer, Runner, Unavailable, default_peers, describe_error
from ember.bench.settings import Settings
from ember.bench.trees import tree_items, tree_map
from ember.bench.workloads import SUITE, CompileWorkload, Workload

FLOOR_NAMES = ["floor_copy", "floor_sgemm"]
ALL_NAMES = [w.name for w in SUITE] + FLOOR_NAMES
FLOORS = {"cpu": {"floor_copy": floors.measure_copy, "floor_sgemm": floors.measure_sgemm},
          "gpu": {"floor_copy": gpu_floors.measure_copy, "floor_sgemm": gpu_floors.measure_gemm}}

@dataclass
class Measurement:
    status: str                     # "ok", "wrong", "error" or "n/a"
    samples_s: list[float] = field(default_factory=list)
    max_rel_error: float | None = None
    reason: str | None = None

    @property
    def median_s(self) -> float | None:
        return statistics.median(self.samples_s) if self.status == "ok" and self.samples_s else None

    def as_dict(self) -> dict:
        return {**asdict(self), "median_s": self.median_s}


def compare(got: Any, expected: Any) -> tuple[float, str | None]:
    """Worst max-norm relative error over the result's arrays: max|got - ref| / max|ref|.

    Returns (error, problem); ``problem`` explains a mismatch that is not a number (a
    different structure or shape, a NaN), in which case the error is infinite.
    """
    got_items, expected_items = list(tree_items(got)), list(tree_items(expected))
    got_paths, expected_paths = [p for p, _ in got_items], [p for p, _ in expected_items]
    if got_paths != expected_paths:
        return float("inf"), f"result structure {got_paths} != expected {expected_paths}"
    worst = 0.0
    for (path, value), (_, reference) in zip(got_items, expected_items):
        value = np.asarray(value, dtype=np.float64)
        if value.shape != reference.shape:
            return float("inf"), f"{path}: shape {value.shape} != expected {reference.shape}"
        if not np.all(np.isfinite(value)):
            return float("inf"), f"{path}: non-finite values"
        scale = max(float(np.abs(reference).max(initial=0.0)), np.finfo(np.float32).tiny)
        worst = max(worst, float(np.abs(value - reference).max(initial=0.0)) / scale)
    return worst, None


def _as_float64(value: Any) -> Any:
    array = np.asarray(value)
    return array.astype(np.float64) if np.issubdtype(array.dtype, np.floating) else array


def _verdict(runner: Runner, result: Any, expected: Any, tolerance: float) -> Measurement:
    """An "ok" measurement (no samples yet) if the result agrees with the oracle, else "wrong"."""
    error, problem = compare(runner.to_numpy(result), expected)
    if problem is None and error <= tolerance:
        return Measurement("ok", max_rel_error=error)
    if problem is not None:
        return Measurement("wrong", reason=problem)
    return Measurement("wrong", max_rel_error=error,
                       reason=f"max relative error {error:.1e} > {tolerance:.0e}")


def _rotated(names: list[str], start: int) -> list[str]:
    if not names:
        return []
    start %= len(names)
    return names[start:] + names[:start]


def _prepare(peer: Peer, workload, args: tuple, expected: Any, settings: Settings,
             scratch: Path) -> tuple[Measurement, Runner | None]:
    """Build, call once, check, warm up. The runner is returned only if it may be timed."""
    try:
        runner = peer.runner(workload, args, settings.sizes, scratch)
        _, result = runner.call()
        verdict = _verdict(runner, result, expected, workload.tolerance)
        if verdict.status != "ok":
            return verdict, None
        warmup = settings.warmup if isinstance(workload, Workload) else 1
        for _ in range(warmup - 1):
            runner.call()
    except Unavailable as error:
        return Measurement("n/a", reason=str(error)), None
    except Exception as error:
        return Measurement("error", reason=describe_error(error)), None
    return verdict, runner


def measure_workload(workload: Workload | CompileWorkload, peers: list[Peer],
                     settings: Settings) -> tuple[dict[str, Measurement], float | None]:
    """Every peer's measurement, and the work (bytes or flops) that the floor scales by."""
    args = workload.inputs(settings.sizes)
    floor_work = workload.floor_work(args) if workload.floor else None
    expected = tree_map(_as_float64, workload.reference(*tree_map(_as_float64, args)))
    repeats = settings.repeats if isinstance(workload, Workload) else settings.compile_repeats
    with tempfile.TemporaryDirectory(prefix="ember-bench-") as scratch:
        results: dict[str, Measurement] = {}
        runners: dict[str, Runner] = {}
        for peer in peers:
            results[peer.name], runner = _prepare(peer, workload, args, expected, settings,
                                                  Path(scratch))
            if runner is not None:
                runners[peer.name] = runner
        last_result: dict[str, Any] = {}
        # (a compile sample is a fresh process: there is nothing to warm)
        rewarm = settings.rewarm if isinstance(workload, Workload) else 0
        for repeat in range(repeats):
            for name in _rotated(list(runners), repeat):
                time.sleep(settings.settle_s)
                try:
                    for _ in range(rewarm):
                        runners[name].call()
                    seconds, last_result[name] = runners[name].call()
                except Exception as error:
                    results[name] = Measurement("error", reason=describe_error(error))
                    del runners[name]
                else:
                    results[name].samples_s.append(seconds)
        for name, runner in runners.items():
            verdict = _verdict(runner, last_result[name], expected, workload.tolerance)
            if verdict.status != "ok":
                verdict.reason = f"last timed call: {verdict.reason}"
                results[name] = verdict
    return results, floor_work


def select(only: list[str] | None) -> tuple[list, set[str]]:
    """The workloads and floors a run measures; a selected workload brings its floor."""
    if only is None:
        return list(SUITE), set(FLOOR_NAMES)
    unknown = sorted(set(only) - set(ALL_NAMES))
    if unknown:
        raise ValueError(f"unknown workload(s) {unknown}; known: {', '.join(ALL_NAMES)}")
    workloads = [w for w in SUITE if w.name in only]
    needed = {f"floor_{w.floor}" for w in workloads if w.floor}
    return workloads, needed | {name for name in only if name in FLOOR_NAMES}


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _measure_floor(measure, settings: Settings) -> dict:
    """A floor's numbers, or why there are none: the run goes on without that floor."""
    try:
        return measure(settings)
    except Unavailable as error:
        return {"status": "n/a", "reason": str(error)}
    except Exception as error:
        return {"status": "error", "reason": describe_error(error)}


def run_bench(backend: str | None, json_path: str | None, quick: bool,
              only: list[str] | None, *, peers: list[Peer] | None = None) -> dict:
    """Run the suite, print the table to stdout, optionally write JSON; return all numbers.

    ``peers`` replaces the default frameworks (Ember, NumPy, JAX, PyTorch eager and
    torch.compile); tests use it to run the harness against stand-ins. Raises
    ``target.NoGpu`` before measuring anything when a GPU backend has no GPU here. The
    JSON is rewritten after every workload, so a run cut short (a timeout) keeps what
    it measured.
    """
    workloads, floor_names = select(only)
    platform = target.platform(backend)
    gpu = target.require_gpu() if platform == "gpu" else None
    if platform == "cpu" and peers is None and (workloads or "floor_sgemm" in floor_names):
        _prepare_host_libraries()
    peers = default_peers(backend) if peers is None else peers
    settings = Settings.for_run(platform, quick)
    _log(f"ember bench: {', '.join(p.name for p in peers)}; "
         f"{settings.sizes} sizes, progress below, table at the end")

    measured_floors: dict[str, dict] = {}
    for name in FLOOR_NAMES:
        if name in floor_names:
            kind = name.removeprefix("floor_")
            measured_floors[kind] = _measure_floor(FLOORS[platform][name], settings)
            _log(f"  {name}: {report.floor_line(kind, measured_floors[kind])}")

    results, floor_work = {}, {}
    described = machine.describe(backend, gpu)

    def summary() -> dict:
        return report.build(
            machine=described,
            settings=asdict(settings),
            frameworks=[peer.name for peer in peers],
            floors=measured_floors,
            workloads=[w for w in workloads if w.name in results],
            results={name: {fw: m.as_dict() for fw, m in by_fw.items()}
                     for name, by_fw in results.items()},
            floor_work=floor_work,
        )

    for workload in workloads:
        results[workload.name], floor_work[workload.name] = measure_workload(workload, peers, settings)
        cells = (f"{name} {report.short_cell(m.as_dict(), workload.unit)}"
                 for name, m in results[workload.name].items())
        _log(f"  {workload.name}: {', '.join(cells)}")
        if json_path is not None:
            _write_json(json_path, summary())

    final = summary()
    print(report.format_table(final))
    if json_path is not None:
        _write_json(json_path, final)
    return final


def _prepare_host_libraries() -> None:
    """Build Ember's per-host libraries before anything is timed, as a user's later runs
    find them. Until its GEMM library is built (once per installation, and again after
    any change to it), a process's ``blas="auto"`` takes the vendor BLAS unmeasured, and
    keeps that choice: every workload would time MKL's products, not what Ember links."""
    from ember.backends.cpu.host_libraries import missing, prepare

    absent = missing()
    if not absent:
        return
    start = time.perf_counter()
    prepare()
    _log(f"  (Ember's per-host libraries built first: {', '.join(absent)}, "
         f"{time.perf_counter() - start:.1f} s)")


def _write_json(path: str, summary: dict) -> None:
    """Written aside, then renamed: a run killed while writing leaves the last whole file."""
    partial = Path(f"{path}.partial")
    partial.write_text(json.dumps(summary, indent=2) + "\n")
    os.replace(partial, path)
