"""``ember bench --torch-ops``: PyTorch's own OpInfo database through ``torch.compile``
with Ember's backend and with inductor, side by side, against eager.

Every op with float32 samples on the CPU runs its first ``SAMPLES`` samples as one
compiled function (``fullgraph=True``, static shapes); it passes when every output
matches eager's within 1e-5. With ``--gradients`` an op that supports autograd also
runs backward through the compiled graph (the gradient of a weighted sum of its
outputs, against eager's within 1e-4). Ember runs without fallback, so an op it cannot
lower fails. Ops that PyTorch cannot trace whole (random numbers, data-dependent
shapes, sparse tensors) fail for every backend alike. Slow: a compile per op and
backend (about a second each for inductor).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["OpCase", "main", "op_cases", "weighted_sum"]

SAMPLES = 3
FORWARD_TOLERANCE = 1e-5
GRADIENT_TOLERANCE = 1e-4
BACKENDS = ("ember", "inductor")


class OpCase:
    """One OpInfo op's first samples, as a function of their tensors."""

    def __init__(self, op: Any, requires_grad: bool = False) -> None:
        import torch
        from torch.utils import _pytree as pytree

        self.op = op
        self.name = op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")
        samples = op.sample_inputs("cpu", torch.float32, requires_grad=requires_grad)
        self.flat = [pytree.tree_flatten((s.input, s.args, s.kwargs))
                     for _, s in zip(range(SAMPLES), samples)]
        self.tensors = [leaf for leaves, _ in self.flat for leaf in leaves
                        if isinstance(leaf, torch.Tensor)]

    def run(self, tensors: Sequence[Any]) -> list:
        """The op on every sample, its tensors taken in order from ``tensors``."""
        import torch
        from torch.utils import _pytree as pytree

        given = iter(tensors)
        outputs = []
        for leaves, spec in self.flat:
            values = [next(given) if isinstance(leaf, torch.Tensor) else leaf
                      for leaf in leaves]
            x, args, kwargs = pytree.tree_unflatten(values, spec)
            outputs.append(self.op.op(x, *args, **kwargs))
        return outputs

    def run_flat(self, *tensors: Any) -> list:
        """``run`` with the tensors as arguments (as ``torch.compile`` passes them)."""
        return self.run(tensors)


def op_cases(names: Sequence[str] | None = None, requires_grad: bool = False) -> list[OpCase]:
    """The OpInfo ops with float32 samples on the CPU (only ``names``, by OpInfo name
    with or without its variant, where given)."""
    import torch
    from torch.testing._internal.common_methods_invocations import op_db

    ops = [op for op in op_db if torch.float32 in op.supported_dtypes("cpu")]
    if names is not None:
        wanted = set(names)
        ops = [op for op in ops if op.name in wanted
               or f"{op.name}.{op.variant_test_name}" in wanted]
    return [OpCase(op, requires_grad=requires_grad and op.supports_autograd) for op in ops]


def weighted_sum(outputs: Any) -> Any:
    """A loss whose gradient differs per element (a plain sum would make softmax's zero)."""
    import torch
    from torch.utils import _pytree as pytree

    total = torch.zeros(())
    for out in pytree.tree_leaves(outputs):
        if isinstance(out, torch.Tensor) and out.requires_grad:
            if out.is_complex():  # (both parts weighted)
                out = torch.view_as_real(out.resolve_conj())
            weights = torch.cos(torch.arange(out.numel(), dtype=out.dtype)).reshape(out.shape)
            total = total + (out * weights).sum()
    return total


@dataclass
class Outcome:
    status: str  # pass, mismatch, error; "eager" where eager PyTorch itself fails (not counted)
    message: str = ""


def _compiled(function: Callable, backend: str) -> Callable:
    import torch

    torch._dynamo.reset()
    if backend == "ember":
        import ember.torch

        return torch.compile(function, backend=ember.torch.strict_backend, fullgraph=True,
                             dynamic=False)
    return torch.compile(function, backend=backend, fullgraph=True, dynamic=False)


def _compare(actual: Any, expected: Any, tolerance: float) -> Outcome:
    import torch

    try:
        torch.testing.assert_close(actual, expected, rtol=tolerance, atol=tolerance,
                                   equal_nan=True)
    except AssertionError as error:
        return Outcome("mismatch", str(error).splitlines()[0][:300])
    return Outcome("pass")


def _attempt(check: Callable[[], Any]) -> Any:
    """``check()``, or the error it raised as an Outcome."""
    try:
        return check()
    except Exception as error:  # any failure to trace, lower or compile counts against
        text = " ".join(f"{type(error).__name__}: {error}".split())  # (on one line)
        return Outcome("error", text[:300])


