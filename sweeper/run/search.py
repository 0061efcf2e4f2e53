"""What Tune sees of a trial, and which trial runs next.

Each trial is a Tune trial whose config is its settings as flat named parameters (model, mode,
dynamic, batch_size, ...) and whose result is its row's numbers as flat metrics, so Tune's
loggers, TensorBoard's HParams and search algorithms can use them. `SettingSearch` is the Tune
searcher of every sweep: it proposes only real trials of the sweep (from the expanded spec,
so an impossible combination is never run), none twice, eager baselines first, in grid order,
in a seeded random order, or as Ray Tune's OptunaSearch (multi-objective TPE) picks them.
It needs no cluster: studies/search/replay.py drives it against finished sweeps.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from typing import Any, Protocol

from ray.tune.search import Searcher

from sweeper.results.schema import EAGER
from sweeper.spec.search_spec import SearchSpec

PARAMS = ("model", "mode", "dynamic", "batch_size", "seq_len", "phase", "precision", "workload",
          "bucketing", "mark_dynamic", "scope", "option_set", "path")
"""A trial's settings as Tune parameters; every value is a str, int or bool (TensorBoard HParams)."""
TYPED_PARAMS = (*PARAMS, "accelerator_type")
"""With the GPU type, a parameter only where the trial names one: other sweeps' parameters stay as they were."""
METRICS = ("throughput_items_s", "speedup_vs_eager", "compile_s", "warm_compile_s", "peak_mem_gib",
           "peak_mem_compile_gib", "latency_p50_ms", "trial_wall_s")
"""Row columns reported to Tune as float metrics (NaN where the row has none), with status_code."""
STATUS_CODES = {"ok": 0, "oom": 1, "compile_error": 2, "runtime_error": 3, "timeout": 4, "inaccurate": 5,
                "crashed": 6, "export_error": 7, "unplaced": 8}
_ASKS_PER_PROPOSAL = 16  # Optuna proposals refused (impossible or already proposed) before the nearest pick


def params_of(setting: Mapping[str, Any]) -> dict[str, str | int | bool]:
    """Flat parameters of a trial (`Trial.to_dict()`) or of a row: both name their settings alike."""
    model, workload = setting["model"], setting.get("workload")
    return {"model": model["name"] if isinstance(model, Mapping) else str(model),
            "mode": setting["mode"], "dynamic": str(setting["dynamic"]).lower(),
            "batch_size": int(setting["batch_size"]), "seq_len": int(setting.get("seq_len") or 0),
            "phase": setting["phase"], "precision": setting["precision"],
            "workload": (workload["name"] if isinstance(workload, Mapping) else workload) or "none",
            "bucketing": setting.get("bucketing") or "none", "mark_dynamic": bool(setting.get("mark_dynamic")),
            "scope": setting.get("scope") or "whole", "option_set": setting.get("option_set") or "none",
            "path": setting.get("path") or "jit",
            **({"accelerator_type": setting["accelerator_type"]} if setting.get("accelerator_type") else {})}


def metrics_of(row: Mapping[str, Any]) -> dict[str, float]:
    """The row's numbers as flat metrics; status_code 0 is ok (STATUS_CODES)."""
    out = {k: _number(row.get(k)) for k in METRICS}
    out["status_code"] = float(STATUS_CODES.get(str(row.get("status")), len(STATUS_CODES)))
    return out


def _number(value: Any) -> float:
    try:
        return float(value) if value is not None else math.nan
    except (TypeError, ValueError):
        return math.nan


def objective_values(metrics: Mapping[str, float] | None, objectives: Mapping[str, str]) -> list[float] | None:
    """The objectives' values of a finished trial; None unless it ran ok and has every one."""
    if not metrics or metrics.get("status_code") != STATUS_CODES["ok"]:
        return None
    values = [float(metrics.get(k, math.nan)) for k in objectives]
    return None if any(math.isnan(v) for v in values) else values


class Strategy(Protocol):
    def propose(self) -> str | None:
        """A trial id not proposed before, or None when none is left."""

    def tell(self, trial_id: str, metrics: Mapping[str, float] | None) -> None:
        """A proposed (or earlier measured) trial's metrics; None: it failed."""


class Ordered:
    """Trials in a fixed order: the grid's, or a seeded shuffle of it (random search)."""

    def __init__(self, trial_ids: list[str], seed: int | None = None):
        self.todo = list(trial_ids)
        if seed is not None:
            random.Random(seed).shuffle(self.todo)
        self.todo.reverse()

    def propose(self) -> str | None:
        return self.todo.pop() if self.todo else None

    def tell(self, trial_id: str, metrics: Mapping[str, float] | None) -> None:
        pass


