"""`sweeper export`: the recommended setting of one context, written as what a deployment needs:
the Python module that applies its exact torch.compile call (scope included) after loading its
Mega-Cache artifact, the artifact (copied from the results directory, where the sweep kept it),
the versions it is valid for, and a README."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sweeper import SweeperError
from sweeper.analysis import deploy_calls, frames, ranking
from sweeper.analysis.frames import fmt_num
from sweeper.analysis.recommend import Limits, recommend_all
from sweeper.deploy import aoti_export, readme, template
from sweeper.results.files import atomic_write_bytes
from sweeper.results.store import find_result_files, read_results, results_home

VERSION_KEYS = ("torch_version", "triton_version", "cuda_version", "device_type", "device_name")
"""What an artifact is valid for: the row's environment, checked by the module before loading."""
ARTIFACT_NAME = "megacache.bin"


class ExportError(SweeperError):
    """The results hold nothing to export for the question asked: the message says why."""


@dataclass(frozen=True)
class Exported:
    directory: Path
    files: list[str]
    row: dict[str, Any]
    """The exported trial's row (prepared)."""
    artifact_bytes: int


NO_LIMITS = Limits()
"""No memory or compile-time limit (Limits is frozen: one shared default)."""


def export(paths: list[str], model: str, out_dir: Path, limits: Limits = NO_LIMITS, trial_id: str | None = None,
           **filters: Any) -> Exported:
    """Write the export of `model`'s recommended setting (one context), or of the trial `trial_id`
    of `model`, to `out_dir`."""
    df = read_results(paths)
    if trial_id is None:
        trial_id, why = _recommended(df, model, limits, filters)
    else:
        why = "the trial asked for (`sweeper export --trial`)"
    chosen = df[df["trial_id"].eq(trial_id) & df["model"].eq(model)]
    if chosen.empty:
        raise ExportError(f"no trial {trial_id} of {model} in these results")
    row = frames.prepare(chosen).iloc[-1].to_dict()
    if row["is_eager"] or row["status"] != "ok":
        raise ExportError(f"trial {trial_id} is {'eager' if row['is_eager'] else row['status']}: nothing to export")
    if row.get("path") == "aoti":
        files = aoti_export.write(_artifact(paths, row, "aoti_package_file"), row, out_dir, why,
                                  {k: row.get(k) for k in VERSION_KEYS})
        return Exported(out_dir, files, row, (out_dir / aoti_export.PACKAGE_NAME).stat().st_size)
    artifact = _artifact(paths, row)
    data = artifact.read_bytes()
    out_dir.mkdir(parents=True, exist_ok=True)
    versions = _versions(row, data)
    files = {ARTIFACT_NAME: data,
             "versions.json": (json.dumps(versions, indent=2, default=str) + "\n").encode(),
             f"{template.MODULE_NAME}.py": _module(row).encode(),
             "README.md": readme.render(row, why, versions, template.MODULE_NAME).encode()}
    for name, content in files.items():
        atomic_write_bytes(out_dir / name, content)
    return Exported(out_dir, sorted(files), row, len(data))


def _recommended(df: Any, model: str, limits: Limits, filters: dict[str, Any]) -> tuple[str, str]:
    """The trial id of the recommended setting of `model`'s one context, and why it was chosen."""
    recs = recommend_all(df, model, limits, **filters)
    if len(recs) != 1:
        contexts = "; ".join(ranking.context_label(r.context) for r in recs)
        raise ExportError(f"{model} was measured in {len(recs)} contexts ({contexts}): choose one with "
                          "--phase, --precision, --device, --accelerator-type, --seq-len or --workload")
    rec = recs[0]
    if rec.best is None:
        raise ExportError(f"{model}: no setting meets the constraints: nothing to export")
    if rec.best.is_eager or rec.best.trial_id is None:
        raise ExportError(f"{model}: the recommendation is not to compile ({rec.verdict}): nothing to export")
    return rec.best.trial_id, (f"the setting `sweeper recommend` chose ({fmt_num(rec.best.throughput_items_s)} "
                               f"items/s, {rec.verdict}; {rec.workload_note})")


