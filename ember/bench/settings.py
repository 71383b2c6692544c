"""How samples are taken: warm-up, repeats, the pause before each sample. The harness,
the CPU's floors and the card's floors all sample this way."""
from __future__ import annotations

from dataclasses import dataclass

# Thread pools (OpenBLAS, OpenMP, XLA's) keep their workers spinning for a while after
# a call. When frameworks take turns, the previous one's spinning workers would steal
# the cores from the next one's sample (seen here: SGEMM at a third of its rate), so
# each sample starts after a pause long enough for them to go to sleep.
SETTLE_S = 0.2
# After the pause, untimed calls of the framework about to be timed: on a virtual
# machine, cores that sat idle run slowly for the first milliseconds of work (seen here:
# a 64 MiB copy takes 2.6 ms back to back, 10-14 ms as the first call after the pause,
# 4-5 ms as the second, 3.7-4.1 ms as the third), and a sample should measure the
# framework in a running loop, not the host waking up. Floors are sampled the same way.
REWARM_CALLS = 2


@dataclass(frozen=True)
class Settings:
    sizes: str            # the workloads' sizes: "quick", "cpu" or "gpu" (target.SIZES)
    warmup: int           # untimed calls before timing; the first one is checked
    repeats: int          # timed samples per framework
    compile_repeats: int  # samples of the compile workloads: each one is a new process
    settle_s: float       # pause before each sample (see SETTLE_S)
    rewarm: int = 0       # untimed calls after the pause (see REWARM_CALLS)

    @property
    def quick(self) -> bool:
        return self.sizes == "quick"

    @classmethod
    def for_run(cls, platform: str, quick: bool) -> "Settings":
        if quick:
            return cls("quick", warmup=1, repeats=2, compile_repeats=1, settle_s=0.0)
        if platform == "gpu":
            # No settle pause: it is for the host's thread pools, which a GPU run leaves
            # idle. One process per compile sample: each one starts JAX or Ember on the
            # card (seconds), and the run must stay within .ci/gpu-check's 240 s.
            return cls("gpu", warmup=2, repeats=7, compile_repeats=1, settle_s=0.0)
        return cls("cpu", warmup=2, repeats=7, compile_repeats=3, settle_s=SETTLE_S,
                   rewarm=REWARM_CALLS)
