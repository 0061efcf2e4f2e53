"""Compile health: graphs, breaks, recompiles, cudagraph skips, whether the recompile limit was hit."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
import torch._dynamo
from torch._dynamo.utils import counters

_LIMIT_MARKERS = ("recompile_limit", "cache_size_limit", "recompile limit")
SKIPPED = "frame ran eager: "
"""Prefix of a break reason that made dynamo give up on a whole frame (an unsupported module, say)."""


class _LimitHandler(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.getMessage()
        if any(m in msg for m in _LIMIT_MARKERS):
            self.messages.append(msg.splitlines()[0])


@dataclass
class Health:
    graphs: int = 0
    graph_breaks: int = 0
    recompiles: int = 0
    cudagraph_skips: int = 0
    recompile_limit_hit: bool = False
    break_reasons: list[str] = field(default_factory=list)
    frames_skipped: int = 0
    """Frames dynamo gave up on and ran eager (counted among the graph breaks, reason prefixed)."""

    def as_row(self) -> dict:
        row = {
            "graphs": self.graphs,
            "graph_breaks": self.graph_breaks,
            "recompiles": self.recompiles,
            "cudagraph_skips": self.cudagraph_skips,
            "recompile_limit_hit": self.recompile_limit_hit,
            "graph_break_reasons": json.dumps(self.break_reasons[:20]),
        }
        if self.frames_skipped and not self.graphs:
            row["notes"] = (f"NOTHING COMPILED: dynamo skipped {self.frames_skipped} frame(s) and ran them eager "
                            f"({self.break_reasons[0]})")
        return row


@contextmanager
def watch_compiles() -> Iterator[Health]:
    """Count what dynamo/inductor did inside the block (counters are process-global)."""
    counters.clear()
    torch._dynamo.utils.clear_compilation_metrics()
    handler = _LimitHandler()
    loggers = [logging.getLogger(n) for n in ("torch._dynamo", "torch._dynamo.convert_frame")]
    for lg in loggers:
        lg.addHandler(handler)
    health = Health()
    try:
        yield health
    finally:
        for lg in loggers:
            lg.removeHandler(handler)
        _fill(health, handler)


def _fill(health: Health, handler: _LimitHandler) -> None:
    health.graphs = int(counters["stats"]["unique_graphs"])
    health.cudagraph_skips = int(counters["inductor"]["cudagraph_skips"])
    metrics = torch._dynamo.utils.get_compilation_metrics()
    skipped = sorted({f"{SKIPPED}{m.fail_reason.splitlines()[0]}" for m in metrics
                      if getattr(m, "fail_type", None) == "Unsupported" and m.fail_reason})
    health.frames_skipped = sum(1 for m in metrics if getattr(m, "fail_type", None) == "Unsupported")
    health.graph_breaks = int(sum(counters["graph_break"].values())) + health.frames_skipped
    health.break_reasons = skipped + sorted(counters["graph_break"])
    health.recompiles = sum(1 for m in metrics if getattr(m, "recompile_reason", None))
    health.recompile_limit_hit = bool(handler.messages)
