"""Recommend one torch.compile setting per context under memory, compile-time and run-length limits.

The ranking rule, the memory definition and the noise rules live in `ranking`; this module
chooses the rows that may compete and builds the answer:

* Only rows of one context compete (`ranking.CONTEXT`). `recommend` answers one context and
  refuses an ambiguous question with the choices listed (`RecommendError`); `recommend_all`
  answers every context the filters leave.
* Without ``iterations`` the run is long and the rank is seconds per item. With it the work is
  ``iterations x batch`` items (batch: ``batch_size`` if given, else the largest measured), each
  candidate taking ``compile_s + items / throughput_items_s``: a bigger batch gets no credit.
* The memory limit applies to the whole-run peak; a stream's compile cost is every compile it
  needed (`stream_compile_s`).
* Accuracy must have been checked and passed (eager rows are the reference); a trial that hit the
  recompile limit ran eager code. Without an eager row for a batch size, the in-trial eager
  baseline stands in."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import pandas as pd

from sweeper import SweeperError
from sweeper.analysis import frames, ranking, ties
from sweeper.analysis.frames import fmt_num, is_missing
from sweeper.analysis.ranking import Candidate

_FLAGS = {"phase": "--phase", "precision": "--precision", "device_name": "--device",
          "accelerator_type": "--accelerator-type", "seq_len": "--seq-len", "workload": "--workload"}


class RecommendError(SweeperError):
    """A question the results cannot answer: unknown model, or a context left ambiguous."""


@dataclass(frozen=True)
class Exclusion:
    setting: str
    trial_id: str | None
    kind: str
    reason: str


@dataclass(frozen=True)
class Limits:
    """What the user asked: limits and the work the compile must pay back in."""

    max_memory_gib: float | None = None
    max_compile_s: float | None = None
    iterations: int | None = None
    batch_size: int | None = None
    warm_start: bool = False
    """The deployment ships each setting's Mega-Cache artifact: its compile costs the measured warm
    start from it (`warm_megacache_s` + `megacache_load_s`) where the trial measured one."""


@dataclass
class Recommendation:
    context: dict[str, Any]
    constraints: dict[str, Any]
    workload_items: float | None
    workload_note: str
    best: Candidate | None
    runner_up: Candidate | None
    runner_up_reason: str | None
    eager: Candidate | None
    verdict: str = ""
    best_compiled: Candidate | None = None
    """The fastest compiled setting that qualifies (the choice itself when it compiles)."""
    ties: list[Candidate] = field(default_factory=list)
    """Other settings whose time is inside the noise of the choice's: a re-measure could swap them."""
    excluded: list[Exclusion] = field(default_factory=list)

    @property
    def advice(self) -> str:
        if self.best is None:
            return "no setting meets the constraints"
        return self.best.compile_call

    def to_dict(self) -> dict[str, Any]:
        """Machine-readable form (``--json``): typed values, non-finite numbers as null."""
        return _json_safe({"advice": self.advice, **asdict(self)})


def recommend(df: pd.DataFrame, model: str, phase: str | None = None, precision: str | None = None,
              max_memory_gib: float | None = None, max_compile_s: float | None = None,
              iterations: int | None = None, batch_size: int | None = None, device_name: str | None = None,
              seq_len: int | None = None, workload: str | None = None,
              accelerator_type: str | None = None) -> Recommendation:
    """The best setting of `model` in the one context the filters leave; RecommendError when several."""
    filters = {"phase": phase, "precision": precision, "device_name": device_name, "seq_len": seq_len,
               "workload": workload, "accelerator_type": accelerator_type}
    data = select(frames.prepare(df), model, batch_size=batch_size, **filters)
    ambiguous = [f"{_FLAGS[d]} ({' | '.join(_choices(data[d]))})" for d in _FLAGS
                 if filters[d] is None and len(_choices(data[d])) > 1]
    if ambiguous:
        raise RecommendError(f"{model} was measured in several contexts that do not compare; "
                             f"choose with {', '.join(ambiguous)}")
    return recommend_context(data, Limits(max_memory_gib, max_compile_s, iterations, batch_size))


def recommend_all(df: pd.DataFrame, model: str | None = None, limits: Limits = Limits(),
                  **filters: Any) -> list[Recommendation]:
    """One recommendation per context of `model` (every model when None) that the filters leave."""
    data = select(frames.prepare(df), model, batch_size=limits.batch_size, **filters)
    groups = data.groupby(ranking.CONTEXT, dropna=False, sort=True)
    return [recommend_context(ctx.reset_index(drop=True), limits) for _, ctx in groups]


