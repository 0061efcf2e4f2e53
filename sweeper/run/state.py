"""A sweep's state on the driver: its id and manifest, the rows so far, resume, durable writes.

Every finished trial is written as its own part file (temp + fsync + rename, results.store)
before the next row is taken: one small write per row whatever the sweep's size, so killing the
driver loses no recorded trial, and `--resume` runs only the missing ones. The parts are compacted
into results.parquet when the sweep ends and when it is resumed. While a sweep writes, it owns its
directory (run.owner): a second driver on it is refused before Ray starts.
"""

from __future__ import annotations

import json
import logging
import secrets
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sweeper import SweeperError, __version__, envinfo
from sweeper.results.files import write_json
from sweeper.results.schema import CONFIG_COLUMNS, UNPLACED, ResultsError
from sweeper.results.store import (
    MANIFEST_FILE,
    PARTS_DIR,
    RESULTS_FILE,
    compact,
    next_part_seq,
    part_files,
    read_results,
    write_part,
)
from sweeper.run import artifacts, rescue
from sweeper.run.owner import DirectoryInUse, Ownership, check_not_owned, claim
from sweeper.spec.sweep_spec import SweepSpec
from sweeper.spec.trials import Trial

log = logging.getLogger(__name__)
RERUN_ON_RETRY = ("crashed", "timeout")


class SweepError(SweeperError):
    """A results directory that cannot be used as asked: the message says why and what to do."""


def _diff(old: Any, new: Any, defaults: dict[str, Any], path: str = "") -> list[str]:
    """What differs between two spec identities, as "path: old -> new"; a setting only one side
    has is no difference when it is at its default there (`defaults`, by path: it was added to
    the tool after the other side was written)."""
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[str] = []
        for k in sorted(set(old) | set(new)):
            sub = f"{path}.{k}" if path else k
            if (k in old) != (k in new) and sub in defaults and {**old, **new}[k] == defaults[sub]:
                continue
            out += _diff(old.get(k), new.get(k), defaults, sub)
        return out
    return [] if old == new else [f"{path}: {json.dumps(old)} -> {json.dumps(new)}"]