def _artifact(paths: list[str], row: dict[str, Any], column: str = "megacache_file") -> Path:
    name = row.get(column)
    what = "AOTInductor package" if column == "aoti_package_file" else "Mega-Cache artifact"
    if frames.is_missing(name):
        raise ExportError(f"trial {row['trial_id']} ({frames.setting_label(row)}) kept no {what} "
                          "(measured before artifacts were kept, or over the travel limit)")
    for results_file in find_result_files(paths):
        found = results_home(results_file) / str(name)
        if found.is_file():
            return found
    raise ExportError(f"trial {row['trial_id']}: its artifact {name} is not beside the results read "
                      f"({', '.join(map(str, paths))}); "
                      f"copy the results directory with its {Path(name).parent}/ folder")


def compile_kwargs(row: dict[str, Any]) -> dict[str, Any]:
    """The torch.compile keyword arguments the trial measured."""
    kwargs: dict[str, Any] = {"mode": row["mode"], "dynamic": {"True": True, "False": False}.get(row["dynamic_label"])}
    backend = row.get("backend")
    if isinstance(backend, str) and backend != "inductor":
        kwargs = {"backend": backend, "dynamic": kwargs["dynamic"]}
    options = deploy_calls.applied_options(row)
    if options:  # the mode's options merged under the set: torch.compile takes one or the other
        kwargs = {"dynamic": kwargs["dynamic"], "options": options}
    return kwargs


def _module(row: dict[str, Any]) -> str:
    classes = row.get("region_classes")
    blocks = tuple(str(classes).split(",")) if not frames.is_missing(classes) else ()
    matmul = row.get("matmul_precision")
    return template.render(str(row["model"]), str(row["trial_id"]), frames.setting_label(row), compile_kwargs(row),
                           str(row["scope"]), blocks, matmul if isinstance(matmul, str) else "highest")


def _versions(row: dict[str, Any], data: bytes) -> dict[str, Any]:
    def plain(value: Any) -> Any:
        value = None if frames.is_missing(value) else value.item() if hasattr(value, "item") else value
        return int(value) if isinstance(value, float) and value.is_integer() else value

    setting = ("model", "mode", "dynamic_label", "backend", "scope", "region_classes", "compiled_regions",
               "batch_size", "seq_len", "phase", "precision", "matmul_precision")
    measured = ("compile_s", "first_call_s", "warm_compile_s", "warm_megacache_s", "megacache_load_s",
                "throughput_items_s", "speedup_vs_eager", "peak_mem_gib", "peak_mem_compile_gib")
    built_for = {k: plain(row.get(k)) for k in VERSION_KEYS}
    if row.get("device_type") == "cpu" and not frames.is_missing(row.get("torch_threads")):
        built_for["torch_threads"] = plain(row["torch_threads"])  # inductor's CPU code is built for it
    return {"built_for": built_for,
            "setting": {k: plain(row.get(k)) for k in setting},
            "measured": {k: plain(row.get(k)) for k in measured},
            "trial_id": row["trial_id"], "sweep_id": plain(row.get("sweep_id")),
            "artifact": {"file": ARTIFACT_NAME, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()},
            "compile_kwargs": compile_kwargs(row)}


def describe(exported: Exported) -> str:
    """What was written, for the terminal."""
    row = exported.row
    lines = [f"exported {row['model']} {frames.setting_label(row)} (trial {row['trial_id']}: {frames.advice(row)}) "
             f"to {exported.directory}:"]
    for name in exported.files:
        size = (exported.directory / name).stat().st_size
        lines.append(f"  {name:24s} {size:>12,} bytes")
    return "\n".join(lines)

