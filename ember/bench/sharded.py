"""``ember bench --sharded``: data-parallel train steps on 1, 2 and 8 CPU devices, Ember
against JAX's same program on the same number of devices.

The programs are the suite's own JAX-style losses (workloads.py: the MLP and the
transformer block, a GPT layer), wrapped in a ``shard_map`` over a ``'data'`` mesh with
``pmean`` in the loss and an SGD update; the identical code runs under ``ember`` and
``jax``. The device count of a process is fixed when its first device is used (JAX's
``jax_num_cpu_devices``), so each (framework, program, devices) cell is a fresh child
process, which also makes its first call an honest compile time (empty caches). The
unsharded step (a plain ``jit``, no mesh) is Ember's baseline for both ratios: sharded
step time over unsharded, sharded compile time over unsharded. Every child's first loss
is checked against the unsharded one (float32 rounding: rtol 1e-5).

Each cell's child compiles alone (children start one after another), then waits; the
parent samples the cells round-robin, the starting cell rotating, each sample after a
pause and one untimed step (as the main suite samples its frameworks), so that load
changes on a shared machine hit every cell alike. The median sample is the step time.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np

from ember.bench import machine
from ember.bench.reference import LEARNING_RATE
from ember.bench.settings import SETTLE_S
from ember.bench.workloads import MLP_STEP, TRANSFORMER, mlp_loss, transformer_loss
from ember.child_process import environment, throwaway_cache

DEVICE_COUNTS = (1, 2, 8)
FRAMEWORKS = ("ember", "jax")
# "threads": Ember with spmd_execution="per_device" (one thread per device), measured
# with --per-device; it has no 1-device cell (one device runs fused).
PER_DEVICE = "threads"
# program -> (the suite workload whose sizes and inputs it takes, its loss)
PROGRAMS = {"mlp_dp": (MLP_STEP, mlp_loss), "gpt_block_dp": (TRANSFORMER, transformer_loss)}
LOSS_RTOL = 1e-5
REPEATS = 7
CHILD_TIMEOUT_S = 600


def _namespace(framework: str, devices: int) -> Any:
    """``ember`` or ``jax`` with the names the programs use; the host split in ``devices``."""
    if framework == "jax":
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
        import jax

        jax.config.update("jax_num_cpu_devices", devices)
        jax.config.update("jax_enable_compilation_cache", False)
        return jax
    import ember
    import ember.nn  # noqa: F401  (subpackages the programs use)
    import ember.numpy  # noqa: F401

    ember.config.update("num_cpu_devices", devices)
    ember.config.update("spmd_execution", "per_device" if framework == PER_DEVICE
                        else "fused")
    ember.config.update("backend", "cpu")
    return ember


def data_parallel_step(ns: Any, loss_of: Any, mesh: Any, labelled: bool) -> Any:
    """SGD on the mean loss over the whole batch, each device taking its slice; the
    gradient of the replicated parameters already includes the psum (check_vma)."""
    P = ns.sharding.PartitionSpec
    loss = loss_of(ns)

    def local(params, *batch):
        def global_loss(params):
            return ns.lax.pmean(loss(params, *batch), "data")

        value, grads = ns.value_and_grad(global_loss)(params)
        return {k: params[k] - LEARNING_RATE * grads[k] for k in params}, value

    batch_specs = (P("data"), P("data")) if labelled else (P("data"),)
    return ns.shard_map(local, mesh=mesh, in_specs=(P(), *batch_specs), out_specs=(P(), P()))


def unsharded_step(ns: Any, loss_of: Any) -> Any:
    loss = loss_of(ns)

    def step(params, *batch):
        value, grads = ns.value_and_grad(loss)(params, *batch)
        return {k: params[k] - LEARNING_RATE * grads[k] for k in params}, value

    return step


def batch_sizes(workload: Any, sizes: str) -> dict[str, Any]:
    """The workload's sizes, the batch rounded up to split over every device count."""
    found = dict(workload.sizes[sizes])
    split = max(DEVICE_COUNTS)
    found["batch"] = -(-found["batch"] // split) * split
    return found


def child(framework: str, program: str, devices: int, sizes: str, rewarm: int) -> None:
    """One cell, in this (fresh) process. Prints its first-call time and first loss as a
    JSON line, then, for every ``time`` line read from stdin, ``rewarm`` untimed steps
    and one timed step's seconds; ends at end of input. ``devices`` 0: the unsharded
    step."""
    ns = _namespace(framework, max(devices, 1))
    workload, loss_of = PROGRAMS[program]
    params, *batch = workload.make_inputs(**batch_sizes(workload, sizes))
    if devices == 0:
        step = ns.jit(unsharded_step(ns, loss_of))
        args = ns.device_put((params, *batch))
    else:
        mesh = ns.make_mesh((devices,), ("data",), devices=ns.devices("cpu")[:devices])
        sharding = ns.sharding.NamedSharding
        P = ns.sharding.PartitionSpec
        step = ns.jit(data_parallel_step(ns, loss_of, mesh, labelled=len(batch) == 2))
        args = (ns.device_put(params, sharding(mesh, P())),
                *(ns.device_put(b, sharding(mesh, P("data"))) for b in batch))
    ns.block_until_ready(args)
    start = time.perf_counter()
    _, loss = ns.block_until_ready(step(*args))
    first_s = time.perf_counter() - start
    ns.block_until_ready(step(*args))  # warm
    print(json.dumps({"first_call_s": first_s, "loss": float(np.asarray(loss))}), flush=True)
    for _ in sys.stdin:
        for _ in range(rewarm):
            ns.block_until_ready(step(*args))
        start = time.perf_counter()
        ns.block_until_ready(step(*args))
        print(json.dumps({"seconds": time.perf_counter() - start}), flush=True)


class Cell:
    """A child process holding one compiled step, sampled on request."""

    def __init__(self, framework: str, program: str, devices: int, sizes: str,
                 rewarm: int) -> None:
        self._cache = tempfile.TemporaryDirectory(prefix="ember-bench-sharded-")
        # (removed at close: a library build left at the child's exit is not handed off)
        env = environment(**throwaway_cache(self._cache.name))
        command = [sys.executable, "-m", "ember.bench.sharded", "--child", framework,
                   "--program", program, "--devices", str(devices), "--sizes", sizes,
                   "--rewarm", str(rewarm)]
        self._process = subprocess.Popen(command, env=env, stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                         text=True)
        self.result: dict[str, Any] = {"status": "ok", "samples_s": []}
        self._read()  # the first call: its compile time is measured alone

    def _read(self) -> None:
        line = self._process.stdout.readline() if self.ok else ""
        if not line:
            if self.ok:
                self.close()
                lines = self._process.stderr.read().strip().splitlines() or ["(no output)"]
                self.result = {"status": "error", "reason": lines[-1]}
            return
        found = json.loads(line)
        if "seconds" in found:
            self.result["samples_s"].append(found["seconds"])
        else:
            self.result.update(found)

    @property
    def ok(self) -> bool:
        return self.result["status"] == "ok"

    def sample(self) -> None:
        if self.ok:
            self._process.stdin.write("time\n")
            self._process.stdin.flush()
            self._read()

    def close(self) -> dict[str, Any]:
        if self._process.stdin and not self._process.stdin.closed:
            self._process.stdin.close()
        self._process.wait(timeout=CHILD_TIMEOUT_S)
        self._cache.cleanup()
        if self.ok and self.result["samples_s"]:
            self.result["step_s"] = statistics.median(self.result["samples_s"])
            # trace and compile: the first call less one step
            self.result["compile_s"] = self.result["first_call_s"] - self.result["step_s"]
        return self.result


def run(sizes: str, repeats: int, frameworks: tuple[str, ...] = FRAMEWORKS,
        device_counts: tuple[int, ...] = DEVICE_COUNTS,
        programs: tuple[str, ...] = tuple(PROGRAMS), settle_s: float = SETTLE_S,
        rewarm: int = 1) -> dict:
    """Every cell of every program, sampled round-robin as the main suite samples its
    frameworks; ratios against Ember's unsharded step and JAX."""
    results: dict[str, Any] = {}
    for program in programs:
        names = ["ember_unsharded"] + [f"{f}_{n}" for n in device_counts for f in frameworks
                                       if not (f == PER_DEVICE and n == 1)]
        cells = {}
        for name in names:
            framework, _, devices = name.partition("_")
            cells[name] = Cell(framework, program, 0 if devices == "unsharded"
                               else int(devices), sizes, rewarm)
        for repeat in range(repeats):
            for name in names[repeat % len(names):] + names[:repeat % len(names)]:
                time.sleep(settle_s)
                cells[name].sample()
        found = {name: cell.close() for name, cell in cells.items()}
        for name, cell in found.items():
            _log(f"  {program} {name}: {_short(cell)}")
        results[program] = {"cells": found, "rows": _rows(found, frameworks, device_counts)}
    return {"machine": machine.describe("cpu"), "sizes": sizes, "repeats": repeats,
            "settle_s": settle_s, "rewarm": rewarm, "programs": results}


def _short(cell: dict) -> str:
    if cell["status"] != "ok":
        return f"ERROR {cell['reason']}"
    return (f"step {cell['step_s'] * 1e3:.2f} ms, compile {cell['compile_s']:.2f} s, "
            f"loss {cell['loss']:.6f}")


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _rows(cells: dict, frameworks: tuple[str, ...], device_counts: tuple[int, ...]) -> list:
    base = cells["ember_unsharded"]
    base_ok = base["status"] == "ok"
    rows = []
    for devices in device_counts:
        row: dict[str, Any] = {"devices": devices}
        for framework in frameworks:
            cell = cells.get(f"{framework}_{devices}", {"status": "not run"})
            ok = cell["status"] == "ok"
            row[f"{framework}_step_s"] = cell["step_s"] if ok else None
            row[f"{framework}_compile_s"] = cell["compile_s"] if ok else None
            row[f"{framework}_loss"] = cell["loss"] if ok else None
            row[f"{framework}_loss_ok"] = (ok and base_ok and abs(cell["loss"] - base["loss"])
                                           <= LOSS_RTOL * abs(base["loss"]))
        ember_step = row.get("ember_step_s")
        row["ember_over_unsharded_step"] = _ratio(ember_step,
                                                  base["step_s"] if base_ok else None)
        row["ember_over_unsharded_compile"] = _ratio(row.get("ember_compile_s"),
                                                     base["compile_s"] if base_ok else None)
        row["jax_over_ember_step"] = _ratio(row.get("jax_step_s"), ember_step)
        rows.append(row)
    return rows


def format_table(summary: dict) -> str:
    lines = []
    for program, found in summary["programs"].items():
        base = found["cells"]["ember_unsharded"]
        described = _short(base)
        lines += [f"{program} (unsharded Ember: {described})",
                  f"{'devices':>7} {'ember ms':>9} {'per-dev':>9} {'jax ms':>9} {'jax/ember':>9} "
                  f"{'vs unsh.':>8} {'compile x':>9} {'ember loss':>11} {'jax loss':>11}"]
        for row in found["rows"]:
            def cell(value, spec):
                return format(value, spec) if value is not None else "-"
            ms = lambda s: s * 1e3 if s is not None else None  # noqa: E731
            def flag(framework: str) -> str:  # (no loss, as without JAX: nothing to flag)
                return ("!" if row.get(f"{framework}_loss") is not None
                        and not row.get(f"{framework}_loss_ok") else "")
            lines.append(
                f"{row['devices']:>7} {cell(ms(row.get('ember_step_s')), '9.2f')} "
                f"{cell(ms(row.get(f'{PER_DEVICE}_step_s')), '9.2f')} "
                f"{cell(ms(row.get('jax_step_s')), '9.2f')} "
                f"{cell(row['jax_over_ember_step'], '9.2f')} "
                f"{cell(row['ember_over_unsharded_step'], '8.2f')} "
                f"{cell(row['ember_over_unsharded_compile'], '9.2f')} "
                f"{cell(row.get('ember_loss'), '11.6f')}{flag('ember')} "
                f"{cell(row.get('jax_loss'), '11.6f')}{flag('jax')}")
    lines.append("per-dev: Ember's step with spmd_execution='per_device' (--per-device); "
                 "jax/ember above 1: Ember is faster; vs unsh.: Ember's sharded step over "
                 "its unsharded step; compile x: the sharded step's compile (first call "
                 "less one step) over the unsharded one's; '!': the first loss differs "
                 f"from the unsharded one by more than rtol {LOSS_RTOL:g}")
    return "\n".join(lines)


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    """Exit status 1 when a sharded loss differs from the unsharded one."""
    parser = argparse.ArgumentParser(prog="ember bench --sharded")
    parser.add_argument("--child", choices=(*FRAMEWORKS, PER_DEVICE), help=argparse.SUPPRESS)
    parser.add_argument("--program", choices=sorted(PROGRAMS), help=argparse.SUPPRESS)
    parser.add_argument("--devices", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--sizes", default="cpu", help=argparse.SUPPRESS)
    parser.add_argument("--rewarm", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", metavar="PATH")
    parser.add_argument("--per-device", action="store_true",
                        help="also time Ember with spmd_execution='per_device'")
    args = parser.parse_args(argv)
    if args.child:
        child(args.child, args.program, args.devices, args.sizes, args.rewarm)
        return 0
    sizes, repeats = ("quick", 2) if args.quick else ("cpu", REPEATS)
    _log(f"ember bench --sharded: data-parallel steps on {DEVICE_COUNTS} CPU devices, "
         f"{sizes} sizes, one fresh process per cell")
    frameworks = ("ember", PER_DEVICE, "jax") if args.per_device else FRAMEWORKS
    summary = run(sizes, repeats, frameworks)
    print(format_table(summary))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(summary, handle, indent=2)
    ok = all(row["ember_loss_ok"] for found in summary["programs"].values()
             for row in found["rows"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