@dataclass
class SweepState:
    dir: Path
    spec: SweepSpec
    sweep_id: str
    resume: bool = False
    by_trial: dict[str, dict[str, Any]] = field(default_factory=dict)
    """The latest row of every trial recorded so far, by trial id."""
    unsaved_manifest: dict[str, Any] | None = None
    """A new sweep's manifest, written by `save_manifest` once the sweep really starts."""
    ownership: Ownership | None = None
    next_part: int = 0
    unwritten: list[dict[str, Any]] = field(default_factory=list)
    """Rows measured but not written: the results directory refused them (run.rescue)."""
    write_failed: bool = False
    """A write into the directory failed: the sweep stopped; its part files wait for a resume."""
    rerunning: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Trials timed again because their headline ran at the host's slow state: their earlier rows."""

    @property
    def results_path(self) -> Path:
        return self.dir / RESULTS_FILE

    @property
    def rows(self) -> list[dict[str, Any]]:
        return list(self.by_trial.values())

    @classmethod
    def open(cls, spec: SweepSpec, results_dir: Path, resume: bool) -> SweepState:
        """Check the directory and read what is there; writes nothing (see `save_manifest`)."""
        if results_dir.exists() and not results_dir.is_dir():
            raise SweepError(f"{results_dir}: not a directory; choose another --results directory")
        try:
            check_not_owned(results_dir)  # a live sweep's directory is refused as that, whatever it holds
        except DirectoryInUse as e:
            raise SweepError(str(e)) from None
        return cls._read(spec, results_dir, resume)

    @classmethod
    def _read(cls, spec: SweepSpec, results_dir: Path, resume: bool) -> SweepState:
        manifest_path = results_dir / MANIFEST_FILE
        if not manifest_path.exists():
            held = [RESULTS_FILE] if (results_dir / RESULTS_FILE).exists() else []
            held += [f"{PARTS_DIR}/"] if part_files(results_dir) else []
            if held:
                raise SweepError(f"{results_dir}: holds {' and '.join(held)} but no {MANIFEST_FILE}; "
                                 "choose another --results directory")
            return cls._new(spec, results_dir, resume)
        manifest = _read_manifest(manifest_path)
        if not resume:
            raise SweepError(f"{results_dir} already holds sweep {manifest['sweep_id']}: pass --resume to "
                             "finish it, or --results DIR to start a new one")
        changes = [] if manifest["spec_hash"] == spec.spec_hash() else _diff(
            manifest["spec"], spec.identity(), spec.setting_defaults())
        if changes:
            raise SweepError(f"the spec changed since sweep {manifest['sweep_id']} started, so its finished "
                             f"rows would not match: {'; '.join(changes[:6])}. Resume with the old spec, "
                             "or run the new one with another --results directory")
        state = cls(results_dir, spec, manifest["sweep_id"], resume)
        if state.results_path.exists() or part_files(results_dir):
            try:
                df = read_results([state.results_path])
            except ResultsError as e:
                raise SweepError(f"{e}; it is left untouched: move it aside to resume") from None
            state.by_trial = {r["trial_id"]: _clean(r) for r in df.to_dict("records")}
        state.next_part = next_part_seq(results_dir)
        return state

    @classmethod
    def _new(cls, spec: SweepSpec, results_dir: Path, resume: bool = False) -> SweepState:
        stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
        state = cls(results_dir, spec, f"{spec.name}-{stamp}-{secrets.token_hex(2)}", resume)
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

    def claim(self) -> None:
        """Own the directory for this driver (SweepError naming the live owner if another has it),
        then read it again under the claim, since another sweep may have written it meanwhile, and
        compact what a previous driver left in part files."""
        try:
            ownership = claim(self.dir, self.sweep_id)
        except DirectoryInUse as e:
            raise SweepError(str(e)) from None
        try:
            now = SweepState._read(self.spec, self.dir, self.resume)
        except BaseException:
            ownership.release()
            raise
        if now.sweep_id != self.sweep_id and self.unsaved_manifest is None:
            ownership.release()
            raise SweepError(f"{self.dir}: its sweep changed while starting; run the command again")
        if now.unsaved_manifest is None:  # an existing sweep: keep what is on disk now
            self.by_trial, self.unsaved_manifest = now.by_trial, None
            self.sweep_id = now.sweep_id
        self.ownership = ownership
        try:
            self._take_back_fallback_rows()
            if part_files(self.dir):
                compact(self.dir, self.rows)
        except OSError as e:
            self.write_failed = True  # leaves the parts as they are
            self.close()
            raise SweepError(f"{self.dir}: cannot write results there ({e.strerror or e}); free space there "
                             "and run the command again (nothing is lost)") from None
        self.next_part = next_part_seq(self.dir)

    def _take_back_fallback_rows(self) -> None:
        """Rows an earlier run of this sweep could only write to its fallback directory: into this
        directory as part files (the next compaction takes them in), then the fallback is removed."""
        rows = [_clean(r) for r in rescue.adopt(self.sweep_id)]
        if not rows:
            return
        seq = next_part_seq(self.dir)
        for i, row in enumerate(rows):
            write_part(self.dir, seq + i, row)
            self._remember(row)
        rescue.discard(self.sweep_id)

    def close(self) -> None:
        """Compact this sweep's part files into results.parquet and give up the directory. A
        compaction the file system refuses leaves the part files, which a resume compacts."""
        try:
            if part_files(self.dir) and not self.write_failed:
                compact(self.dir, self.rows)
        except OSError as e:
            log.warning("sweeper: could not compact the rows into %s (%s); they stay in %s/ and --resume "
                        "compacts them", self.results_path, e.strerror or e, self.dir / PARTS_DIR)
        finally:
            if self.ownership is not None:
                self.ownership.release()
                self.ownership = None

    def pending(self, trials: list[Trial], retry_failed: bool = False) -> list[Trial]:
        keep = {r["trial_id"] for r in self.rows
                if not (r["status"] == UNPLACED or (retry_failed and r["status"] in RERUN_ON_RETRY))}
        return [t for t in trials if t.trial_id not in keep]

    def slow_headlines(self, trials: list[Trial], reruns: int) -> list[Trial]:
        """The compiled trials among `trials` whose ok row's headline ran at the host's slow state and
        that ran again fewer than `reruns` times; each is marked to be timed again (`add`)."""
        again = []
        for t in trials:
            row = self.by_trial.get(t.trial_id)
            if row is not None and t.mode != "eager" and row.get("status") == "ok" \
                    and row.get("host_state") == "slow" and int(row.get("slow_reruns") or 0) < reruns:
                self.rerunning[t.trial_id] = row
                again.append(t)
        return again

    def add(self, trial: Trial, measured: dict[str, Any]) -> dict[str, Any]:
        """Record one finished trial durably (and any large file still inside it); a rerun replaces the
        trial's previous row. A trial timed again for the host's slow state (`slow_headlines`) keeps its
        earlier row unless the new one is ok, which then names the earlier speedup."""
        earlier = self.rerunning.pop(trial.trial_id, None)
        if earlier is not None:
            if measured.get("status") != "ok":
                log.warning("%s timed again for the host's slow state: %s (%s); its earlier row stays",
                            trial.label, measured.get("status"), str(measured.get("error") or "")[:200])
                return earlier
            measured = {**measured, "slow_reruns": int(earlier.get("slow_reruns") or 0) + 1,
                        "slow_rerun_speedup": earlier.get("speedup_vs_eager")}
        row: dict[str, Any] | None = None
        try:
            artifacts.keep(self.dir, trial.trial_id, measured)
            row = make_row(self.sweep_id, self.spec.name, trial, measured)
            self.save_manifest()
            write_part(self.dir, self.next_part, row)
        except OSError as e:  # kept in memory only, for run.rescue
            self.unwritten.append(self._remember(row or make_row(self.sweep_id, self.spec.name, trial, measured)))
            self.write_failed = True
            raise rescue.ResultsUnwritable(e) from None
        self.next_part += 1
        return self._remember(row)  # rows counts it once it is on disk

    def _remember(self, row: dict[str, Any]) -> dict[str, Any]:
        self.by_trial.pop(row["trial_id"], None)  # a rerun's row goes last, as on disk
        self.by_trial[row["trial_id"]] = row
        return row

    def save_unwritten(self) -> tuple[int, Path | None]:
        """Write the rows the directory refused (run.rescue.save): how many it took now, and the
        fallback directory the rest went to."""
        written, fallback = rescue.save(self.dir, self.sweep_id, self.unwritten)
        self.unwritten = self.unwritten[written:] if fallback is None else []
        return written, fallback


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
