"""Make a results DataFrame ready for analysis: typed columns, eager rows, speedups, labels.

Shared by pareto, recommend, compare and report. Pure pandas: no torch, no Ray.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sweeper.analysis import deploy_calls
from sweeper.analysis.drift import self_check
from sweeper.results.schema import EAGER
from sweeper.results.store import with_all_columns

CONFIG_KEYS = ["model", "mode", "dynamic", "batch_size", "seq_len", "phase", "precision", "backend",
               "workload", "bucketing", "mark_dynamic", "scope", "new_tokens", "cache", "option_set", "path",
               "accelerator_type"]
"""Columns that identify one measured setting across sweeps (used to match base and new runs)."""

CONTEXT_KEYS = ["model", "phase", "precision", "device_name", "accelerator_type", "workload"]
"""Settings in one context compete with each other; across contexts they are not comparable."""

_NUMERIC = [
    "batch_size", "seq_len", "attempts", "compile_s", "first_call_s", "warm_compile_s",
    "warm_first_call_s", "throughput_items_s", "throughput_tokens_s", "latency_p50_ms",
    "latency_p90_ms", "latency_p99_ms", "throughput_spread_pct", "peak_mem_gib",
    "peak_mem_compile_gib", "peak_reserved_gib", "eager_throughput_items_s",
    "eager_latency_p50_ms", "eager_peak_mem_gib", "speedup_vs_eager", "mem_ratio_vs_eager",
    "break_even_iters", "graphs", "graph_breaks", "recompiles", "cudagraph_skips",
    "max_abs_err", "rel_err", "accuracy_tol", "trial_wall_s",
    "stream_batches", "stream_shapes", "pad_waste", "stream_s", "eager_stream_s", "stream_speedup_vs_eager",
    "real_tokens_per_s", "eager_real_tokens_per_s", "stream_compile_s", "compile_s_per_shape",
    "stream_break_even_batches", "accuracy_shapes", "speedup_ci_low", "speedup_ci_high", "host_busy_windows_pct",
    "eager_err_vs_fp64", "compiled_err_vs_fp64", "mem_need_reserved_gib", "device_mem_used_gib", "cpu_count",
    "warm_megacache_s", "warm_megacache_first_call_s", "megacache_load_s", "megacache_bytes", "compiled_regions",
    "eager_spread_pct", "compiled_need_reserved_gib", "witness_ms", "eager_witness_ms", "witness_ref_ms",
    "slow_windows_pct", "matched_pairs", "speedup_slow", "throughput_slow_items_s", "eager_throughput_slow_items_s",
    "speedup_all_windows", "host_wait_s", "new_tokens", "ttft_ms", "eager_ttft_ms", "decode_tokens_per_s",
    "eager_decode_tokens_per_s", "decode_token_p50_ms", "generate_s", "eager_generate_s", "decode_speedup_vs_eager",
    "tokens_match_rate", "aoti_export_s", "aoti_package_s", "aoti_package_bytes", "aoti_load_s",
    "lost_attempts",
]
_TEXT = ["model", "mode", "backend", "phase", "precision", "device_name", "status", "error",
         "workload", "length_source", "bucketing", "notes", "accuracy_reference", "cpu_affinity", "scope",
         "region_classes", "block_choice", "megacache_file", "host_state", "cache",
         "generate_compile_path", "option_set", "path", "inductor_options_json", "aoti_package_file",
         "accelerator_type", "lost_nodes"]


def prepare(df: pd.DataFrame) -> pd.DataFrame:
    """A typed copy of `df` with every schema column present and derived columns added.

    Adds `is_eager`, `accuracy_ok` as nullable boolean, `dynamic_label` ("None"/"True"/"False"),
    fills eager `compile_s` with 0 and missing `speedup_vs_eager` from the eager baseline, and adds
    the sweep's self-check (`drift`): `baseline_drift_pct`, `eager_trial_speedup` and the reported
    interval `speedup_low` / `speedup_high`.
    """
    out = with_all_columns(df).copy()
    for name in _NUMERIC:
        out[name] = pd.to_numeric(out[name], errors="coerce").astype("float64")
    for name in _TEXT:
        out[name] = out[name].astype("object").where(out[name].notna(), None)
    out["mode"] = out["mode"].fillna(EAGER)
    out["scope"] = out["scope"].fillna("whole")  # rows from before the setting compiled the whole model
    out["path"] = out["path"].fillna("jit")  # and were compiled by torch.compile
    out = out.copy()  # one block per dtype before the derived columns go in
    out["model"] = out["model"].fillna("(unnamed model)")
    out["status"] = out["status"].fillna("unknown")
    out["is_eager"] = out["mode"].eq(EAGER)
    out["accuracy_ok"] = _nullable_bool(out["accuracy_ok"])
    out["fell_back_to_eager"] = _nullable_bool(out["fell_back_to_eager"])
    out["mark_dynamic"] = _nullable_bool(out["mark_dynamic"]).fillna(False).astype(bool)
    out["dynamic_label"] = out["dynamic"].map(dynamic_text).astype("object")
    out.loc[out["is_eager"] & out["compile_s"].isna(), "compile_s"] = 0.0
    out["speedup_vs_eager"] = _fill_speedup(out)
    given = pd.to_numeric(out.get("baseline_drift_pct", pd.Series(index=out.index, dtype="float64")), errors="coerce")
    out = out.copy()  # one block per dtype before the self-check reads it
    checked = self_check(out)
    out["baseline_drift_pct"] = checked.pop("baseline_drift_pct").fillna(given)  # a frame may carry it already
    return out.assign(**checked).copy()  # one block per dtype: the frame gains columns later


def is_missing(value: object) -> bool:
    """Whether one cell holds no value: None, pandas' NA or NaT, or a NaN float."""
    return (value is None or value is pd.NA or value is pd.NaT
            or (isinstance(value, (float, np.floating)) and bool(np.isnan(value))))


