"""Recommend one torch.compile setting for a model under memory, compile-time and run-length limits.

What is compared, and why it is fair:

* Only rows of one context compete: one model, phase, precision, device and sequence length.
  Throughput across them measures different work, so an ambiguous question is refused
  with the choices listed (``RecommendError``).
* Settings are ranked by the time a fixed amount of work takes. Without ``iterations`` the
  run is taken as long, so compile time is paid back and the rank is seconds per item
  (1 / throughput). With ``iterations`` the work is ``iterations x batch`` items, where
  batch is ``batch_size`` if given, else the largest batch measured; each candidate needs
  ``compile_s + items / throughput_items_s`` seconds for it. That is the cost
  ``compile_s + iterations x (batch_size / throughput)`` at equal batch size, and stays
  fair across batch sizes: a bigger batch does not get credit for doing more work.
  Pass ``batch_size`` when your batch is fixed (a training hyperparameter, a latency bound).
* The memory limit applies to the whole run: the larger of the steady peak and the peak
  while compiling / autotuning, since either can run out of memory.
* For an input stream, the compile cost is every compile of the stream (`stream_compile_s`),
  not the first shape's alone, and the advice names the bucketing to pad with.
* Accuracy must have been checked and passed; eager rows are the reference, so accurate.
  A trial that hit the recompile limit ran eager code and is not a compile setting to use.
* Where no eager row exists for a batch size, the eager baseline measured inside the
  compiled trials stands in for it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import pandas as pd

from sweeper.analysis import frames as rows
from sweeper.analysis.frames import fmt_num

_CONTEXT_DIMS = [("phase", "--phase"), ("precision", "--precision"), ("device_name", "--device"),
                 ("seq_len", "--seq-len"), ("workload", "--workload")]


class RecommendError(ValueError):
    """A question the results cannot answer: unknown model, or a context left ambiguous."""


@dataclass(frozen=True)
class Candidate:
    setting: str
    compile_call: str
    mode: str
    dynamic: str
    backend: str | None
    batch_size: int | None
    throughput_items_s: float
    peak_mem_gib: float | None
    compile_s: float
    speedup_vs_eager: float | None
    seconds_per_item: float
    workload_s: float | None
    trial_id: str | None
    stream: bool = False
    """An input-stream trial: compile_s is every compile of the stream."""
    spread_pct: float | None = None
    """(max - min) / median of the timed windows: how far apart repeated timings fell."""


@dataclass(frozen=True)
class Exclusion:
    setting: str
    trial_id: str | None
    kind: str
    reason: str


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
    excluded: list[Exclusion] = field(default_factory=list)

    @property
    def advice(self) -> str:
        if self.best is None:
            return "no setting meets the constraints"
        return self.best.compile_call

    def to_dict(self) -> dict[str, Any]:
        """Machine-readable form (``--json``): non-finite numbers become null."""
        return _json_safe({"advice": self.advice, **asdict(self)})


def recommend(
    df: pd.DataFrame,
    model: str,
    phase: str | None = None,
    precision: str | None = None,
    max_memory_gib: float | None = None,
    max_compile_s: float | None = None,
    iterations: int | None = None,
    batch_size: int | None = None,
    device_name: str | None = None,
    seq_len: int | None = None,
    workload: str | None = None,
) -> Recommendation:
    """The best setting for `model` under the limits, the runner-up, and why others were left out."""
    data = _select(rows.prepare(df), model, phase=phase, precision=precision,
                   device_name=device_name, seq_len=seq_len, workload=workload, batch_size=batch_size)
    context = {"model": model, **{d: _single(data[d]) for d, _ in _CONTEXT_DIMS}}
    baseline = _baseline_rows(data)
    if not baseline.empty:
        data = pd.concat([data, baseline], ignore_index=True)
    ok, excluded = _split(data, max_memory_gib, max_compile_s)
    ref_batch = batch_size or max((int(r["batch_size"]) for r in ok if pd.notna(r["batch_size"])), default=None)
    items = float(iterations * ref_batch) if iterations and ref_batch else None
    ranked = sorted((_candidate(r, items) for r in ok), key=_rank_key)
    best = ranked[0] if ranked else None
    runner_up = _runner_up(ranked)
    return Recommendation(
        context=context,
        constraints={"max_memory_gib": max_memory_gib, "max_compile_s": max_compile_s,
                     "iterations": iterations, "batch_size": batch_size},
        workload_items=items,
        workload_note=_workload_note(iterations, batch_size, ref_batch),
        best=best,
        runner_up=runner_up,
        runner_up_reason=_why_lost(runner_up, best, items) if best and runner_up else None,
        eager=_eager_at(ranked, best),
        excluded=excluded,
    )


def _select(data: pd.DataFrame, model: str, **wanted: Any) -> pd.DataFrame:
    models = sorted(str(m) for m in data["model"].dropna().unique())
    if model not in models:
        raise RecommendError(f"unknown model {model!r}; models in these results: {', '.join(models) or 'none'}")
    data = data[data["model"].eq(model)]
    for dim, value in wanted.items():
        if value is None:
            continue
        choices = _choices(data[dim])
        data = data[data[dim].eq(value)]
        if data.empty:
            raise RecommendError(f"{model}: no trials with {dim}={value}; measured: {', '.join(choices) or 'none'}")
    ambiguous = [f"{flag} ({' | '.join(_choices(data[d]))})" for d, flag in _CONTEXT_DIMS
                 if wanted.get(d) is None and len(_choices(data[d])) > 1]
    if ambiguous:
        raise RecommendError(f"{model} was measured in several contexts that do not compare; "
                             f"choose with {', '.join(ambiguous)}")
    return data.reset_index(drop=True)


def _choices(col: pd.Series) -> list[str]:
    values = col.dropna().unique()
    return sorted(str(int(v)) if isinstance(v, float) and v.is_integer() else str(v) for v in values)


def _single(col: pd.Series) -> Any:
    values = col.dropna().unique()
    if len(values) != 1:
        return None
    v = values[0]
    return int(v) if isinstance(v, float) and v.is_integer() else v


def _baseline_rows(data: pd.DataFrame) -> pd.DataFrame:
    """Eager stand-ins from compiled trials' own baselines, for batch sizes with no eager row."""
    has_eager = set(data.loc[data["is_eager"] & data["status"].eq("ok"), "batch_size"].dropna())
    src = data[~data["is_eager"] & data["eager_throughput_items_s"].gt(0)
               & ~data["batch_size"].isin(has_eager)]
    if src.empty:
        return data.iloc[0:0]
    agg = src.groupby("batch_size").agg(
        throughput_items_s=("eager_throughput_items_s", "median"),
        peak_mem_gib=("eager_peak_mem_gib", "median")).reset_index()
    agg = agg.assign(mode=rows.EAGER, is_eager=True, status="ok", compile_s=0.0,
                     dynamic_label="None", speedup_vs_eager=1.0, backend=None,
                     trial_id=None, accuracy_ok=pd.NA, recompile_limit_hit=None)
    return agg


