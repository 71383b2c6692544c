"""The bounded differential fuzz run: random programs over the primitive set, on every
backend present (eager and jitted) and on the reference running optimized and
re-parsed graphs, as they are, differentiated and vmapped, against the reference.

Hypothesis drives one generator per variant (and shrinks what fails); a seeded
campaign runs the ``ember fuzz`` code path. Backends whose compiler is slow (OpenCL,
CUDA) get their own, smaller campaign. Failures matching a bug listed in
``known_bugs.py`` are tolerated; each has a strict-xfail test in test_regressions.py.
"""
from __future__ import annotations

import collections

import pytest
from hypothesis import given, note
from hypothesis import strategies as st
from known_bugs import describe, new_failures

from ember.fuzz.choices import HypothesisChoices
from ember.fuzz.command import run_campaign
from ember.fuzz.generate import Limits, generate, unexpected_rejections
from ember.fuzz.program import function_source
from ember.fuzz.runner import check
from ember.fuzz.targets import all_targets
from ember.fuzz.variants import VARIANTS
from ember.runtime.devices import available_backends

LIMITS = Limits(max_steps=6, max_rank=3, max_dim=4)
CAMPAIGN_PROGRAMS = 120
# Backends whose compiler takes about a second per program get a smaller campaign.
SLOW = [b for b in available_backends() if b in ("opencl", "cuda")]
FAST = [b for b in available_backends() if b not in SLOW]
SLOW_CAMPAIGN_PROGRAMS = 25


@pytest.mark.parametrize("variant", VARIANTS)
@given(data=st.data())
def test_random_programs_agree_with_the_reference(variant, data):
    program = generate(HypothesisChoices(data), LIMITS)
    note(function_source(program))
    failures = new_failures(check(program, [variant], all_targets(FAST)).failures)
    assert not failures, describe(failures)


def test_seeded_campaign_agrees_with_the_reference():
    campaign = run_campaign(20240501, lambda c: c.programs < CAMPAIGN_PROGRAMS, limits=LIMITS,
                            backends=FAST)
    failures = new_failures(campaign.report.failures)
    assert not failures, describe(failures)
    runs_per_target = campaign.report.runs / len(all_targets(FAST))
    assert runs_per_target > 2 * CAMPAIGN_PROGRAMS  # grad applies to fewer programs
    reasons = collections.Counter(reason.split(":")[0] for _, reason in campaign.report.rejected)
    assert sum(reasons.values()) < CAMPAIGN_PROGRAMS / 10, reasons
    assert not unexpected_rejections, unexpected_rejections


@pytest.mark.skipif(not SLOW, reason="no slow-compiling backend here")
@pytest.mark.parametrize("backend", SLOW)
def test_seeded_campaign_on_slow_compilers(backend):
    campaign = run_campaign(7, lambda c: c.programs < SLOW_CAMPAIGN_PROGRAMS, limits=LIMITS,
                            backends=[backend])
    failures = new_failures(campaign.report.failures)
    assert not failures, describe(failures)
    assert any(t.name.startswith(backend) for t in all_targets([backend]))
