"""A trial's large files (its Mega-Cache artifact, its compile trace), from the measuring
process to the results directory.

The cold process saves the artifact (`--save-megacache`); a third process loads it into an empty
cache and compiles again (`warm_megacache_s`). The worker puts both payloads into the row as
base64 under private keys (`_megacache_b64`, traces.PACKED_KEY; never columns), up to
`TRAVEL_LIMIT_BYTES`. Before the row is reported, `send` takes them out and hands their bytes to a
`Sink` on the driver's node (run.ray_tune makes it a Ray actor), which writes them beside
results.parquet: `megacache/TRIAL_ID.bin` (the row names it, `megacache_file`) and
`traces/TRIAL_ID.log.gz` (the row says its size, `trace_bytes`). Tune's result logs and the
driver's memory thus never hold them. Where no sink can be reached (Ray Client), the payloads
ride inside the row and the driver keeps them the same way (`keep`).
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sweeper.results import traces
from sweeper.results.files import atomic_write_bytes
from sweeper.run import aoti_runs

log = logging.getLogger(__name__)
ARTIFACT = "megacache.bin"
TRAVEL_LIMIT_BYTES = 32 * 2**20
"""Larger artifacts are measured (size, warm start) but not kept."""
B64_KEY = "_megacache_b64"
DIRECTORY = "megacache"


def save_args(trial: dict[str, Any], workdir: Path) -> tuple[str, ...]:
    """The cold process's arguments that make a compiled trial save its artifact."""
    return () if trial["mode"] == "eager" or aoti_runs.is_aoti(trial) else ("--save-megacache", str(workdir / ARTIFACT))


def warm_start(run_process: Callable[..., dict[str, Any]], payload: dict[str, Any], workdir: Path, left_s: float,
               cpus: list[int] | None) -> dict[str, Any]:
    """Compile again in a fresh process whose empty cache first loads the artifact; the measured
    columns, and `_process_s` and `_phase_s_json` (the process's seconds and its own phases).
    Nothing when the cold process saved no artifact."""
    artifact = workdir / ARTIFACT
    if not artifact.exists():
        return {}
    row = run_process(payload, workdir, workdir / "cache-megacache", left_s, warm=True, cpus=cpus,
                      tag="megacache", extra=("--load-megacache", str(artifact)))
    found = {"_process_s": row.pop("_process_s"), "_phase_s_json": row.get("phase_s_json")}
    if row.get("status") != "ok":
        log.warning("trial %s Mega-Cache warm start: %s %s", payload["trial"]["trial_id"], row.get("status"),
                    row.get("error"))
        return found
    return {**found, "warm_megacache_s": row["warm_compile_s"], "warm_megacache_first_call_s": row["warm_first_call_s"],
            "megacache_load_s": row.get("megacache_load_s")}


def attach(row: dict[str, Any], workdir: Path) -> None:
    """Put the artifact into the row for its way to the driver, if it is within the limit."""
    artifact = workdir / ARTIFACT
    if not artifact.exists():
        return
    size = artifact.stat().st_size
    if size > TRAVEL_LIMIT_BYTES:
        log.warning("trial artifact of %d bytes is over the %d-byte travel limit: not kept", size, TRAVEL_LIMIT_BYTES)
        return
    row[B64_KEY] = base64.b64encode(artifact.read_bytes()).decode("ascii")


class Sink:
    """Writes a trial's files under the results directory, on the driver's node."""

    def __init__(self, results_dir: str):
        self.dir = Path(results_dir)

    def write(self, relative: str, data: bytes) -> int:
        path = self.dir / relative
        if not path.resolve().is_relative_to(self.dir.resolve()):
            raise ValueError(f"{relative}: not a path inside the results directory")
        atomic_write_bytes(path, data)
        return len(data)


def send(row: dict[str, Any], trial_id: str, write: Callable[[str, bytes], int]) -> None:
    """Worker side: write the row's payloads with `write(relative_path, bytes)` (a Sink's) and
    leave only their names and sizes in the row."""
    encoded = row.pop(B64_KEY, None)
    if encoded:
        relative = f"{DIRECTORY}/{trial_id}.bin"
        write(relative, base64.b64decode(encoded))
        row["megacache_file"] = relative
    aoti_runs.send(row, trial_id, write)
    packed = row.pop(traces.PACKED_KEY, None)
    if packed:
        row["trace_bytes"] = write(_trace_file(trial_id), base64.b64decode(packed))


def keep(results_dir: Path, trial_id: str, measured: dict[str, Any]) -> None:
    """Driver side: write payloads that travelled inside the row beside the results."""
    send(measured, trial_id, Sink(str(results_dir)).write)


def _trace_file(trial_id: str) -> str:
    return traces.trace_path(Path(), trial_id).as_posix()
