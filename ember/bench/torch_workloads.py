"""``ember bench --torch``: PyTorch models trained three ways, side by side in one run:
eager PyTorch, ``torch.compile`` with inductor (one compile thread), and
``torch.compile(backend="ember")``.

For each model: the first call (a train step that includes the compile), then train-step
time (forward, backward, AdamW), the median of samples taken round-robin so that a shared
machine's drift hits the three alike. Each timed step follows an untimed one of the same
mode: a training loop runs its steps back to back, and the step after another framework's
would also time that framework's OpenMP threads still spinning on the two cores, and
caches filled with its data (it cost Ember's CNN step 7%, eager's and inductor's 2-4%).
Both compilers start cold: their persistent caches point at a fresh folder (Ember's
per-host libraries, built once per installation, are built there before timing:
``host_libraries.prepare``). The losses of the first steps are compared with eager's, and
a compiler whose loss disagrees is reported wrong.
"""
from __future__ import annotations

import copy
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from ember.backends.cpu.host_libraries import prepare
from ember.bench import machine
from ember.config import config

MODES = ("eager", "inductor", "ember")
CHECKED_STEPS = 3  # losses compared with eager's over the first steps
# Traced with oneDNN on, an LSTM becomes mkldnn_rnn_layer, which inductor's generated code
# fails to call (TypeError: expected Tensor()); Ember's bridge traces with oneDNN off, and
# inductor runs these models with it off too.
INDUCTOR_WITHOUT_ONEDNN = {"lstm"}


@dataclass
class ModelResult:
    name: str
    describe: str
    first_call_s: dict[str, float] = field(default_factory=dict)
    step_ms: dict[str, float] = field(default_factory=dict)
    losses: dict[str, list[float]] = field(default_factory=dict)
    status: dict[str, str] = field(default_factory=dict)


def _models(torch: Any) -> dict[str, tuple[str, Callable[[], Any], Callable[[], tuple]]]:
    """name: (description, model factory, (input, target) factory)."""
    from ember.bench.torch_resnet import ResNet18

    nn, F = torch.nn, torch.nn.functional

    class CNN(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1, self.bn1 = nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16)
            self.conv2, self.bn2 = nn.Conv2d(16, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32)
            self.head = nn.Linear(32 * 4 * 4, 10)

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
            x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
            return self.head(x.flatten(1))

    class GPTBlock(nn.Module):
        def __init__(self, width: int = 64, heads: int = 4) -> None:
            super().__init__()
            self.heads = heads
            self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
            self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
            self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(),
                                     nn.Linear(4 * width, width))
            self.head = nn.Linear(width, 10)

        def forward(self, x):
            batch, length, width = x.shape
            q, k, v = self.qkv(self.norm1(x)).split(width, dim=2)
            q, k, v = (t.view(batch, length, self.heads, -1).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(batch, length, width))
            x = x + self.mlp(self.norm2(x))
            return self.head(x.mean(dim=1))

    class LSTMClassifier(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lstm, self.head = nn.LSTM(16, 32, batch_first=True), nn.Linear(32, 10)

        def forward(self, x):
            return self.head(self.lstm(x)[0][:, -1])

    def batch(*shape: int) -> Callable[[], tuple]:
        return lambda: (torch.randn(*shape), torch.randint(0, 10, (shape[0],)))

    return {
        "mlp": ("MLP 256-512-512-10, batch 64",
                lambda: nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512),
                                      nn.ReLU(), nn.Linear(512, 10)), batch(64, 256)),
        "cnn": ("2 conv+BatchNorm+ReLU+MaxPool, 3x16x16, batch 16", CNN, batch(16, 3, 16, 16)),
        "gpt_block": ("GPT block, width 64, 4 heads, causal SDPA, 8x32 tokens", GPTBlock,
                      batch(8, 32, 64)),
        "lstm": ("LSTM 16->32, 8 steps, batch 8", LSTMClassifier, batch(8, 8, 16)),
        "resnet18": ("ResNet-18 (torchvision's layout), 3x32x32, batch 8", ResNet18,
                     batch(8, 3, 32, 32)),
    }


def _trainer(torch: Any, model: Any, x: Any, y: Any) -> Callable[[], float]:
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step() -> float:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        return loss.item()
    return step


def _compiled(torch: Any, mode: str, model: Any) -> Any:
    if mode == "eager":
        return model
    if mode == "inductor":
        return torch.compile(model, backend="inductor", dynamic=False)
    import ember.torch  # (registers backend="ember" when run from a source tree)
    return ember.torch.compile(model)


def _without_onednn(torch: Any, step: Callable[[], float]) -> Callable[[], float]:
    def run() -> float:
        onednn = torch.backends.mkldnn.enabled
        torch.backends.mkldnn.enabled = False
        try:
            return step()
        finally:
            torch.backends.mkldnn.enabled = onednn
    return run