def forward(case: OpCase, backend: str) -> Outcome:
    """``case`` compiled by ``backend`` against eager."""
    expected = _attempt(lambda: case.run(case.tensors))
    if isinstance(expected, Outcome):
        return Outcome("eager", expected.message)
    return _attempt(lambda: _compare(_compiled(case.run_flat, backend)(*case.tensors),
                                     expected, FORWARD_TOLERANCE))


def gradients(case: OpCase, backend: str) -> Outcome:
    """The gradients of ``case``'s weighted outputs through ``backend``'s backward graph
    against eager's."""
    def grads(run: Callable) -> list:
        leaves = [t.detach().clone().requires_grad_(t.requires_grad) for t in case.tensors]
        weighted_sum(run(*leaves)).backward()
        return [t.grad for t in leaves]

    expected = _attempt(lambda: grads(case.run_flat))
    if isinstance(expected, Outcome):
        return Outcome("eager", expected.message)
    return _attempt(lambda: _compare(grads(_compiled(case.run_flat, backend)), expected,
                                     GRADIENT_TOLERANCE))


def _sweep(cases: list[OpCase], backend: str, check: Callable[[OpCase, str], Outcome],
           reference: bool) -> dict[str, Outcome]:
    import ember

    override = (ember.config.override(backend="reference") if reference and backend == "ember"
                else contextlib.nullcontext())
    outcomes = {}
    with override:
        for case in _progress(cases, f"{backend} {check.__name__}"):
            outcomes[case.name] = check(case, backend)
    return outcomes


def _progress(cases: list[OpCase], label: str) -> Iterator[OpCase]:
    started = time.monotonic()
    for done, case in enumerate(cases):
        if done and done % 50 == 0:
            print(f"  {label}: {done} of {len(cases)} ops, {time.monotonic() - started:.0f} s",
                  flush=True)
        yield case


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ember bench --torch-ops",
        description="PyTorch's OpInfo float32 ops through torch.compile(backend='ember') "
                    "and inductor against eager: pass counts and failures")
    parser.add_argument("--backends", metavar="NAME,...", default=",".join(BACKENDS),
                        help=f"torch.compile backends to sweep (default: {','.join(BACKENDS)})")
    parser.add_argument("--gradients", action="store_true",
                        help="also gradients through the compiled backward graph")
    parser.add_argument("--ops", metavar="NAME,...", help="only these OpInfo ops")
    parser.add_argument("--reference", action="store_true",
                        help="Ember's reference backend (checks the lowerings alone)")
    parser.add_argument("--json", metavar="PATH", help="also write every outcome to PATH")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    warnings.filterwarnings("ignore")  # (OpInfo samples and dynamo warn a lot)
    names = [name.strip() for name in args.ops.split(",")] if args.ops else None
    backends = [name.strip() for name in args.backends.split(",") if name.strip()]
    results: dict[str, dict[str, dict[str, Outcome]]] = {}
    forward_cases = op_cases(names)
    for backend in backends:
        results.setdefault(backend, {})["forward"] = _sweep(forward_cases, backend, forward,
                                                            args.reference)
    if args.gradients:
        gradient_cases = [case for case in op_cases(names, requires_grad=True)
                          if case.op.supports_autograd]
        for backend in backends:
            results[backend]["gradients"] = _sweep(gradient_cases, backend, gradients,
                                                   args.reference)
    _print(results)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({backend: {kind: {name: [o.status, o.message] for name, o in by.items()}
                                 for kind, by in kinds.items()}
                       for backend, kinds in results.items()}, handle, indent=1)
    return 0


def _print(results: dict[str, dict[str, dict[str, Outcome]]]) -> None:
    print("OpInfo float32 ops through torch.compile, against eager "
          f"(first {SAMPLES} samples of each):")
    for backend, kinds in results.items():
        counts = ", ".join(f"{kind} {_passed(by)} of {_counted(by)}"
                           for kind, by in kinds.items())
        print(f"  {backend}: {counts}")
    for backend, kinds in results.items():
        for kind, by in kinds.items():
            failed = {name: o for name, o in by.items() if o.status not in ("pass", "eager")}
            if failed:
                print(f"\n{backend}, {kind}: {len(failed)} failed")
                for name, outcome in sorted(failed.items()):
                    print(f"  {name}: {outcome.status}: {outcome.message}")


def _passed(outcomes: dict[str, Outcome]) -> int:
    return sum(o.status == "pass" for o in outcomes.values())


def _counted(outcomes: dict[str, Outcome]) -> int:
    """The ops eager PyTorch runs (an op whose own samples fail in eager is left out)."""
    return sum(o.status != "eager" for o in outcomes.values())