def flag(value: object) -> bool | None:
    """A yes/no cell as True, False, or None when it holds no value."""
    return None if is_missing(value) else bool(value)


def _nullable_bool(s: pd.Series) -> pd.Series:
    return s.map(flag).astype("boolean")


def _fill_speedup(df: pd.DataFrame) -> pd.Series:
    """speedup_vs_eager where measured, else from the same-process baseline, else from eager rows."""
    tp = df["throughput_items_s"].to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        from_baseline = tp / df["eager_throughput_items_s"].to_numpy()
    speedup = df["speedup_vs_eager"].to_numpy(copy=True)
    speedup = np.where(np.isnan(speedup) & np.isfinite(from_baseline), from_baseline, speedup)
    is_eager = df["is_eager"].to_numpy()
    eager = is_eager & df["status"].eq("ok").to_numpy() & (tp > 0)
    speedup[eager] = 1.0
    missing = np.isnan(speedup) & ~is_eager & (tp > 0)
    if missing.any() and eager.any():
        rel = df[missing | eager]
        parts = [rel[c].map(str) for c in [*CONTEXT_KEYS, "batch_size", "seq_len"]]
        key = parts[0].str.cat(parts[1:], sep="|").to_numpy()
        rel_eager = eager[missing | eager]
        base = pd.Series(tp[eager]).groupby(key[rel_eager]).median()
        speedup[missing] = tp[missing] / pd.Series(key[~rel_eager]).map(base).to_numpy(dtype=float)
    return pd.Series(speedup, index=df.index, dtype="float64")


def accurate(df: pd.DataFrame) -> pd.Series:
    """Rows that ran and whose outputs were checked and matched eager (eager rows count as accurate)."""
    return df["status"].eq("ok") & (df["is_eager"] | df["accuracy_ok"].fillna(False).astype(bool))


def fell_back(df: pd.DataFrame) -> pd.Series:
    """Rows whose compiled code hit the recompile limit, so later new shapes ran eager."""
    return df["fell_back_to_eager"].fillna(False).astype(bool)


def dynamic_text(value: object) -> str:
    """`None`, `True` or `False`, the way torch.compile(dynamic=...) is written."""
    if is_missing(value):
        return "None"
    if isinstance(value, str):
        return value if value in ("True", "False") else "None"
    return str(bool(value))


def compile_call(mode: str | None, dynamic: object, backend: str | None) -> str:
    """The exact line to paste for one setting; for eager, the advice not to compile."""
    if mode is None or mode == EAGER:
        return "do not compile: eager wins"
    args = [f'mode="{mode}"', f"dynamic={dynamic_text(dynamic)}"]
    if backend and backend != "inductor":
        args.insert(0, f'backend="{backend}"')
    return f"torch.compile(model, {', '.join(args)})"


