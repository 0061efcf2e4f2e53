"""A sweep's state on the driver: its id and manifest, the rows so far, resume, durable writes.

Every finished trial is written (whole file, temp + rename) before the next row is taken,
so killing the driver loses no finished trial, and `--resume` runs only the missing ones.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sweeper import __version__, envinfo
from sweeper.results.files import write_json
from sweeper.results.schema import CONFIG_COLUMNS, ResultsError
from sweeper.results.store import MANIFEST_FILE, RESULTS_FILE, read_results, write_rows
from sweeper.run import artifacts
from sweeper.spec.schema import SweepSpec
from sweeper.spec.trials import Trial

RERUN_ON_RETRY = ("crashed", "timeout")


class SweepError(ValueError):
    """A results directory that cannot be used as asked: the message says why and what to do."""


def _diff(old: Any, new: Any, path: str = "") -> list[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[str] = []
        for k in sorted(set(old) | set(new)):
            out += _diff(old.get(k), new.get(k), f"{path}.{k}" if path else k)
        return out
    return [] if old == new else [f"{path}: {json.dumps(old)} -> {json.dumps(new)}"]


@dataclass
class SweepState:
    dir: Path
    spec: SweepSpec
    sweep_id: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    unsaved_manifest: dict[str, Any] | None = None
    """A new sweep's manifest, written by `save_manifest` once the sweep really starts."""

    @property
    def results_path(self) -> Path:
        return self.dir / RESULTS_FILE

    @classmethod
    def open(cls, spec: SweepSpec, results_dir: Path, resume: bool) -> SweepState:
        """Check the directory and read what is there; writes nothing (see `save_manifest`)."""
        if results_dir.exists() and not results_dir.is_dir():
            raise SweepError(f"{results_dir}: not a directory; choose another --results directory")
        manifest_path = results_dir / MANIFEST_FILE
        if not manifest_path.exists():
            if (results_dir / RESULTS_FILE).exists():
                raise SweepError(f"{results_dir}: holds {RESULTS_FILE} but no {MANIFEST_FILE}; "
                                 "choose another --results directory")
            return cls._new(spec, results_dir)
        manifest = _read_manifest(manifest_path)
        if not resume:
            raise SweepError(f"{results_dir} already holds sweep {manifest['sweep_id']}: pass --resume to "
                             "finish it, or --results DIR to start a new one")
        if manifest["spec_hash"] != spec.spec_hash():
            changes = _diff(manifest["spec"], spec.identity())
            raise SweepError(f"the spec changed since sweep {manifest['sweep_id']} started, so its finished "
                             f"rows would not match: {'; '.join(changes[:6])}. Resume with the old spec, "
                             "or run the new one with another --results directory")
        state = cls(results_dir, spec, manifest["sweep_id"])
        if state.results_path.exists():
            try:
                df = read_results([state.results_path])
            except ResultsError as e:
                raise SweepError(f"{e}; it is left untouched: move it aside to resume") from None
            state.rows = [_clean(r) for r in df.to_dict("records")]
        return state

    @classmethod
    def _new(cls, spec: SweepSpec, results_dir: Path) -> SweepState:
        stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
        state = cls(results_dir, spec, f"{spec.name}-{stamp}-{secrets.token_hex(2)}")
        state.unsaved_manifest = {
            "sweep_id": state.sweep_id, "spec_name": spec.name, "spec_hash": spec.spec_hash(),
            "spec": spec.identity(), "created_at": datetime.now(UTC).isoformat(),
            "sweeper_version": __version__, "git_commit": envinfo.git_commit()}
        return state

    def save_manifest(self) -> None:
        """Write a new sweep's manifest (once): from here on the directory belongs to this sweep."""
        if self.unsaved_manifest is not None:
            write_json(self.dir / MANIFEST_FILE, self.unsaved_manifest)
            self.unsaved_manifest = None

    def pending(self, trials: list[Trial], retry_failed: bool = False) -> list[Trial]:
        keep = {r["trial_id"] for r in self.rows
                if not (retry_failed and r["status"] in RERUN_ON_RETRY)}
        return [t for t in trials if t.trial_id not in keep]

    def add(self, trial: Trial, measured: dict[str, Any]) -> dict[str, Any]:
        """Record one finished trial durably (and its cache artifact); a rerun replaces the trial's previous row."""
        artifacts.keep(self.dir, trial.trial_id, measured)
        row = make_row(self.sweep_id, self.spec.name, trial, measured)
        self.save_manifest()
        self.rows = [r for r in self.rows if r["trial_id"] != trial.trial_id] + [row]
        write_rows(self.results_path, self.rows)
        return row


def _read_manifest(path: Path) -> dict[str, Any]:
    try:
        manifest = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SweepError(f"{path}: unreadable sweep manifest ({e}); it is left untouched: "
                         "move the directory aside or choose another --results directory") from None
    missing = [k for k in ("sweep_id", "spec_hash", "spec") if not isinstance(manifest, dict) or k not in manifest]
    if missing:
        raise SweepError(f"{path}: not a sweeper manifest (no {', '.join(missing)}); "
                         "choose another --results directory")
    return manifest


def _clean(row: dict[str, Any]) -> dict[str, Any]:
    """pandas NaN/NaT back to None, so a rewritten file keeps nulls as nulls."""
    import pandas as pd

    return {k: (None if not isinstance(v, (list, dict)) and pd.isna(v) else v) for k, v in row.items()}


def make_row(sweep_id: str, sweep_name: str, trial: Trial, measured: dict[str, Any]) -> dict[str, Any]:
    config = trial.to_dict()
    row = {k: v for k, v in measured.items() if not k.startswith("_")}
    row.update({k: config[k] for k in CONFIG_COLUMNS}, **trial.stream_columns())
    row.update(sweep_id=sweep_id, sweep_name=sweep_name, trial_id=trial.trial_id, model=trial.model_name,
               backend=trial.measure.backend, matmul_precision=trial.measure.matmul_precision,
               config_json=json.dumps(config, sort_keys=True), git_commit=envinfo.git_commit())
    row.setdefault("status", "crashed")
    row.setdefault("attempts", 1)
    return row