class OptunaStrategy:
    """Ray Tune's OptunaSearch over the axes that vary among `settings`. A proposal that is no
    trial of the sweep (an impossible or collapsed combination) or one already proposed is told
    as failed, which TPE ignores, so only measured trials shape (and slow) its model; after
    `_ASKS_PER_PROPOSAL` such, the unmeasured trial nearest what it last asked for (fewest
    settings apart) is enqueued, so the search never stalls once it has converged."""

    def __init__(self, settings: Mapping[str, Mapping[str, Any]], objectives: Mapping[str, str], seed: int):
        import optuna
        from ray.tune.search.optuna import OptunaSearch

        optuna.logging.set_verbosity(optuna.logging.ERROR)
        self.settings, self.objectives = settings, dict(objectives)
        values = {k: list(dict.fromkeys(s.get(k) for s in settings.values())) for k in TYPED_PARAMS}
        values = {k: v for k, v in values.items() if v != [None]}  # a parameter no trial has
        self.fixed = {k: v[0] for k, v in values.items() if len(v) == 1}
        space = {k: optuna.distributions.CategoricalDistribution(v) for k, v in values.items() if len(v) > 1}
        metric, mode = list(self.objectives), list(self.objectives.values())
        self.search = OptunaSearch(space, metric=metric if len(metric) > 1 else metric[0],
                                   mode=mode if len(mode) > 1 else mode[0],
                                   sampler=optuna.samplers.TPESampler(seed=seed))
        self.by_key = {self._key(s): tid for tid, s in settings.items()}
        self.rng = random.Random(seed)
        self.proposed: set[str] = set()
        self.asks: dict[str, str] = {}  # trial id -> the Optuna ask that proposed it
        self.n_asks = 0

    def _key(self, params: Mapping[str, Any]) -> tuple[Any, ...]:
        return tuple(self.fixed.get(k, params.get(k)) for k in TYPED_PARAMS)

    def _ask(self) -> tuple[str, dict[str, Any]]:
        self.n_asks += 1
        ask = f"ask{self.n_asks}"
        return ask, {**self.fixed, **self.search.suggest(ask)}

    def propose(self) -> str | None:
        if len(self.proposed) >= len(self.settings):
            return None
        for _ in range(_ASKS_PER_PROPOSAL):
            ask, params = self._ask()
            tid = self.by_key.get(self._key(params))
            if tid is not None and tid not in self.proposed:
                return self._take(tid, ask)
            self._complete(ask, None)
        return self._enqueue(self._nearest(params))

    def _take(self, tid: str, ask: str) -> str:
        self.proposed.add(tid)
        self.asks[tid] = ask
        return tid

    def _nearest(self, params: Mapping[str, Any]) -> str:
        left = sorted(set(self.settings) - self.proposed)
        apart = {t: sum(self.settings[t].get(k) != params.get(k) for k in TYPED_PARAMS) for t in left}
        closest = min(apart.values())
        return self.rng.choice([t for t in left if apart[t] == closest])

    def _enqueue(self, tid: str) -> str:
        self.search._ot_study.enqueue_trial({k: v for k, v in self.settings[tid].items() if k not in self.fixed})
        ask, params = self._ask()
        assert self.by_key.get(self._key(params)) == tid, (params, tid)
        return self._take(tid, ask)

    def tell(self, trial_id: str, metrics: Mapping[str, float] | None) -> None:
        if trial_id not in self.asks:  # measured before this search started (a resumed sweep)
            self._enqueue(trial_id)
        self._complete(self.asks.pop(trial_id), metrics)

    def _complete(self, ask: str, metrics: Mapping[str, float] | None) -> None:
        values = objective_values(metrics, self.objectives)
        if values is None:
            self.search.on_trial_complete(ask, None, error=True)
        else:
            self.search.on_trial_complete(ask, dict(zip(self.objectives, values, strict=True)))
        self.search._completed_trials.discard(ask)  # asks are never reused; keep the set small


class SettingSearch(Searcher):
    """The Tune searcher of a sweep: `first` (eager baselines, or the whole grid), then up to
    `budget` trials from `strategy`. Every config it returns is `{"trial_id": ..., **params}`."""

    def __init__(self, settings: Mapping[str, Mapping[str, Any]], first: list[str],
                 strategy: Strategy | None = None, budget: int = 0):
        super().__init__()
        self.settings, self.first, self.strategy, self.budget = settings, list(first), strategy, budget
        self.running: dict[str, str] = {}  # Tune trial id -> sweeper trial id
        self.suggested: list[str] = []
        self.proposed = 0

    def set_search_properties(self, metric: str | None, mode: str | None, config: dict, **spec: Any) -> bool:
        return True

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:
        if self.first:
            tid: str | None = self.first.pop(0)
        elif self.strategy is None or self.proposed >= self.budget:
            return Searcher.FINISHED
        else:
            tid = self.strategy.propose()
            if tid is None:
                return Searcher.FINISHED
            self.proposed += 1
        self.running[trial_id] = tid
        self.suggested.append(tid)
        return {"trial_id": tid, **self.settings[tid]}

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        tid = self.running.pop(trial_id, None)
        if tid is not None and self.strategy is not None and self.settings[tid]["mode"] != EAGER:
            self.strategy.tell(tid, None if error else result)


def make_search(spec: SearchSpec, trials: Mapping[str, Mapping[str, Any]], known: Mapping[str, Mapping[str, Any]],
                ) -> SettingSearch:
    """The searcher for trials still to run (`trials`: id -> params, in grid order), given the
    params and metrics of trials already measured (`known`: id -> {"params", "metrics"})."""
    if spec.algorithm == "grid":
        return SettingSearch(trials, list(trials))
    first = [tid for tid, p in trials.items() if p["mode"] == EAGER]
    compiled = {tid: p for tid, p in trials.items() if p["mode"] != EAGER}
    done = {tid: k for tid, k in known.items() if k["params"]["mode"] != EAGER}
    budget = max(0, spec.max_trials - len(done)) if spec.max_trials else len(compiled)
    if spec.algorithm == "random":
        return SettingSearch(trials, first, Ordered(list(compiled), seed=spec.seed), budget)
    strategy = OptunaStrategy({**compiled, **{t: k["params"] for t, k in done.items()}}, spec.objectives, spec.seed)
    for tid, k in done.items():
        strategy.tell(tid, k["metrics"])
    return SettingSearch(trials, first, strategy, budget)
