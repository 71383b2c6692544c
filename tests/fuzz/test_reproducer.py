"""Reproducers and the ``ember fuzz`` command."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ember.core.abstract import ShapedArray
from ember.fuzz import main, targets
from ember.fuzz.command import run_campaign
from ember.fuzz.program import Input, Program, Step, compile_source
from ember.fuzz.reproducer import reproducer_source, write_reproducer
from ember.fuzz.runner import Failure
from ember.fuzz.variants import make_variant

REPO = Path(__file__).resolve().parents[2]
F16 = ShapedArray((3,), np.float16)
PROGRAM = Program((Input("x0", F16, edges=True),), (
    Step("v0", F16, "lax.tanh({0})", ("x0",)),
    Step("v1", F16.update(dtype=np.float32), "lax.convert_element_type({0}, np.float32)", ("v0",))),
    seed=5)


def _run_script(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True, check=False,
                          cwd=path.parent, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})


@pytest.mark.parametrize("variant", ["plain", "grad", "vmap"])
def test_reproducer_runs_the_same_arguments_and_passes_when_there_is_no_bug(tmp_path, variant):
    failure = Failure(PROGRAM, variant, "reference:jit", "mismatch", "made up")
    script = write_reproducer(failure, tmp_path)
    scope = compile_source(script.read_text(), str(script))
    for written, arg in zip(scope["args"], make_variant(PROGRAM, variant).args):
        assert written.dtype == arg.dtype and written.shape == arg.shape
        assert written.tobytes() == arg.tobytes()  # NaN payloads and -0.0 included
    assert scope["main"]() == 0
    ir = script.with_suffix("").with_suffix(".ir.txt").read_text()
    assert "# traced graph" in ir and "tanh" in ir


def test_reproducer_fails_while_the_target_is_wrong(tmp_path, monkeypatch, capsys):
    def wrong(fn, args, pipeline="cpu"):
        return [np.asarray(o) + 1 for o in targets.eval_graph(
            targets._reference_graph(fn, args), [np.asarray(a) for a in args])]

    failure = Failure(PROGRAM, "plain", "reference:passes", "mismatch", "made up")
    scope = compile_source(reproducer_source(failure))
    assert scope["main"]() == 0
    monkeypatch.setitem(targets.__dict__, "optimized_on_reference", wrong)
    scope = compile_source(reproducer_source(failure))
    assert scope["main"]() == 1
    assert "output 0: 3 of 3 elements differ" in capsys.readouterr().out


def test_reproducer_is_a_standalone_script(tmp_path):
    script = write_reproducer(Failure(PROGRAM, "grad", "reference:jit", "mismatch", "x"), tmp_path)
    result = _run_script(script)
    assert result.returncode == 0, result.stderr
    assert "no difference" in result.stdout


def test_campaign_finds_shrinks_and_writes_a_planted_bug(tmp_path, monkeypatch):
    """Make the optimized-graph target wrong for every dot_general: the campaign must
    report it, write a few shrunk reproducers for it, and keep going."""
    original = targets.optimized_on_reference

    def wrong_dot(fn, args, pipeline="cpu"):
        outs = [np.asarray(o) for o in original(fn, args, pipeline)]
        if any(e.prim.name == "dot_general" for e in targets._reference_graph(fn, args).eqns):
            return [~o if o.dtype == bool else o + np.ones((), o.dtype) for o in outs]
        return outs

    monkeypatch.setitem(targets.__dict__, "optimized_on_reference", wrong_dot)
    logged = []
    campaign = run_campaign(3, lambda c: c.programs < 60, variants=["plain"], out=tmp_path,
                            backends=["reference"], shrink_tries=150, log=logged.append)
    planted = [f for f in campaign.report.failures if f.target == "reference:passes"]
    assert planted and all(f.kind == "mismatch" for f in planted)
    written = sorted(tmp_path.glob("plain-reference-passes-mismatch-*.py"))
    assert 1 <= len(written) <= 3 and any(str(written[0]) in line for line in logged)
    assert all("lax.dot_general(" in path.read_text() for path in written)
    assert written[0].read_text().count("    v") <= 3  # shrunk to a few steps


def test_command_line(tmp_path, capsys):
    assert main(["--programs", "3", "--seed", "1", "--out", str(tmp_path), "--minutes", "5",
                 "--variants", "plain"]) in (0, 1)
    out = capsys.readouterr().out
    assert "ember fuzz: seed 1" in out and "3 programs" in out
    with pytest.raises(SystemExit):
        main(["--variants", "plain,jvp"])
    with pytest.raises(SystemExit):
        main(["--backend", "no-such-backend"])
