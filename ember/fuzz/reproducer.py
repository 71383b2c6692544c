"""Reproducers: a failing program written as a standalone script, plus its IR.

``<name>.py`` holds the program, the variant (grad / vmap wrappers), the exact input
bits and the one line that runs the failing target; it exits with status 1 while the
bug is there. ``<name>.ir.txt`` holds the traced graph and, where the backend gets that
far, the optimized graph and schedule the backend compiled.
"""
from __future__ import annotations

import hashlib
import textwrap
from pathlib import Path

import ember
from ember.fuzz.program import PRELUDE, compile_source, values_source
from ember.fuzz.runner import Failure, half_precision_rtol
from ember.fuzz.targets import ORACLE, Target, all_targets
from ember.fuzz.variants import make_variant, widened
from ember.ir.printer import print_graph
from ember.passes.pipeline import run_pipeline

_TEMPLATE = '''\
"""Ember fuzz reproducer: {headline}

Found by `ember fuzz` (program seed {seed}). Run `python {filename}`: it exits with
status 1 while the bug is present. Set EMBER_DUMP=<dir> to see every pass and the
generated source.
"""
import sys

{prelude}
from ember.fuzz.compare import differences
from ember.fuzz.runner import float32_expectation
from ember.fuzz.targets import eager, host_leaves, optimized_on_reference, reparsed_on_reference
from ember.fuzz.variants import Variant

{source}

{args}
{also_source}

def main() -> int:
    expected = host_leaves({oracle})  # the reference, op by op
    actual = host_leaves({target})  # {target_name}
    problem = differences(actual, expected{also})
    print(problem or "no difference: the bug is fixed")
    return 1 if problem else 0


if __name__ == "__main__":
    sys.exit(main())
'''

_ALSO_SOURCE = '''
# This target may compute float16 / bfloat16 in float32 (as XLA does): elementwise,
# results between the reference and this same program computed in float32 are
# accepted, with the tolerance of the narrowest float dtype in the program.
SOURCE = {source!r}
MIN_RTOL = {min_rtol!r}
'''
_ALSO = ", float32_expectation(Variant('', SOURCE, args), expected), MIN_RTOL"


def _target(name: str) -> Target:
    return ORACLE if name == ORACLE.name else next(t for t in all_targets() if t.name == name)


def reproducer_source(failure: Failure, filename: str = "reproducer.py") -> str:
    variant = make_variant(failure.program, failure.variant)
    target = _target(failure.target)
    half = not target.rounds_every_op and widened(variant) is not None
    return _TEMPLATE.format(
        headline=failure.headline().replace('"""', "'''"), seed=failure.program.seed,
        filename=filename, prelude=PRELUDE.strip(), source=variant.source.strip() + "\n",
        args=values_source("args", variant.args), oracle=ORACLE.code, target=target.code,
        target_name=target.name, also=_ALSO if half else "",
        also_source=_ALSO_SOURCE.format(source=variant.source,
                                        min_rtol=half_precision_rtol(failure.program))
        if half else "")


def ir_text(failure: Failure) -> str:
    """The traced graph of the failing variant, and what the target made of it."""
    variant = make_variant(failure.program, failure.variant)
    lowered = ember.jit(compile_source(variant.source)["subject"], backend="reference")
    sections = [("traced graph", lambda: lowered.lower(*variant.args).as_text())]
    backend = failure.target.split(":")[0]
    if failure.target == "reference:passes":
        sections.append(("after the cpu graph passes", lambda: print_graph(
            run_pipeline(lowered.lower(*variant.args).graph, "cpu"))))
    elif backend != "reference":
        compiled = ember.jit(lowered.fun, backend=backend)
        sections.append((f"compiled for {backend}",
                         lambda: compiled.lower(*variant.args).compile().as_text()))
    texts = []
    for title, render in sections:
        try:
            text = render()
        except Exception as error:  # noqa: BLE001 - the failure may be right here
            text = f"(failed: {type(error).__name__}: {error})"
        texts.append(f"# {title}\n{text}")
    return "\n\n".join(texts) + "\n"


def write_reproducer(failure: Failure, folder: Path) -> Path:
    """Write ``<name>.py`` and ``<name>.ir.txt`` into ``folder``; returns the script's path."""
    folder.mkdir(parents=True, exist_ok=True)
    body = reproducer_source(failure)
    digest = hashlib.sha256(body.encode()).hexdigest()[:10]
    stem = f"{failure.variant}-{failure.target.replace(':', '-')}-{failure.kind}-{digest}"
    script = folder / f"{stem}.py"
    script.write_text(reproducer_source(failure, script.name))
    (folder / f"{stem}.ir.txt").write_text(
        f"# {failure.headline()}\n# {textwrap.shorten(failure.detail, 2000)}\n\n" + ir_text(failure))
    return script