def select(data: pd.DataFrame, model: str | None, **wanted: Any) -> pd.DataFrame:
    """The prepared rows of `model` matching the filters given (None: any); errors list the choices."""
    if model is not None:
        models = _choices(data["model"])
        if model not in models:
            raise RecommendError(f"unknown model {model!r}; models in these results: {', '.join(models) or 'none'}")
        data = data[data["model"].eq(model)]
    for dim, value in wanted.items():
        if value is None:
            continue
        choices = _choices(data[dim])
        data = data[data[dim].eq(value)]
        if data.empty:
            raise RecommendError(f"{model or 'these results'}: no trials with {dim}={value}; "
                                 f"measured: {', '.join(choices) or 'none'}")
    return data.reset_index(drop=True)


def recommend_context(data: pd.DataFrame, limits: Limits = Limits()) -> Recommendation:
    """The ranked answer for the prepared rows of one context."""
    context = {d: _single(data[d]) for d in ranking.CONTEXT}
    records = data.to_dict("records") + _baseline_rows(data)
    ok, excluded = _split(records, limits)
    sizes = [int(r["batch_size"]) for r in ok if pd.notna(r["batch_size"])]
    ref_batch = limits.batch_size or max(sizes, default=None)
    items = float(limits.iterations * ref_batch) if limits.iterations and ref_batch else None
    ranked = ties.settle(sorted((_candidate(r, items, limits.warm_start) for r in ok), key=ranking.candidate_key))
    best = ranked[0] if ranked else None
    best_compiled = next((c for c in ranked if not c.is_eager), None)
    runner_up = _runner_up(ranked)
    return Recommendation(
        context=context, constraints=asdict(limits), workload_items=items,
        workload_note=_workload_note(limits.iterations, limits.batch_size, ref_batch),
        best=best, runner_up=runner_up,
        runner_up_reason=(ties.why_passed_over(runner_up, best) or ranking.why_lost(runner_up, best, items))
        if best and runner_up else None,
        eager=_eager_at(ranked, best), verdict=ranking.verdict(best, best_compiled)[0],
        best_compiled=best_compiled, excluded=excluded,
        ties=[c for c in ranked[1:] if best and ties.tied_with(c, best)])


def _choices(col: pd.Series) -> list[str]:
    values = col.dropna().unique()
    return sorted(str(int(v)) if isinstance(v, float) and v.is_integer() else str(v) for v in values)


def _single(col: pd.Series) -> Any:
    values = col.dropna().unique()
    if len(values) != 1:
        return None
    v = values[0]
    return int(v) if isinstance(v, float) and v.is_integer() else v.item() if hasattr(v, "item") else v


def _baseline_rows(data: pd.DataFrame) -> list[dict[str, Any]]:
    """Eager stand-ins from compiled trials' own baselines, for batch sizes with no eager row."""
    has_eager = set(data.loc[data["is_eager"] & data["status"].eq("ok"), "batch_size"].dropna())
    src = data[~data["is_eager"] & data["eager_throughput_items_s"].gt(0)
               & ~data["batch_size"].isin(has_eager)]
    if src.empty:
        return []
    agg = src.groupby("batch_size").agg(
        throughput_items_s=("eager_throughput_items_s", "median"),
        peak_mem_gib=("eager_peak_mem_gib", "median")).reset_index()
    agg = agg.assign(mode=frames.EAGER, is_eager=True, status="ok", compile_s=0.0, dynamic=None,
                     dynamic_label="None", speedup_vs_eager=1.0, backend=None,
                     trial_id=None, accuracy_ok=pd.NA, recompile_limit_hit=None)
    return agg.to_dict("records")


def _split(records: list[dict[str, Any]], limits: Limits) -> tuple[list[dict[str, Any]], list[Exclusion]]:
    """Rows that may be recommended, and the others with the reason they may not."""
    ok, excluded = [], []
    for row in records:
        why = _exclusion(row, limits.max_memory_gib, limits.max_compile_s, limits.warm_start)
        if why:
            excluded.append(Exclusion(frames.setting_label(row), _opt_str(row.get("trial_id")), *why))
        else:
            ok.append(row)
    return ok, excluded


