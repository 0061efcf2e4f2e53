"""Timing of whole `generate` calls: when each new token appeared, and what a window of calls says
about the prefill (time to first token) and the decode (tokens/s, per-token latency).

transformers hands each step's new tokens to a streamer (`put`) as soon as they are chosen (the
prompt first); the clock below synchronizes the device there and reads the host clock, so each
reading is when that step's tokens existed. transformers' loop already waits for the device at
every step (its stopping check reads a tensor), so the readings add no wait of their own.
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from sweeper.measure.timing import Window, WindowStats, paired_interval, sync


class TokenClock:
    """A streamer for `generate(streamer=...)` that only reads the clock at every `put`."""

    def __init__(self, device: torch.device):
        self.device, self.times = device, []

    def put(self, value: torch.Tensor) -> None:
        sync(self.device)
        self.times.append(time.perf_counter())

    def end(self) -> None:
        pass


@dataclass(frozen=True)
class CallTiming:
    """One generate call: its seconds, its first token's, and each later step's."""

    generate_s: float
    ttft_s: float
    step_s: list[float]
    """Seconds of each decode step after the first new token (new_tokens - 1 of them)."""

    @property
    def decode_s_per_step(self) -> float | None:
        return sum(self.step_s) / len(self.step_s) if self.step_s else None


def timed_generate(call: Callable[[TokenClock], object], device: torch.device,
                   new_tokens: int) -> tuple[CallTiming, object]:
    """Run `call(streamer)` once; its timing from the last `new_tokens` readings (the first is the prompt's)."""
    clock = TokenClock(device)
    sync(device)
    t0 = time.perf_counter()
    out = call(clock)
    sync(device)
    total = time.perf_counter() - t0
    tokens = clock.times[-new_tokens:]
    if len(clock.times) < new_tokens or not tokens:
        raise RuntimeError(f"generate reported {len(clock.times)} token steps to its streamer, expected {new_tokens}")
    steps = [b - a for a, b in itertools.pairwise(tokens)]
    return CallTiming(total, tokens[0] - t0, steps), out


@dataclass
class CallLog:
    """Every timed call of one arm, window by window (index i: the arm's i-th window)."""

    device: torch.device
    new_tokens: int
    windows: list[list[CallTiming]] = field(default_factory=list)

    def window(self, call: Callable[[TokenClock], object], calls: int) -> Window:
        """A window of `calls` whole generate calls; its laps are the calls' seconds."""
        def run() -> list[float]:
            timings = [timed_generate(call, self.device, self.new_tokens)[0] for _ in range(calls)]
            self.windows.append(timings)
            return [t.generate_s for t in timings]
        return run

    def calls(self, windows: list[int]) -> list[CallTiming]:
        return [c for k in windows for c in self.windows[k]]

    def decode_stats(self, windows: list[int]) -> WindowStats:
        """Per window: the median decode step's seconds, as a one-iteration window (for intervals)."""
        per = [statistics.median(c.decode_s_per_step or c.ttft_s for c in self.windows[k]) for k in windows]
        return WindowStats(per, per, 1)


def percentile_ms(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    return WindowStats(xs, xs, 1).percentile_ms(q)


def summary(log: CallLog, windows: list[int], batch_size: int, prefix: str) -> dict[str, float | None]:
    """The row's generate columns of one arm ("" compiled or eager-only, "eager_") over `windows`."""
    calls = log.calls(windows)
    steps = [s for c in calls for s in c.step_s]
    per_step = [c.decode_s_per_step for c in calls if c.decode_s_per_step]
    row = {f"{prefix}ttft_ms": statistics.median(c.ttft_s for c in calls) * 1e3,
           f"{prefix}decode_tokens_per_s": batch_size / statistics.median(per_step) if per_step else None,
           f"{prefix}generate_s": statistics.median(c.generate_s for c in calls),
           f"{prefix}decode_token_p50_ms": percentile_ms(steps, 50)}
    if not prefix:
        row.update(decode_token_p90_ms=percentile_ms(steps, 90), decode_token_p99_ms=percentile_ms(steps, 99))
    return row


def decode_interval(eager: CallLog, compiled: CallLog, windows: list[int], seed: int) -> tuple[float, float]:
    """95% paired-bootstrap interval of the decode speedup over the alternated windows `windows`."""
    return paired_interval(eager.decode_stats(windows), compiled.decode_stats(windows), seed)