def _split(data: pd.DataFrame, max_mem: float | None, max_compile: float | None,
           ) -> tuple[list[pd.Series], list[Exclusion]]:
    """Rows that may be recommended, and the others with the reason they may not."""
    ok, excluded = [], []
    for _, row in data.iterrows():
        why = _exclusion(row, max_mem, max_compile)
        if why:
            excluded.append(Exclusion(rows.setting_label(row), _opt_str(row["trial_id"]), *why))
        else:
            ok.append(row)
    return ok, excluded


def _exclusion(row: pd.Series, max_mem: float | None, max_compile: float | None) -> tuple[str, str] | None:
    """(kind, reason) when the row cannot be recommended, else None."""
    if row["status"] != "ok":
        err = str(row.get("error") or "").strip().splitlines()
        return "failed", f"status {row['status']}" + (f": {err[0][:160]}" if err else "")
    if not row["is_eager"]:
        if row["accuracy_ok"] is pd.NA:
            return "accuracy unchecked", "accuracy not checked"
        if not bool(row["accuracy_ok"]):
            return "inaccurate", (f"inaccurate: rel_err {fmt_num(row.get('rel_err'))} > "
                                  f"tolerance {fmt_num(row.get('accuracy_tol'))}")
    if _is_true(row.get("recompile_limit_hit")):
        return "recompile limit", "hit the recompile limit and fell back to eager"
    if not row["throughput_items_s"] > 0:
        return "unmeasured", "no throughput measured"
    mem = _run_peak(row)
    if max_mem is not None and (mem is None or mem > max_mem):
        return "over memory limit", (f"peak memory {fmt_num(mem)} GiB > limit {fmt_num(max_mem)} GiB"
                                     if mem is not None else "peak memory not measured")
    cost = rows.compile_cost_s(row)
    if max_compile is not None and not cost <= max_compile:
        what = "compiles over the stream" if rows.is_stream(row) else "cold compile"
        return "over compile limit", f"{what} {fmt_num(cost)} s > limit {fmt_num(max_compile)} s"
    return None


