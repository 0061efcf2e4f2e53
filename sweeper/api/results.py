"""`Results`: a sweep's rows with the questions the CLI answers about them, for notebooks and
scripts (`sweeper.sweep` returns one, `sweeper.load` reads one)."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import pandas as pd

from sweeper.analysis.compare import compare_runs, compare_types
from sweeper.analysis.recommend import Limits, recommend_all
from sweeper.api.summary import SUMMARY_COLUMNS
from sweeper.deploy.export import Exported, export
from sweeper.report.page import DEFAULT_TITLE, write_report
from sweeper.results import traces
from sweeper.results.schema import ResultsError
from sweeper.results.store import find_result_files, read_results


def load(*paths: str | Path) -> Results:
    """Finished results: results directories or .parquet files (several sweeps at once)."""
    if not paths:
        raise ResultsError("sweeper.load: give at least one results directory or .parquet file")
    names = [str(p) for p in paths]
    return Results(read_results(names), names)


class Results:
    """Rows of one or more sweeps. `df` is the DataFrame (one row per trial, the schema's columns)."""

    def __init__(self, df: pd.DataFrame, paths: list[str], missing: list[str] | None = None):
        self.df = df
        self.paths = paths
        """Where the rows were read from (what `export` reads the trials' artifacts beside)."""
        self.missing = missing or []
        """Trials a sweep started that ended without a row (their ids)."""

    def __len__(self) -> int:
        return len(self.df)

    def __repr__(self) -> str:
        return f"Results({len(self.df)} trials from {', '.join(self.paths)})"

    def recommend(self, model: str | None = None, *, phase: str | None = None, precision: str | None = None,
                  device_name: str | None = None, seq_len: int | None = None, workload: str | None = None,
                  accelerator_type: str | None = None, batch_size: int | None = None,
                  max_memory_gib: float | None = None,
                  max_compile_s: float | None = None, iterations: int | None = None,
                  warm_start: bool = False) -> dict[str, Any] | list[dict[str, Any]]:
        """What `sweeper recommend --json` prints, with the same filters and limits: one object
        for one context, else a list of them."""
        limits = check_limits(max_memory_gib, max_compile_s, iterations, batch_size, warm_start)
        recs = recommend_all(self.df, model, limits, phase=phase, precision=precision, device_name=device_name,
                             seq_len=seq_len, workload=workload, accelerator_type=accelerator_type)
        if not recs:
            raise ResultsError("no trials in these results")
        return recs[0].to_dict() if len(recs) == 1 else [r.to_dict() for r in recs]

    def report(self, path: str | Path = "report.html", title: str = DEFAULT_TITLE,
               compare: Results | None = None) -> Path:
        """Write the one-file HTML report (as `sweeper report`); returns its path."""
        out = Path(path)
        # a results.parquet named outright has its traces beside it even before its part files are compacted
        named = [Path(p) for p in self.paths if Path(p).suffix == ".parquet"]
        links = traces.links([*find_result_files(self.paths), *named], out)
        return write_report(self.df, out, title=title, compare_df=compare.df if compare else None, traces=links)

    def export(self, output: str | Path, model: str, trial: str | None = None, **filters: Any) -> Exported:
        """Write what a deployment of `model`'s recommended setting needs (as `sweeper export`);
        `filters`: phase, precision, device_name, seq_len, workload and the limits of `recommend`."""
        limits = check_limits(filters.pop("max_memory_gib", None), filters.pop("max_compile_s", None),
                              filters.pop("iterations", None), filters.pop("batch_size", None),
                              bool(filters.pop("warm_start", False)))
        return export(self.paths, model, Path(output), limits, trial, **filters)

    def compare(self, base: Results) -> pd.DataFrame:
        """Each setting's change from `base` to these results: verdicts, worst first."""
        return compare_runs(base.df, self.df)

    def compare_types(self, base_type: str, new_type: str) -> pd.DataFrame:
        """Each setting on GPU type `new_type` against the same setting on `base_type` (H100 vs H200)."""
        return compare_types(self.df, base_type, new_type)

    def _repr_html_(self) -> str:
        counts = self.df["status"].value_counts().to_dict() if "status" in self.df else {}
        head = ", ".join(f"{n} {html.escape(str(s))}" for s, n in counts.items())
        table = self.df.reindex(columns=list(SUMMARY_COLUMNS)).rename(columns=SUMMARY_COLUMNS)
        return (f"<p><b>sweeper results</b>: {len(self.df)} trials ({head}) from "
                f"{html.escape(', '.join(self.paths))}</p>"
                + table.to_html(index=False, na_rep="-", float_format=lambda x: f"{x:.3g}"))


def check_limits(max_memory_gib: float | None, max_compile_s: float | None, iterations: int | None,
                 batch_size: int | None, warm_start: bool = False) -> Limits:
    """The limits of a recommendation; a limit that is not positive is a ResultsError naming it."""
    for flag, value in (("max_memory_gib", max_memory_gib), ("max_compile_s", max_compile_s),
                        ("iterations", iterations), ("batch_size", batch_size)):
        if value is not None and value <= 0:
            raise ResultsError(f"--{flag.replace('_', '-')} must be positive, not {value}")
    return Limits(max_memory_gib, max_compile_s, iterations, batch_size, warm_start)
