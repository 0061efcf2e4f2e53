"""An aoti trial's two measuring processes: one builds the package, a fresh one loads and measures it.

The load runs in a process of its own, as a deployment's would; if it dies (a segmentation fault
in the package's code, say) its row is `crashed` with the signal, where the process was (inside
torch's package loader, or after the load) and torch's versions, and the build's figures stay in
the row. The package travels to the driver like a Mega-Cache artifact
(`_aoti_b64`, up to a size limit) so that `sweeper export` can ship it.
"""

from __future__ import annotations

import base64
import json
import logging
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sweeper.measure import AOTI_BUILD_COLUMNS, aoti_inputs_file, aoti_stage_file
from sweeper.measure.cxx_runtime import carries_own_runtime

log = logging.getLogger(__name__)
PACKAGE = "model.pt2"
B64_KEY = "_aoti_b64"
TRAVEL_LIMIT_BYTES = 128 * 2**20
"""Larger packages are measured but not kept."""
DIRECTORY = "aoti"


STAGES = {"load": "inside torch's aoti_load_package",
          "loaded": "after the package loaded (its calls, or the eager arm's beside them)"}
"""Where a load process that died was, as measure.aoti leaves it beside the package."""


def crash_place(package: Path) -> str:
    """Where the load process died and with which torch ("" when it died before the load began)."""
    try:
        mark = json.loads(aoti_stage_file(package).read_text())
    except (OSError, ValueError):
        return ""
    return f"{STAGES.get(mark.get('stage'), mark.get('stage'))} (torch {mark.get('torch')}, CUDA {mark.get('cuda')})"


def own_cxx_runtimes(package: Path) -> list[str]:
    """The package's shared libraries that carry a C++ runtime of their own: they define std::locale
    but do not load libstdc++.so (the compiler that linked them put libstdc++ in statically)."""
    try:
        with zipfile.ZipFile(package) as z:  # one library in memory at a time (a package's may be 100 MB)
            return [Path(n).name for n in z.namelist() if n.endswith(".so") and carries_own_runtime(z.read(n))]
    except (OSError, zipfile.BadZipFile):
        return []


def runtime_note(package: Path) -> str:
    """Why a load failed, where the package shows it: a library with its own libstdc++ beside the one
    torch loads (two C++ runtimes disagree on std::locale's facets, and the std::regex that the
    package's constructor builds throws std::bad_cast or faults); "" otherwise."""
    own = own_cxx_runtimes(package)
    if not own:
        return ""
    try:
        cxx = json.loads(aoti_inputs_file(package).read_text()).get("cxx")
    except (OSError, ValueError):
        cxx = None
    return (f"; the package's {own[0]} carries its own libstdc++ (linked in statically by the C++ compiler "
            f"inductor called{f', {cxx}' if cxx else ''}) beside torch's: build with CXX set to a compiler "
            "that links libstdc++ dynamically")


def is_aoti(trial: dict[str, Any]) -> bool:
    return trial.get("path", "jit") == "aoti"


def run(run_process: Callable[..., dict[str, Any]], payload: dict[str, Any], workdir: Path, timeout_s: float,
        cpus: list[int] | None) -> dict[str, Any]:
    """The build, then (if it succeeded) the load; the load's row with the build's figures, or the
    build's row when it failed. `_process_s` holds both processes' seconds."""
    t0 = time.monotonic()
    package = workdir / PACKAGE
    build = run_process(payload, workdir, workdir / "cache", timeout_s, cpus=cpus, tag="aoti_build",
                        extra=("--aoti-build", str(package)))
    if build.get("status") != "ok":
        build["error"] = f"aoti build: {build.get('error')}"
        return build
    figures = {k: build.get(k) for k in AOTI_BUILD_COLUMNS}
    left_s = timeout_s - (time.monotonic() - t0)
    row = run_process({**payload, "aoti_build": figures}, workdir, workdir / "cache-load", left_s, cpus=cpus,
                      tag="aoti_load", extra=("--aoti-load", str(package)))
    row.update({k: v for k, v in figures.items() if row.get(k) is None})
    if row.get("status") != "ok":
        place = crash_place(package) if row.get("status") == "crashed" else ""
        error = f"aoti load (fresh process): {row.get('error')}" + (f", {place}" if place else "") \
            + runtime_note(package)
        row.update(error=error, _retry=False)  # the build stands
        log.warning("trial %s aoti load: %s %s", payload["trial"]["trial_id"], row["status"], row["error"])
    row["_process_s"] = time.monotonic() - t0
    attach(row, package)
    return row


def attach(row: dict[str, Any], package: Path) -> None:
    if not package.exists():
        return
    if package.stat().st_size > TRAVEL_LIMIT_BYTES:
        log.warning("AOTInductor package of %d bytes is over the travel limit: not kept", package.stat().st_size)
        return
    row[B64_KEY] = base64.b64encode(package.read_bytes()).decode("ascii")


def send(row: dict[str, Any], trial_id: str, write: Callable[[str, bytes], int]) -> None:
    """Worker side: write the package beside the results and leave its name in the row."""
    encoded = row.pop(B64_KEY, None)
    if encoded:
        relative = f"{DIRECTORY}/{trial_id}.pt2"
        write(relative, base64.b64decode(encoded))
        row["aoti_package_file"] = relative
