"""The price of each inductor option set, and the first-call cost of each deployment path.

`price_table`: every setting measured under several option sets, each set against the `default`
set of the same setting and context: the change in throughput (the ratio of the two speedups over
their own in-process eager windows, so process-to-process drift cancels; its interval from the two
speedup intervals, widest combination) and in cold and warm compile time (an interval where the
setting was measured more than once). `deploy_table`: per setting, what its first call costs a
deployment that compiles cold (JIT), starts from the trial's Mega-Cache artifact, or loads an
AOTInductor package. Pure pandas.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sweeper.analysis import deploy_calls, frames

DEFAULT_SET = "default"
"""The option set the others are priced against (sweeper.spec.options.DEFAULT_SET)."""
_SETTING = [*frames.CONTEXT_KEYS, "mode", "dynamic_label", "batch_size", "seq_len", "scope", "bucketing",
            "mark_dynamic"]
"""A setting apart from its option set and path: rows that share these are priced against each other."""


def _ok_compiled(df: pd.DataFrame) -> pd.DataFrame:
    d = frames.prepare(df)
    d = d[~d["is_eager"] & frames.accurate(d) & d["throughput_items_s"].gt(0)].copy()
    for k in ("seq_len", "workload", "bucketing", "device_name"):
        d[k] = d[k].fillna(-1 if k == "seq_len" else "")
    return d


def _summary(g: pd.DataFrame) -> dict[str, float]:
    """Median figures of one set's rows of one setting, and the ranges of its repeats."""
    out: dict[str, float] = {"n": float(len(g))}
    for col in ("speedup_vs_eager", "speedup_ci_low", "speedup_ci_high", "compile_s", "warm_compile_s",
                "warm_megacache_s", "throughput_items_s"):
        out[col] = float(g[col].median())
        out[f"{col}_min"], out[f"{col}_max"] = float(g[col].min()), float(g[col].max())
    return out


def _change_pct(new: float, base: float) -> float:
    return (new / base - 1.0) * 100.0 if base and np.isfinite(base) and np.isfinite(new) else float("nan")


def _price(s: dict[str, float], d: dict[str, float]) -> dict[str, float]:
    out = {"throughput_change_pct": _change_pct(s["speedup_vs_eager"], d["speedup_vs_eager"]),
           "throughput_change_low_pct": _change_pct(s["speedup_ci_low"], d["speedup_ci_high"]),
           "throughput_change_high_pct": _change_pct(s["speedup_ci_high"], d["speedup_ci_low"])}
    if not np.isfinite(out["throughput_change_pct"]):  # no speedups: the throughputs themselves
        out["throughput_change_pct"] = _change_pct(s["throughput_items_s"], d["throughput_items_s"])
    for col, name in (("compile_s", "cold_compile"), ("warm_compile_s", "warm_compile")):
        out[f"{name}_change_pct"] = _change_pct(s[col], d[col])
        repeated = s["n"] > 1 and d["n"] > 1
        out[f"{name}_change_low_pct"] = _change_pct(s[f"{col}_min"], d[f"{col}_max"]) if repeated else np.nan
        out[f"{name}_change_high_pct"] = _change_pct(s[f"{col}_max"], d[f"{col}_min"]) if repeated else np.nan
        out[f"{name}_s"], out[f"{name}_default_s"] = s[col], d[col]
    return out


def verdict(p: pd.Series | dict) -> str:
    """A priced set in words: faster, slower or a tie (its interval holds 0), and what it costs."""
    low, high = p.get("throughput_change_low_pct"), p.get("throughput_change_high_pct")
    if frames.is_missing(low) or frames.is_missing(high):
        speed = "no interval"
    else:
        speed = "faster" if low > 0 else "slower" if high < 0 else "a tie"
    cost = p.get("cold_compile_change_pct")
    return f"{speed}; cold compile {cost:+.0f}%" if not frames.is_missing(cost) else speed


def price_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (setting, non-default option set) with a default set beside it."""
    d = _ok_compiled(df)
    d = d[d["option_set"].notna()]
    rows = []
    for key, g in d.groupby([*_SETTING, "path"], dropna=False, sort=True):
        sets = {name: _summary(s) for name, s in g.groupby("option_set")}
        if DEFAULT_SET not in sets:
            continue
        applied = g.drop_duplicates("option_set").set_index("option_set")["inductor_options_json"]
        for name, s in sets.items():
            if name != DEFAULT_SET:
                rows.append({**dict(zip([*_SETTING, "path"], key, strict=True)), "option_set": name,
                             "options": applied.get(name), "n": int(s["n"]), "n_default": int(sets[DEFAULT_SET]["n"]),
                             **_price(s, sets[DEFAULT_SET])})
    out = pd.DataFrame(rows)
    if not out.empty:
        out["verdict"] = [verdict(r) for _, r in out.iterrows()]
    return out


def deploy_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per setting measured both ways (jit and aoti): first-call costs of JIT cold, JIT
    from the Mega-Cache artifact and the AOTI load, the build, the package, the speedups."""
    d = _ok_compiled(df)
    d["option_set"] = d["option_set"].fillna("")
    keys = [*_SETTING, "option_set"]
    jit, aoti = d[d["path"].eq("jit")], d[d["path"].eq("aoti")]
    rows = []
    for key, a in aoti.groupby(keys, dropna=False, sort=True):
        probe = pd.DataFrame([dict(zip(keys, key, strict=True))]).astype(jit[keys].dtypes.to_dict())
        j = jit.merge(probe, on=keys)  # the probe in jit's dtypes: a key all null is float in one, object in the other
        if j.empty:
            continue
        jr, ar = j.iloc[-1], a.iloc[-1]
        mega = jr["warm_megacache_s"] + (0.0 if pd.isna(jr["megacache_load_s"]) else jr["megacache_load_s"])
        rows.append({**dict(zip(keys, key, strict=True)), "jit_cold_s": jr["compile_s"], "jit_megacache_s": mega,
                     "aoti_load_first_call_s": deploy_calls.aoti_start_s(ar), "aoti_load_s": ar["aoti_load_s"],
                     "aoti_build_s": ar["compile_s"], "aoti_package_mb": ar["aoti_package_bytes"] / 1e6,
                     "jit_speedup": jr["speedup_vs_eager"], "aoti_speedup": ar["speedup_vs_eager"],
                     "aoti_speedup_low": ar["speedup_ci_low"], "aoti_speedup_high": ar["speedup_ci_high"]})
    return pd.DataFrame(rows)


def failed_aoti(df: pd.DataFrame) -> pd.DataFrame:
    """The aoti trials that did not end ok, with their status and error (export refusals, load crashes)."""
    d = frames.prepare(df)
    return d[d["path"].eq("aoti") & ~d["status"].eq("ok")][["model", "mode", "batch_size", "option_set", "status",
                                                             "error"]]
