"""A trial's Mega-Cache artifact, from the measuring process to the results directory.

The cold process saves it (`--save-megacache`); a third process loads it into an empty cache
and compiles again (`warm_megacache_s`). Rows travel to the driver as Tune results, with no
shared file system, so the artifact travels inside the row, base64-encoded under a private key
(`_megacache_b64`, never a column), up to `TRAVEL_LIMIT_BYTES`; the driver writes it beside
results.parquet as `megacache/TRIAL_ID.bin` and the row names that file (`megacache_file`).
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sweeper.results.files import atomic_write_bytes

log = logging.getLogger(__name__)
ARTIFACT = "megacache.bin"
TRAVEL_LIMIT_BYTES = 32 * 2**20
"""Larger artifacts are measured (size, warm start) but not kept: they would weigh on every
Tune result log (base64 adds a third)."""
B64_KEY = "_megacache_b64"
DIRECTORY = "megacache"


def save_args(trial: dict[str, Any], workdir: Path) -> tuple[str, ...]:
    """The cold process's arguments that make a compiled trial save its artifact."""
    return () if trial["mode"] == "eager" else ("--save-megacache", str(workdir / ARTIFACT))


def warm_start(run_process: Callable[..., dict[str, Any]], payload: dict[str, Any], workdir: Path, left_s: float,
               cpus: list[int] | None) -> dict[str, Any]:
    """Compile again in a fresh process whose empty cache first loads the artifact; the measured
    columns, and `_process_s`. Nothing when the cold process saved no artifact."""
    artifact = workdir / ARTIFACT
    if not artifact.exists():
        return {}
    row = run_process(payload, workdir, workdir / "cache-megacache", left_s, warm=True, cpus=cpus,
                      tag="megacache", extra=("--load-megacache", str(artifact)))
    found = {"_process_s": row.pop("_process_s")}
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


def keep(results_dir: Path, trial_id: str, measured: dict[str, Any]) -> None:
    """Driver side: write a travelling artifact beside the results; the row names the file."""
    encoded = measured.pop(B64_KEY, None)
    if not encoded:
        return
    relative = f"{DIRECTORY}/{trial_id}.bin"
    atomic_write_bytes(results_dir / relative, base64.b64decode(encoded))
    measured["megacache_file"] = relative
