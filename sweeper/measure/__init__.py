"""Measuring one trial in this process: build, eager baseline, compile, time, memory, health,
accuracy. Imports torch, never pandas or Ray; `python -m sweeper.measure` runs one trial."""

from pathlib import Path

SPAWN_TIME_ENV = "SWEEPER_SPAWN_TIME"
"""Wall-clock time (time.time()) at which the runner started the measuring process."""
WORKER_PID_ENV = "SWEEPER_WORKER_PID"
"""The pid of the process that asked for this measuring process (its trial's Ray worker): a forked
one's parent is the host's fork server instead."""
AOTI_BUILD_COLUMNS = ("aoti_export_s", "aoti_package_s", "aoti_package_bytes", "compile_s", "aoti_cxx",
                      "aoti_cxx_replaced")
"""The build process's figures that the load process's row carries (measure.aoti, run.aoti_runs)."""


def aoti_stage_file(package: Path) -> Path:
    """Where an aoti load process leaves the stage it reached (measure.aoti writes it, the runner
    reads it after a crash: run.aoti_runs.crash_place)."""
    return package.with_name(package.name + ".stage.json")


def aoti_inputs_file(package: Path) -> Path:
    """What a package was built for (inputs, device) and by which C++ compiler: measure.aoti writes it
    at the build, its load process checks the inputs, the runner names the compiler after a failed load."""
    return package.with_name(package.name + ".inputs.json")