def _exclusion(row: dict[str, Any], max_mem: float | None, max_compile: float | None,
               warm_start: bool = False) -> tuple[str, str] | None:
    """(kind, reason) when the row cannot be recommended, else None."""
    if row["status"] != "ok":
        err = str(row.get("error") or "").strip().splitlines()
        return "failed", f"status {row['status']}" + (f": {err[0][:160]}" if err else "")
    if not row["is_eager"]:
        if is_missing(row["accuracy_ok"]):
            return "accuracy unchecked", "accuracy not checked"
        if not bool(row["accuracy_ok"]):
            return "inaccurate", (f"inaccurate: rel_err {fmt_num(row.get('rel_err'))} > "
                                  f"tolerance {fmt_num(row.get('accuracy_tol'))}")
    if _is_true(row.get("recompile_limit_hit")) or _is_true(row.get("fell_back_to_eager")):
        return "recompile limit", "hit the recompile limit and fell back to eager"
    if not row["throughput_items_s"] > 0:
        return "unmeasured", "no throughput measured"
    mem = ranking.run_peak_gib(row)
    if max_mem is not None and (mem is None or mem > max_mem):
        return "over memory limit", (f"peak memory {fmt_num(mem)} GiB > limit {fmt_num(max_mem)} GiB"
                                     if mem is not None else "peak memory not measured")
    cost = frames.compile_cost_s(row, warm_start)
    if max_compile is not None and not cost <= max_compile:
        what = "compiles over the stream" if frames.is_stream(row) else _compile_what(row, warm_start)
        return "over compile limit", f"{what} {fmt_num(cost)} s > limit {fmt_num(max_compile)} s"
    return None


def _compile_what(row: dict[str, Any], warm_start: bool) -> str:
    if warm_start and row.get("path") == "aoti" and not frames.is_missing(row.get("aoti_load_s")):
        return "package load (with inductor's CPU check) and first call"
    warm = warm_start and not frames.is_missing(row.get("warm_megacache_s"))
    return "warm start from the artifact" if warm else "build (export + package)" if row.get("path") == "aoti" \
        else "cold compile"


def _candidate(row: dict[str, Any], items: float | None, warm_start: bool = False) -> Candidate:
    tp = float(row["throughput_items_s"])
    compile_s = frames.compile_cost_s(row, warm_start)
    standing = ranking.standing(row)
    return Candidate(
        setting=frames.setting_label(row), compile_call=frames.advice(row), mode=str(row["mode"]),
        dynamic={"True": True, "False": False}.get(str(row.get("dynamic_label"))),
        backend=_opt_str(row.get("backend")),
        batch_size=int(row["batch_size"]) if pd.notna(row["batch_size"]) else None,
        throughput_items_s=tp, peak_mem_gib=ranking.run_peak_gib(row),
        steady_peak_mem_gib=_opt_float(row.get("peak_mem_gib")), compile_s=compile_s,
        speedup_vs_eager=standing.speedup,
        speedup_ci_low=standing.low, speedup_ci_high=standing.high,
        speedup_established=standing.established, speedup_note=standing.note(),
        seconds_per_item=1.0 / tp, workload_s=ranking.work_s(tp, compile_s, items) if items else None,
        trial_id=_opt_str(row.get("trial_id")), stream=frames.is_stream(row),
        compile_what="compiles over the stream" if frames.is_stream(row) else _compile_what(row, warm_start),
        spread_pct=_opt_float(row.get("throughput_spread_pct")), noise_pct=standing.noise_pct,
        host_note=ranking.host_speed_note(row), own_options=not frames.is_missing(row.get("inductor_options_json")))


def _runner_up(ranked: list[Candidate]) -> Candidate | None:
    """The best candidate with a different torch.compile call, else the next one."""
    if len(ranked) < 2:
        return None
    other = [c for c in ranked[1:] if c.compile_call != ranked[0].compile_call]
    return other[0] if other else ranked[1]


def _eager_at(ranked: list[Candidate], best: Candidate | None) -> Candidate | None:
    eager = [c for c in ranked if c.is_eager]
    same_batch = [c for c in eager if best is not None and c.batch_size == best.batch_size]
    return (same_batch or eager or [None])[0]


def _workload_note(iterations: int | None, batch_size: int | None, ref_batch: int | None) -> str:
    if not iterations:
        return "long run assumed (no iterations given): ranked by throughput, compile time paid back"
    if ref_batch is None:
        return f"{iterations} iterations, but no usable batch size: ranked by throughput"
    how = "the batch size asked for" if batch_size else "the largest batch measured"
    return (f"{iterations:,} iterations x batch {ref_batch} ({how}) = {iterations * ref_batch:,} items; "
            "each setting: compile_s + items / throughput")


def _is_true(value: Any) -> bool:
    return not is_missing(value) and bool(value)


def _opt_str(value: Any) -> str | None:
    return None if is_missing(value) else str(value)


def _opt_float(value: Any) -> float | None:
    return None if is_missing(value) else float(value)


def _json_safe(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    if obj is pd.NA:
        return None
    if hasattr(obj, "item") and not isinstance(obj, (str, bytes)):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj
