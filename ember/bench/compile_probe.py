"""Child process of the compile_cold and compile_warm workloads.

``python -m ember.bench.compile_probe LOADER WORKLOAD --sizes SIZES`` loads a framework's
namespace, places the workload's inputs on its device, then times the first call of the
jitted workload: tracing, compiling (or loading from the persistent cache) and one run.
Imports and input transfers are not part of the time, except on Ember's GPU backend,
which uploads an array when a call first uses it. It prints one JSON line,
``{"seconds": ..., "loss": ...}``; the parent checks the loss against the oracle.

A fresh process is the only honest way to measure this: in the parent, the in-memory
caches of every framework would already be warm.
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np

from ember.bench.peers import load_object
from ember.bench.target import SIZES
from ember.bench.workloads import SUITE


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m ember.bench.compile_probe")
    parser.add_argument("loader", help="namespace loader, 'module:function'")
    parser.add_argument("workload", help="name of a workload that returns (..., loss)")
    parser.add_argument("--sizes", choices=SIZES, default="cpu")
    args = parser.parse_args(argv)

    workload = next(w for w in SUITE if w.name == args.workload)
    ns = load_object(args.loader)()
    inputs = ns.device_put(workload.inputs(args.sizes))
    ns.block_until_ready(inputs)
    step = ns.jit(workload.jax_style(ns))

    start = time.perf_counter()
    out = step(*inputs)
    ns.block_until_ready(out)
    seconds = time.perf_counter() - start

    print(json.dumps({"seconds": seconds, "loss": float(np.asarray(out[1]))}))


if __name__ == "__main__":
    main()
