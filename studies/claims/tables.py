"""The page docs/claims.md, "Published claims, measured": its tables, generated from committed rows.

Articles about torch.compile in PyTorch 2.7 quote training figures (seconds per epoch, eager and
compiled; ViT-B/16 step time and GPU utilization on an A100). This script puts them beside the
rows of the `studies/claims/*.yaml` sweeps, read from their results directory:

    python -m studies.claims.tables [RESULTS_DIR]              # print the section
    python -m studies.claims.tables [RESULTS_DIR] --write      # replace it in docs/claims.md, between markers

`tests/studies/test_claims.py` checks that the page's section is what this script makes of the rows.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

from studies import doc_section
from sweeper.analysis.frames import fmt_num, is_missing, prepare
from sweeper.analysis.ranking import DRIFT_LIMIT_PCT
from sweeper.results.store import read_results

REPO = Path(__file__).resolve().parents[2]

RESULTS = Path(__file__).resolve().parent / "results"
PAGE = REPO / "docs" / "claims.md"
START, END = doc_section.markers("claims")
PUBLISHED_EPOCH: dict[str, tuple[str, float, float, float]] = {
    "resnet18": ("ResNet-18 (ImageNet)", 30.2, 11.8, 2.56),
    "vit_tiny": ("ViT-Tiny", 45.6, 17.3, 2.64),
    "lstm": ("LSTM text classification", 28.9, 14.1, 2.05),
}
"""zoo name -> (the claim's label, eager s/epoch, compiled s/epoch, speedup), as published."""
PUBLISHED_VIT_B: dict[str, tuple[float, float]] = {"eager": (85.0, 62.0), "reduce-overhead": (58.0, 83.0)}
"""ViT-B/16, 224x224, batch 64, A100: mode -> (ms per step, GPU utilization %), as published."""
PENDING = ("_No rows yet: run `studies/claims/run_h200.sh` on a GPU host, "
           "then `python -m studies.claims.tables --write`._")


def load(results_dir: Path = RESULTS) -> pd.DataFrame | None:
    """The study's rows with the sweep's self-check: each speedup's reported interval and drift."""
    files = sorted(results_dir.rglob("results.parquet")) if results_dir.is_dir() else []
    return prepare(read_results(files)) if files else None


def _f(value: object, digits: int = 3) -> str:
    return "-" if is_missing(value) else fmt_num(value, digits)


def _pct(value: object) -> str:
    return "-" if is_missing(value) else f"{float(value):.0f}"


def _step_ms(row: pd.Series, prefix: str = "") -> float | None:
    tput = row.get(f"{prefix}throughput_items_s")
    return None if is_missing(tput) or not tput else 1e3 * row["batch_size"] / tput


def _speedup(row: pd.Series) -> str:
    """The speedup with its reported interval (what the report and recommend use), and "drifted"
    where the in-trial eager baseline moved past the limit from the eager trial of its context."""
    if is_missing(row.get("speedup_vs_eager")):
        return "-"
    ci = "" if is_missing(row.get("speedup_low")) else f" [{row['speedup_low']:.2f}-{row['speedup_high']:.2f}]"
    drift = row.get("baseline_drift_pct")
    flag = " drifted" if not is_missing(drift) and abs(drift) > DRIFT_LIMIT_PCT else ""
    return f"{row['speedup_vs_eager']:.2f}x{ci}{flag}"


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def _ok_compiled(df: pd.DataFrame) -> pd.DataFrame:
    return df[(df["mode"] != "eager") & (df["status"] == "ok")]


def epoch_table(df: pd.DataFrame) -> str:
    """Per published model and precision: the claim beside the fastest compiled setting measured."""
    rows = []
    for model, (label, eager_pub, comp_pub, speed_pub) in PUBLISHED_EPOCH.items():
        for precision in ("fp32", "bf16"):
            mine = _ok_compiled(df[(df["model"] == model) & (df["precision"] == precision)])
            if mine.empty:
                continue
            best = mine.loc[mine["throughput_items_s"].idxmax()]
            ratio = best["speedup_vs_eager"] / speed_pub
            eager = df[(df["model"] == model) & (df["precision"] == precision) & (df["mode"] == "eager")
                       & (df["status"] == "ok")]
            rows.append([label, f"{eager_pub} -> {comp_pub} ({speed_pub:.2f}x)", precision,
                         _f(best["eager_epoch_s"]), _f(eager["epoch_s"].min() if len(eager) else None),
                         best["mode"], _f(best["epoch_s"]),
                         _f(best["epoch_s_with_compile"]), _speedup(best), f"{ratio:.2f}", _f(best["epoch_items"], 6)])
    header = ["claim", "published s/epoch (speedup)", "precision", "H200 eager s/epoch (own windows)",
              "eager trial s/epoch", "fastest mode",
              "s/epoch", "s/epoch incl. compile", "speedup [interval]", "measured / published speedup", "epoch items"]
    return _table(header, rows)


def settings_table(df: pd.DataFrame) -> str:
    """Every row: step time, speedup, compile, epoch, utilization, power and compile health."""
    rows = []
    order = {m: i for i, m in enumerate(["eager", "default", "reduce-overhead", "max-autotune-no-cudagraphs"])}
    df = df.assign(_o=df["mode"].map(order).fillna(9)).sort_values(["model", "precision", "_o"])
    for _, r in df.iterrows():
        util = f"{_pct(r['eager_gpu_util_pct'])} -> {_pct(r['gpu_util_pct'])}"
        mem = f"{_pct(r['eager_gpu_mem_util_pct'])} -> {_pct(r['gpu_mem_util_pct'])}"
        power = f"{_pct(r['eager_gpu_power_w'])} -> {_pct(r['gpu_power_w'])}"
        health = "-" if is_missing(r["graphs"]) else f"{int(r['graphs'])} / {int(r['graph_breaks'])}"
        note = r["error"] if r["status"] != "ok" else r["notes"]
        rows.append([r["model"], r["precision"], r["mode"], r["status"], _f(_step_ms(r, "eager_")), _f(_step_ms(r)),
                     _speedup(r), _f(r["compile_s"]), _f(r["epoch_s"]), _f(r["epoch_s_with_compile"]),
                     util, mem, power, health, "" if is_missing(note) else str(note).splitlines()[0][:120]])
    header = ["model", "precision", "mode", "status", "eager ms/step", "ms/step", "speedup [interval]", "compile s",
              "s/epoch", "s/epoch incl. compile", "SM util % (eager -> this)", "mem-bus util %", "power W",
              "graphs / breaks", "notes"]
    return _table(header, rows)


def vit_b_table(df: pd.DataFrame) -> str:
    """ViT-B/16 step time and utilization: the claim beside each precision's reduce-overhead row,
    whose eager figures come from the windows alternated with its own."""
    header, cols = ["", "published (A100)"], {}
    for _, r in _ok_compiled(df[(df["model"] == "vit_b_16") & (df["mode"] == "reduce-overhead")]).iterrows():
        header.append(f"H200 {r['precision']}")
        cols[r["precision"]] = [_f(_step_ms(r, "eager_")), _pct(r["eager_gpu_util_pct"]), _f(_step_ms(r)),
                                _pct(r["gpu_util_pct"]), _speedup(r)]
    (e_ms, e_util), (ro_ms, ro_util) = PUBLISHED_VIT_B["eager"], PUBLISHED_VIT_B["reduce-overhead"]
    published = [f"~{e_ms:.0f}", f"~{e_util:.0f}", f"~{ro_ms:.0f}", f"~{ro_util:.0f}", f"{e_ms / ro_ms:.2f}x"]
    labels = ["eager ms/step", "eager SM util %", "reduce-overhead ms/step", "reduce-overhead SM util %", "speedup"]
    rows = [[label, published[i], *(c[i] for c in cols.values())] for i, label in enumerate(labels)]
    return _table(header, rows)


def load_overhead(results_dir: Path = RESULTS) -> list[dict] | None:
    """benchmarks/util_overhead.py's measurements saved beside the rows, if any."""
    path = results_dir / "util_overhead.json"
    return json.loads(path.read_text()) if path.is_file() else None


def overhead_table(found: list[dict]) -> str:
    """What the NVML sampler costs: median step time with and without it, alternated windows."""
    rows = [[r["trial"], _f(r["step_ms_plain"]), _f(r["step_ms_sampled"]),
             f"{r['change_pct']:+.2f}% [{r['change_pct_ci'][0]:+.2f} to {r['change_pct_ci'][1]:+.2f}]",
             str(r["windows"]), str(r["readings"]), _pct(r["gpu_util_pct"]),
             "-" if "bound_pct" not in r else f"{r['reading_us_median']:.0f} us, <= {r['bound_pct']:.2f}%"]
            for r in found]
    header = ["trial (sampling check)", "ms/step plain", "ms/step sampled", "change [95% interval]",
              "windows", "NVML readings", "SM util %", "one reading, bound on the step"]
    return _table(header, rows)


def section(df: pd.DataFrame | None, overhead: list[dict] | None = None) -> str:
    """The generated part of the page: the tables, or a line saying none yet."""
    if df is None or df.empty:
        return PENDING
    where = ", ".join(sorted(df["device_name"].dropna().unique())) or "unknown device"
    parts = [f"Measured on: {where}; {len(df)} rows, {int((df['status'] == 'ok').sum())} ok.",
             epoch_table(df), vit_b_table(df), settings_table(df)]
    return "\n\n".join(parts + ([overhead_table(overhead)] if overhead else []))


def extract(page: str) -> str | None:
    return doc_section.extract(page, "claims")


def replace(page: str, body: str) -> str:
    return doc_section.replace(page, "claims", body)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="?", type=Path, default=RESULTS)
    ap.add_argument("--write", action="store_true", help="replace the section in docs/claims.md")
    args = ap.parse_args()
    body = section(load(args.results), load_overhead(args.results))
    if args.write:
        doc_section.write("claims", body, PAGE)
    else:
        sys.stdout.write(body + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