def _measure(torch: Any, name: str, describe: str, make_model: Callable, make_batch: Callable,
             repeats: int) -> ModelResult:
    result = ModelResult(name, describe)
    torch.manual_seed(0)
    model, (x, y) = make_model(), make_batch()
    steps: dict[str, Callable[[], float]] = {}
    for mode in MODES:
        torch._dynamo.reset()
        step = _trainer(torch, _compiled(torch, mode, copy.deepcopy(model)), x, y)
        if mode == "inductor" and name in INDUCTOR_WITHOUT_ONEDNN:
            step = _without_onednn(torch, step)
        start = time.perf_counter()
        losses = [step()]
        result.first_call_s[mode] = time.perf_counter() - start
        losses += [step() for _ in range(CHECKED_STEPS - 1)]
        result.losses[mode] = losses
        steps[mode] = step
    for mode in MODES:
        close = all(abs(a - b) <= 1e-3 * max(1.0, abs(b))
                    for a, b in zip(result.losses[mode], result.losses["eager"]))
        result.status[mode] = "ok" if close else "wrong"
    samples: dict[str, list[float]] = {mode: [] for mode in MODES}
    for repeat in range(repeats):
        for i in range(len(MODES)):
            mode = MODES[(i + repeat) % len(MODES)]  # (the starting mode rotates)
            steps[mode]()  # (untimed: the timed step follows one of its own, as in a loop)
            start = time.perf_counter()
            steps[mode]()
            samples[mode].append(time.perf_counter() - start)
    result.step_ms = {mode: 1e3 * statistics.median(s) for mode, s in samples.items()}
    return result


def _table(results: list[ModelResult]) -> str:
    header = (f"{'model':10} {'eager ms':>9} {'inductor ms':>12} {'ember ms':>9} "
              f"{'ember/eager':>11} {'ember/ind':>9} | {'1st call: ind s':>15} "
              f"{'ember s':>8} {'ember/ind':>9}  status")
    lines = [header, "-" * len(header)]
    for r in results:
        step, first = r.step_ms, r.first_call_s
        lines.append(
            f"{r.name:10} {step['eager']:9.2f} {step['inductor']:12.2f} {step['ember']:9.2f} "
            f"{step['ember'] / step['eager']:10.2f}x {step['ember'] / step['inductor']:8.2f}x | "
            f"{first['inductor']:15.1f} {first['ember']:8.1f} "
            f"{first['ember'] / first['inductor']:8.2f}x  "
            f"inductor {r.status['inductor']}, ember {r.status['ember']}")
    lines.append("")
    lines += [f"{r.name:10} {r.describe}; losses (eager, inductor, ember) after "
              f"{CHECKED_STEPS} steps: " + ", ".join(f"{r.losses[m][-1]:.5f}" for m in MODES)
              for r in results]
    return "\n".join(lines)


def run(quick: bool = False, json_path: str | None = None,
        only: list[str] | None = None) -> list[ModelResult]:
    """Measure the models (``only`` some of them), print the table, optionally write JSON."""
    import torch
    import torch._inductor.config

    models = _models(torch)
    unknown = sorted(set(only or ()) - set(models))
    if unknown:
        raise ValueError(f"unknown torch model(s) {', '.join(unknown)}; known: "
                         f"{', '.join(models)}")
    repeats = 5 if quick else 30
    results = []
    inductor_cache = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="ember-torch-bench-") as cold, \
            config.override(cache_dir=os.path.join(cold, "ember")), \
            torch._inductor.config.patch(compile_threads=1, fx_graph_cache=False,
                                         fx_graph_remote_cache=False), \
            torch._dynamo.config.patch(allow_rnn=True):
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(cold, "inductor")
        try:
            prepare()
            for name, (describe, make_model, make_batch) in models.items():
                if only and name not in only:
                    continue
                results.append(_measure(torch, name, describe, make_model, make_batch,
                                        repeats))
                print(f"measured {name}", flush=True)
        finally:
            if inductor_cache is None:
                del os.environ["TORCHINDUCTOR_CACHE_DIR"]
            else:
                os.environ["TORCHINDUCTOR_CACHE_DIR"] = inductor_cache
    described = machine.describe(None)
    print(f"\n{described['cpu']}, {described['cores']} cores, torch "
          f"{described['versions']['torch']}; train step = forward + backward + AdamW "
          f"(median of {repeats}); first call = the first train step, compile included\n")
    print(_table(results))
    if json_path:
        with open(json_path, "w") as out:
            json.dump({"machine": described, "models": [asdict(r) for r in results]}, out,
                      indent=2)
    return results
