"""Targets: every way of running a program gives the reference's answer on a program
with inputs, literals and a large closed-over constant."""
from __future__ import annotations

import numpy as np
import pytest

from ember import lax
from ember.fuzz.compare import differences
from ember.fuzz.runner import evaluate
from ember.fuzz.targets import ORACLE, all_targets, scope

BIG = np.arange(4 * 4 * 3 * 2, dtype=np.float32).reshape(4, 4, 3, 2)  # printed without values


def subject(x):
    return lax.mul(lax.add(x, BIG), 2.0), lax.reduce_sum(x, (0, 1, 2, 3))


@pytest.mark.parametrize("target", all_targets(), ids=lambda t: t.name)
def test_target_agrees_with_the_oracle(target):
    args = [np.linspace(0.5, 1, BIG.size, dtype=np.float32).reshape(BIG.shape)]
    variant_scope = {"subject": subject, "oracle": subject}
    expected = evaluate(ORACLE.code, variant_scope, args)
    actual = evaluate(target.code, variant_scope, args)
    assert differences(actual, expected) is None


def test_targets_cover_every_backend_and_the_graph_passes():
    names = {t.name for t in all_targets()}
    assert {"reference:jit", "reference:passes", "reference:reparsed"} <= names
    assert {t.name for t in all_targets(backends=["reference"])} == {
        "reference:jit", "reference:passes", "reference:reparsed"}
    assert set(scope()) >= {"ember", "eager", "optimized_on_reference", "reparsed_on_reference"}
