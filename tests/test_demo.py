"""``ember demo`` end to end on a tiny model: loss goes down, both throughputs are
printed, the loss-curve PNG is written and a sample is printed."""
from __future__ import annotations

import re

import numpy as np
import pytest

import ember
from ember import demo
from ember.runtime.devices import default_backend

# The demo on the oracle and on what a user gets by default (other backends run every
# layer, optimizer and mixed-precision test; the demo's eager comparison is slow there).
DEMO_BACKENDS = sorted({"reference", default_backend().name})


@pytest.mark.parametrize("backend", DEMO_BACKENDS)
def test_demo_trains_and_reports(backend, tmp_path, capsys):
    out = tmp_path / "out"
    with ember.config.override(backend=None):  # restores the flag that --backend sets
        code = demo.main(["--steps", "12", "--layers", "1", "--width", "32", "--batch", "8",
                          "--sample", "12", "--backend", backend, "--out", str(out)])
    printed = capsys.readouterr().out
    assert code == 0
    losses = re.search(r"loss: ([\d.]+) -> ([\d.]+) over 12 steps", printed).groups()
    first, last = map(float, losses)
    assert last < first - 0.3, printed
    compiled, eager = re.search(r"throughput: compiled ([\d,]+) tokens/s, eager ([\d,]+) tokens/s",
                                printed).groups()
    assert int(compiled.replace(",", "")) > 0 and int(eager.replace(",", "")) > 0
    assert (out / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert re.search(r"sample:\ndef ", printed)


def test_batches_are_next_byte_pairs():
    corpus = np.arange(200, dtype=np.uint8)
    cfg = demo.GPTConfig(length=8, batch=3)
    inputs, targets = next(demo.batches(corpus, cfg, seed=0))
    assert inputs.shape == targets.shape == (3, 8) and inputs.dtype == np.int32
    np.testing.assert_array_equal(targets[:, :-1], inputs[:, 1:])
    np.testing.assert_array_equal(targets - inputs, 1)


def test_demo_rejects_a_single_step():
    with pytest.raises(SystemExit):
        demo.main(["--steps", "1"])
