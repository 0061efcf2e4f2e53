"""Compare a base and a new set of results setting by setting; flag regressions beyond a threshold.

Rows are matched on their config (model, mode, dynamic, batch_size, seq_len, phase,
precision, backend, GPU type); `compare_types` sets one GPU type against another instead.
When one side holds several rows of a setting (several sweeps or devices), its ok rows are
summarised by their median. A change counts when it is beyond `threshold_pct` percent; compile
time must also move by more than `compile_floor_s` seconds, so sub-second noise on tiny
compiles is not flagged. Pure pandas.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sweeper.analysis import frames, ranking
from sweeper.results.schema import ResultsError

METRICS: list[tuple[str, str, str]] = [
    # column, better direction, name in messages
    ("throughput_items_s", "max", "throughput"),
    ("compile_s", "min", "compile time"),
    ("peak_mem_gib", "min", "peak memory"),
]
VERDICT_ORDER = ["now fails", "regression", "still fails", "improvement", "fixed",
                 "unchanged", "only in base", "only in new"]
_KEY_COLS = ["dynamic_label" if k == "dynamic" else k for k in frames.CONFIG_KEYS]  # labels: None matches None


def compare_runs(
    base_df: pd.DataFrame,
    new_df: pd.DataFrame,
    threshold_pct: float = ranking.CHANGE_PCT,
    compile_floor_s: float = ranking.COMPILE_FLOOR_S,
) -> pd.DataFrame:
    """One row per setting seen in either input, worst verdicts first.

    Columns: the config keys, `<metric>_base`, `<metric>_new`, `<metric>_change_pct` for
    throughput_items_s, compile_s and peak_mem_gib, status_base, status_new, error_new,
    verdict (one of VERDICT_ORDER) and changes (a readable list of what moved).
    """
    base, new = _summarise(frames.prepare(base_df)), _summarise(frames.prepare(new_df))
    merged = base.merge(new, on=_KEY_COLS, how="outer", suffixes=("_base", "_new"), indicator=True)
    for col, _, _ in METRICS:
        b, n = merged[f"{col}_base"], merged[f"{col}_new"]
        merged[f"{col}_change_pct"] = np.where(b > 0, (n - b) / b * 100.0, np.nan)
    judged = [_judge(r, threshold_pct, compile_floor_s) for _, r in merged.iterrows()]
    merged["verdict"] = [v for v, _ in judged]
    merged["changes"] = [c for _, c in judged]
    merged = merged.drop(columns="_merge").rename(columns={"dynamic_label": "dynamic"})
    merged["seq_len"] = merged["seq_len"].where(merged["seq_len"] >= 0)
    order = merged["verdict"].map({v: i for i, v in enumerate(VERDICT_ORDER)})
    return merged.assign(_order=order).sort_values(["_order", "model", "mode"]).drop(columns="_order") \
        .reset_index(drop=True)


def compare_types(df: pd.DataFrame, base_type: str, new_type: str, threshold_pct: float = ranking.CHANGE_PCT,
                  compile_floor_s: float = ranking.COMPILE_FLOOR_S) -> pd.DataFrame:
    """The settings measured on GPU type `base_type` against the same settings on `new_type`
    (`axes.accelerator_type`), as `compare_runs` judges two runs; ResultsError names the types measured."""
    measured = sorted(set(df["accelerator_type"].dropna())) if "accelerator_type" in df.columns else []
    for name in (base_type, new_type):
        if name not in measured:
            raise ResultsError(f"no rows of accelerator_type {name!r}; measured: {', '.join(measured) or 'none'}")

    def on(name: str) -> pd.DataFrame:
        return df[df["accelerator_type"].eq(name)].assign(accelerator_type=None)

    return compare_runs(on(base_type), on(new_type), threshold_pct, compile_floor_s)


def _summarise(df: pd.DataFrame) -> pd.DataFrame:
    """One row per setting: median metrics of its ok rows, its status and first error."""
    cols = _KEY_COLS + ["status", "error", "accuracy_ok"] + [m for m, _, _ in METRICS]
    if df.empty:
        return pd.DataFrame(columns=_KEY_COLS + ["status", "error", "accurate", "n"]
                            + [m for m, _, _ in METRICS])
    df = df[cols].assign(seq_len=df["seq_len"].fillna(-1), new_tokens=df["new_tokens"].fillna(-1),
                         **{k: df[k].fillna("") for k in _KEY_COLS if k not in ("batch_size", "seq_len", "new_tokens")})
    ok = df[df["status"].eq("ok")]
    metrics = ok.groupby(_KEY_COLS, dropna=False)[[m for m, _, _ in METRICS]].median()
    accurate = ok.assign(_wrong=ok["accuracy_ok"].eq(False).fillna(False).astype(bool)) \
        .groupby(_KEY_COLS, dropna=False)["_wrong"].any().map(lambda wrong: not wrong).rename("accurate")
    outcome = df.groupby(_KEY_COLS, dropna=False).agg(
        status=("status", lambda s: "ok" if s.eq("ok").any() else s.mode().iloc[0]),
        error=("error", lambda s: next((e for e in s if e), None)),
        n=("status", "size"))
    return outcome.join(metrics).join(accurate).reset_index()


def _judge(r: pd.Series, threshold: float, compile_floor_s: float) -> tuple[str, str]:
    if r["_merge"] != "both":
        return ("only in base", "") if r["_merge"] == "left_only" else ("only in new", "")
    ok_b, ok_n = r["status_base"] == "ok", r["status_new"] == "ok"
    if not ok_n:
        err = str(r.get("error_new") or "").splitlines()
        text = f"status {r['status_new']}" + (f": {err[0][:160]}" if err else "")
        return ("now fails" if ok_b else "still fails"), text
    if not ok_b:
        return "fixed", f"was {r['status_base']}, now ok"
    worse, better = [], []
    if frames.flag(r.get("accurate_base")) is True and frames.flag(r.get("accurate_new")) is False:
        worse.append("now inaccurate")
    for col, direction, name in METRICS:
        pct = r[f"{col}_change_pct"]
        if frames.is_missing(pct) or abs(pct) <= threshold:
            continue
        if col == "compile_s" and abs(r[f"{col}_new"] - r[f"{col}_base"]) <= compile_floor_s:
            continue
        gain = pct > 0 if direction == "max" else pct < 0
        (better if gain else worse).append(f"{name} {pct:+.1f}%")
    if worse:
        return "regression", "; ".join(worse + better)
    return ("improvement", "; ".join(better)) if better else ("unchanged", "")
