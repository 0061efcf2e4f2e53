"""What a finished sweep prints: the table of its rows, the self-check of its eager baselines, one
line per failed trial and per model built on the host after its factory failed under the device.
The CLI and `sweeper.sweep` print the same lines."""

from __future__ import annotations

from typing import Any

SUMMARY_COLUMNS = {
    "model": "model", "mode": "mode", "dynamic": "dynamic", "batch_size": "bs", "seq_len": "seq",
    "phase": "phase", "precision": "prec", "status": "status", "compile_s": "compile_s",
    "throughput_items_s": "items/s", "speedup_vs_eager": "speedup", "peak_mem_gib": "peak_GiB",
}
STREAM_COLUMNS = {"workload": "workload", "bucketing": "bucketing", "mark_dynamic": "mark_dyn",
                  "stream_s": "stream_s", "real_tokens_per_s": "real_tok/s", "fell_back_to_eager": "fell_back"}


def summary_table(rows: list[dict[str, Any]]) -> str:
    import pandas as pd

    columns = dict(SUMMARY_COLUMNS)
    if any(r.get("workload") for r in rows):  # stream trials differ by workload and bucketing
        columns = {**{k: v for k, v in columns.items() if k != "seq_len"}, **STREAM_COLUMNS}
    if any(r.get("option_set") or r.get("path") == "aoti" for r in rows):  # settings differ by set and path
        columns = {**{k: v for k, v in columns.items() if k != "status"}, "option_set": "options", "path": "path",
                   "status": "status"}
    df = pd.DataFrame(rows).reindex(columns=list(columns)).rename(columns=columns)
    df = df.sort_values(["model", "phase", "prec", "bs", "mode"], kind="stable")
    return df.to_string(index=False, float_format=lambda x: f"{x:.3g}", na_rep="-")


def failure_lines(rows: list[dict[str, Any]], labels: dict[str, str]) -> list[str]:
    """One line per failed trial: its setting, status and the first line of its error."""
    failed = [r for r in rows if r["status"] != "ok"]
    lines = [f"failed trials: {len(failed)} of {len(rows)}"] if failed else []
    for r in failed:
        first = next((line.strip() for line in str(r.get("error") or "").splitlines() if line.strip()), "")
        label = labels.get(r["trial_id"], r["trial_id"])
        lines.append(f"  {label}: {r['status'].upper()}{': ' + first[:300] if first else ''}")
    return lines


def host_build_lines(rows: list[dict[str, Any]]) -> list[str]:
    """One line per model whose factory could not build under the trial's device (`model_built_on`):
    it was built on the host and moved, slower, and its random weights drawn there."""
    fell_back: dict[str, tuple[int, str]] = {}
    for r in rows:
        place = str(r.get("model_built_on") or "")
        if place.startswith("host: "):
            n, _ = fell_back.get(r["model"], (0, ""))
            fell_back[r["model"]] = (n + 1, place.removeprefix("host: "))
    return [f"model {model}: built on the host in {n} trial(s), its code {why}; built on the device it "
            f"would build faster (docs/writing-specs.md)" for model, (n, why) in fell_back.items()]


def baseline_check(df: Any) -> str:
    """The sweep's self-check, one line (and one per drifted row): every compiled row's in-trial
    eager baseline against its context's other eager measurements (`drift.baseline_consensus`), how
    many drift past their limit, and of those how many leave the speedup not established
    (`drift_blocks`) rather than widen its interval (a drift between processes at one host speed)."""
    import pandas as pd

    from sweeper.analysis.frames import prepare, setting_label
    data = prepare(df)
    drift, limit = data["baseline_drift_pct"], data["drift_limit_pct"]
    checked, off = drift.notna(), drift.abs() > limit
    blocks = off & data["drift_blocks"].fillna(True).astype(bool)
    limits = sorted({f"{x:g}%" for x in limit[checked].round(1)})
    parts = []
    if off.any() and (off & ~blocks).any():
        parts.append(f"{int((off & ~blocks).sum())} between processes at one host speed (their intervals span "
                     "both speedups)")
    if blocks.any():
        parts.append(f"{int(blocks.sum())} not established")
    verdict = (": " + ", ".join(parts) if parts else ": every one is established" if checked.any() else "")
    lines = [f"baseline check: {int(checked.sum())} compiled rows checked against their context's other eager "
             f"measurements, {int(off.sum())} drift past their limit ({' / '.join(limits) or '-'}){verdict}"]
    for i, r in data[off].iterrows():
        lines.append(f"  {r['model']} {setting_label(r)} {r['precision']}: in-trial eager "
                     f"{r['baseline_drift_pct']:+.1f}% vs the others, limit {round(r['drift_limit_pct'], 1):g}%: "
                     f"{r.get('drift_cause') or 'cause unknown'}"
                     + ("; speedup not established" if blocks[i] else
                        f"; interval {r['speedup_low']:.2f}-{r['speedup_high']:.2f}x" if pd.notna(r["speedup_low"])
                        else ""))
    return "\n".join(lines)
