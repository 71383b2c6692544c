"""``ember fuzz``: a time-bounded differential fuzzing campaign.

    ember fuzz --minutes 10 [--seed S] [--backend cpu] [--out DIR]

Program ``i`` of seed ``S`` is generated from ``RandomChoices(f"{S}:{i}")``, so a
campaign is reproducible program by program. Each new failure is shrunk and written to
``DIR`` as a reproducer (``ember.fuzz.reproducer``); failures that look alike (same
variant, target, kind and place where the error was raised) are written once.
Exit status: 0 when nothing failed, 1 otherwise.
"""
from __future__ import annotations

import argparse
import collections
import random
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from ember.fuzz.choices import RandomChoices
from ember.fuzz.generate import DEFAULT_LIMITS, Limits, generate, unexpected_rejections
from ember.fuzz.reproducer import write_reproducer
from ember.fuzz.runner import Failure, Report, check
from ember.fuzz.shrink import shrink
from ember.fuzz.targets import all_targets
from ember.fuzz.variants import VARIANTS
from ember.runtime.devices import available_backends

_SIMILAR_MISMATCHES = 3  # mismatches of one signature shrunk before they count as known


@dataclass
class Campaign:
    seed: int
    programs: int = 0
    report: Report = field(default_factory=Report)
    written: list[Path] = field(default_factory=list)
    seen: collections.Counter = field(default_factory=collections.Counter)


def _likeness(failure: Failure) -> tuple:
    """Failures alike enough to be one bug: a crash or error raised at one place (on
    whichever target), or mismatches of one variant on one target."""
    if failure.kind == "mismatch":
        return failure.variant, failure.target, failure.kind
    where = re.search(r"raised at (\S+)\)", failure.detail)
    return failure.variant, failure.kind, failure.error_type, where.group(1) if where else ""


def run_campaign(seed: int, keep_going: Callable[[Campaign], bool], *,
                 backends: Sequence[str] | None = None, variants: Sequence[str] = VARIANTS,
                 limits: Limits = DEFAULT_LIMITS, out: Path | None = None, shrink_tries: int = 200,
                 log: Callable[[str], None] = print) -> Campaign:
    """Generate and check programs while ``keep_going(campaign)``; shrink and write new
    failures to ``out`` (when given)."""
    campaign = Campaign(seed)
    targets = all_targets(backends)
    while keep_going(campaign):
        choices = RandomChoices(f"{seed}:{campaign.programs}")
        program = generate(choices, limits)
        campaign.programs += 1
        report = check(program, variants, targets)
        campaign.report.runs += report.runs
        campaign.report.rejected += report.rejected
        for failure in report.failures:
            campaign.report.failures.append(failure)
            likeness = _likeness(failure)
            campaign.seen[likeness] += 1
            limit = _SIMILAR_MISMATCHES if failure.kind == "mismatch" else 1
            if out is None or campaign.seen[likeness] > limit:
                continue
            small = shrink(failure, choices.recorded, limits, shrink_tries)
            path = write_reproducer(small, out)
            if path not in campaign.written:
                campaign.written.append(path)
                log(f"[{campaign.programs}] {small.headline()}\n    -> {path}")
    return campaign


def summary(campaign: Campaign) -> str:
    report = campaign.report
    lines = [(f"ember fuzz: seed {campaign.seed}, {campaign.programs} programs, "
              f"{report.runs} target runs, {len(report.failures)} failures, "
              f"{len(report.rejected)} variants rejected by the reference")]
    kinds = collections.Counter(f"{f.kind} in {f.variant} on {f.target}" for f in report.failures)
    lines += [f"  {count:5d} x {kind}" for kind, count in kinds.most_common()]
    reasons = collections.Counter(reason for _, reason in report.rejected)
    lines += [f"  rejected {count:3d} x {reason}" for reason, count in reasons.most_common(5)]
    lines += [f"  Ember raised {error} (not an Ember error) for: {expr}"
              for (expr, error), _ in unexpected_rejections.most_common(10)]
    lines += [f"  reproducer: {path}" for path in campaign.written]
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ember fuzz", description=("Differential fuzzing of Ember's compiler: random "
                                        "programs, every backend (eager and jit), grad and "
                                        "vmap, against the reference."))
    parser.add_argument("--minutes", type=float, default=1.0, help="how long to run (default 1)")
    parser.add_argument("--programs", type=int, default=None, help="stop after this many programs")
    parser.add_argument("--seed", type=int, default=None, help="campaign seed (default: random)")
    parser.add_argument("--backend", action="append", default=None,
                        help="only this backend (repeatable; the reference always runs)")
    parser.add_argument("--out", type=Path, default=Path("ember-fuzz"),
                        help="folder for reproducers (default ./ember-fuzz)")
    parser.add_argument("--variants", default=",".join(VARIANTS),
                        help=f"comma-separated subset of {','.join(VARIANTS)}")
    parser.add_argument("--max-steps", type=int, default=Limits.max_steps,
                        help="operations per program, at most")
    parser.add_argument("--shrink-tries", type=int, default=200,
                        help="runs spent shrinking each failure (0: write it as found)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown:
        _parser().error(f"unknown variants {unknown}; choose from {list(VARIANTS)}")
    missing = sorted(set(args.backend or ()) - set(available_backends()))
    if missing:
        _parser().error(f"backends {missing} are not present; present: {available_backends()}")
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    deadline = time.monotonic() + 60 * args.minutes

    def keep_going(campaign: Campaign) -> bool:
        if args.programs is not None and campaign.programs >= args.programs:
            return False
        return time.monotonic() < deadline

    print(f"ember fuzz: seed {seed}, targets "
          f"{', '.join(t.name for t in all_targets(args.backend))}, variants {', '.join(variants)}")
    campaign = run_campaign(seed, keep_going, backends=args.backend, variants=variants,
                            limits=Limits(max_steps=args.max_steps), out=args.out,
                            shrink_tries=args.shrink_tries)
    print(summary(campaign))
    return 1 if campaign.report.failures else 0
