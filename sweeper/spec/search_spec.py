"""The spec's `search` section: which settings a sweep measures (the whole grid, or a budgeted
multi-objective search over the same axes) and what the search optimizes. No Ray, no optuna
import: `sweeper validate` stays instant, and a missing optional package is named here."""

from __future__ import annotations

import importlib.util
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Metric = Literal["throughput_items_s", "speedup_vs_eager", "compile_s", "warm_compile_s", "peak_mem_gib",
                 "peak_mem_compile_gib", "latency_p50_ms"]
"""Row columns a search may optimize: each is also a metric every trial reports to Tune."""
Direction = Literal["max", "min"]


class SearchSpec(BaseModel):
    """grid (default): every trial. optuna: Ray Tune's OptunaSearch (TPE, multi-objective) over the
    axes; random: a seeded random order. A search measures every eager baseline first, then at most
    `max_trials` compiled settings, never an impossible combination and never one twice."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    algorithm: Literal["grid", "optuna", "random"] = "grid"
    """grid: every trial; optuna: OptunaSearch (the search extra); random: a seeded random order."""
    objectives: dict[Metric, Direction] = Field(
        default_factory=lambda: {"throughput_items_s": "max", "compile_s": "min", "peak_mem_gib": "min"})
    """Row metric -> max or min; a search looks for their Pareto front."""
    max_trials: Annotated[int, Field(gt=0)] | None = None
    """Compiled settings a search measures (eager baselines come on top); needed by optuna and random."""
    seed: int = 0
    """Seeds the search's choices (optuna's sampler, random's order)."""

    @model_validator(mode="after")
    def _consistent(self) -> SearchSpec:
        if not self.objectives:
            raise ValueError("objectives: name at least one metric to max or min")
        if self.algorithm == "grid":
            if self.max_trials is not None:
                raise ValueError("max_trials limits a search: set algorithm to optuna or random")
            return self
        if self.max_trials is None:
            raise ValueError(f"algorithm {self.algorithm!r} needs max_trials (compiled settings to measure)")
        if self.algorithm == "optuna" and importlib.util.find_spec("optuna") is None:
            raise ValueError("algorithm 'optuna' needs the optuna package: pip install 'sweeper[search]'")
        return self