def _run_peak(row: pd.Series) -> float | None:
    values = [row.get("peak_mem_gib"), row.get("peak_mem_compile_gib")]
    values = [float(v) for v in values if v is not None and pd.notna(v)]
    return max(values) if values else None


def _candidate(row: pd.Series, items: float | None) -> Candidate:
    tp = float(row["throughput_items_s"])
    compile_s = rows.compile_cost_s(row)
    speedup = row.get("speedup_vs_eager")
    spread = row.get("throughput_spread_pct")
    return Candidate(
        setting=rows.setting_label(row),
        compile_call=rows.advice(row),
        mode=str(row["mode"]),
        dynamic=str(row["dynamic_label"]),
        backend=_opt_str(row.get("backend")),
        batch_size=int(row["batch_size"]) if pd.notna(row["batch_size"]) else None,
        throughput_items_s=tp,
        peak_mem_gib=_run_peak(row),
        compile_s=compile_s,
        speedup_vs_eager=float(speedup) if speedup is not None and pd.notna(speedup) else None,
        seconds_per_item=1.0 / tp,
        workload_s=compile_s + items / tp if items else None,
        trial_id=_opt_str(row.get("trial_id")),
        stream=rows.is_stream(row),
        spread_pct=float(spread) if spread is not None and pd.notna(spread) else None,
    )


def _rank_key(c: Candidate) -> tuple[float, float, float]:
    time = c.workload_s if c.workload_s is not None else c.seconds_per_item
    return (time, c.peak_mem_gib if c.peak_mem_gib is not None else math.inf, c.compile_s)


def _runner_up(ranked: list[Candidate]) -> Candidate | None:
    """The best candidate with a different torch.compile call, else the next one."""
    if len(ranked) < 2:
        return None
    other = [c for c in ranked[1:] if c.compile_call != ranked[0].compile_call]
    return other[0] if other else ranked[1]


def _why_lost(loser: Candidate, best: Candidate, items: float | None) -> str:
    if items is not None and loser.workload_s is not None and best.workload_s is not None:
        extra = loser.workload_s - best.workload_s
        if loser.throughput_items_s > best.throughput_items_s:
            return (f"faster per item ({fmt_num(loser.throughput_items_s)} vs {fmt_num(best.throughput_items_s)} "
                    f"items/s) but its {fmt_num(loser.compile_s)} s compile is not paid back in "
                    f"{fmt_num(items)} items: {fmt_num(extra)} s slower in total")
        return (f"{fmt_num(extra)} s slower for the workload ({fmt_num(loser.workload_s)} s vs "
                f"{fmt_num(best.workload_s)} s; {fmt_num(loser.throughput_items_s)} vs "
                f"{fmt_num(best.throughput_items_s)} items/s, compile {fmt_num(loser.compile_s)} s vs "
                f"{fmt_num(best.compile_s)} s)")
    gap = 100.0 * (1.0 - loser.throughput_items_s / best.throughput_items_s)
    if gap > 0:
        return (f"{fmt_num(gap)}% lower throughput ({fmt_num(loser.throughput_items_s)} vs "
                f"{fmt_num(best.throughput_items_s)} items/s)" + _within_noise(gap, loser, best))
    return (f"same throughput, but more memory ({fmt_num(loser.peak_mem_gib)} vs {fmt_num(best.peak_mem_gib)} GiB) "
            f"or longer compile ({fmt_num(loser.compile_s)} vs {fmt_num(best.compile_s)} s)")


def _within_noise(gap_pct: float, *cands: Candidate) -> str:
    """A warning when a throughput gap is smaller than the spread of the trials' own windows."""
    spread = max((c.spread_pct for c in cands if c.spread_pct is not None), default=None)
    if spread is None or gap_pct >= spread:
        return ""
    return (f"; a gap smaller than the {fmt_num(spread)}% spread of these trials' timed windows, "
            "so a tie within measurement noise: re-measure before relying on it")


def _eager_at(ranked: list[Candidate], best: Candidate | None) -> Candidate | None:
    eager = [c for c in ranked if c.mode == rows.EAGER]
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
    return value is not None and value is not pd.NA and not (isinstance(value, float) and math.isnan(value)) \
        and bool(value)


def _opt_str(value: Any) -> str | None:
    return None if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)) else str(value)


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