def is_stream(row: pd.Series | dict) -> bool:
    """Whether a row measured an input stream (it names its workload)."""
    return isinstance(row.get("workload"), str)


def advice(row: pd.Series | dict) -> str:
    """What to do for one row's setting, as code: for a stream, its bucketing and mark_dynamic,
    then the torch.compile call (or the advice not to compile)."""
    steps = []
    policy = _bucketing(row)
    if policy and is_stream(row):
        steps.append(f"pad each batch by bucketing {policy}")
    if _marks_dynamic(row):
        steps.append("torch._dynamo.mark_dynamic(input, 1) on each input")
    steps.append(compile_call(row.get("mode"), row.get("dynamic_label", "None"), row.get("backend")))
    if row.get("mode") != EAGER:
        steps[-1] = deploy_calls.with_options(steps[-1], row)
    if row.get("scope") == "regional" and steps[-1].startswith(_WHOLE_CALL):
        blocks = row.get("region_classes")
        blocks = " / ".join(str(blocks).split(",")) if not is_missing(blocks) else "repeated block"
        steps[-1] = f"block.compile({steps[-1][len(_WHOLE_CALL):-1]}) for every {blocks} block (regional)"
    return "; ".join(steps)


_WHOLE_CALL = "torch.compile(model, "


def _bucketing(row: pd.Series | dict) -> str | None:
    """The row's bucketing policy, or None when it pads nothing (`none`, or not a token stream)."""
    policy = row.get("bucketing")
    return policy if isinstance(policy, str) and policy != "none" else None


def _marks_dynamic(row: pd.Series | dict) -> bool:
    mark = row.get("mark_dynamic")
    return isinstance(mark, (bool, np.bool_)) and bool(mark)


def compile_cost_s(row: pd.Series | dict, warm_start: bool = False) -> float:
    """Seconds of compiling a setting costs: every compile of a stream (`stream_compile_s`),
    else the cold compile of the one shape (`compile_s`); 0 when not measured (eager). With
    `warm_start` (the deployment ships the trial's Mega-Cache artifact), a fixed-shape setting
    costs its warm start from the artifact where measured: loading it plus the first call."""
    warm = row.get("warm_megacache_s")
    if warm_start and row.get("path") == "aoti" and not is_missing(row.get("aoti_load_s")):
        return deploy_calls.aoti_start_s(row)
    if warm_start and not is_stream(row) and not is_missing(warm):
        load = row.get("megacache_load_s")
        return float(warm) + (0.0 if is_missing(load) else float(load))
    for key in ("stream_compile_s", "compile_s"):
        v = row.get(key)
        if not is_missing(v):
            return float(v)
    return 0.0


def setting_label(row: pd.Series | dict) -> str:
    """Short human label of one row's setting, e.g. `max-autotune, dynamic=False, batch 64`."""
    mode = row.get("mode") or EAGER
    parts = [str(mode)]
    if mode != EAGER:
        dyn = row.get("dynamic_label", "None")
        parts.append(f"dynamic={dyn}")
        backend = row.get("backend")
        if backend and backend != "inductor":
            parts.append(f"backend={backend}")
        if _marks_dynamic(row):
            parts.append("mark_dynamic")
        if row.get("scope") == "regional":
            parts.append("regional")
        parts += deploy_calls.label_parts(row)
    policy = _bucketing(row)
    if policy:
        parts.append(f"bucketing {policy}")
    bs = row.get("batch_size")
    if not is_missing(bs):
        parts.append(f"batch {int(bs)}")
    sl = row.get("seq_len")
    if not is_missing(sl):
        parts.append(f"seq {int(sl)}")
    return ", ".join(parts)


def fmt_num(value: object, digits: int = 3) -> str:
    """A number for people: 3 significant digits, '—' when missing, 'inf' when infinite."""
    if is_missing(value):
        return "—"
    try:
        x = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return str(value)
    if np.isnan(x):
        return "—"
    if np.isinf(x):
        return "inf" if x > 0 else "-inf"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    if x == 0 or abs(x) >= 0.01:
        return f"{x:.{digits}g}"
    return f"{x:.{digits - 1}e}"
