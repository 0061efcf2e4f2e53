"""Run one trial in fresh processes with a hard time limit; turn any ending into a row.

Each trial gets its own empty inductor/Triton cache (a cold compile), then, if asked, a
second process reuses that cache (a warm compile). A hung process is killed with its
whole process group; a process that dies (segfault, SIGKILL, host OOM killer) becomes a
`crashed` row and is retried; OOM and compile errors are never retried (they would fail
the same way again). No Ray here: the Ray trainable calls `run_trial`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil

import sweeper
from sweeper.measure import SPAWN_TIME_ENV, WORKER_PID_ENV, forkserver_child
from sweeper.measure.forkserver import NEEDS_CUDA_ENV
from sweeper.results import traces
from sweeper.run import aoti_runs, artifacts, forkserver_client
from sweeper.run.cpus import cpu_slot

if TYPE_CHECKING:
    from sweeper.spec.resources import Resources
    from sweeper.spec.trials import Trial

log = logging.getLogger(__name__)
RETRIED_STATUSES = ("crashed",)
_STDERR_TAIL = 2000


def user_import_path() -> list[str]:
    """This process's import directories other than Python's own: the project a spec's
    `package.module:factory` comes from, a Ray working_dir. The measuring process starts
    elsewhere (Tune moves workers into trial directories), so it gets them explicitly."""
    system = [Path(p).resolve() for p in {sys.prefix, sys.base_prefix, sys.exec_prefix}]
    found: list[str] = []
    for entry in sys.path:
        p = Path(entry or os.getcwd()).resolve()
        if p.is_dir() and not any(p == s or s in p.parents for s in system) and str(p) not in found:
            found.append(str(p))
    return found


def trial_payloads(trials: list[Trial], device: str, pin_cpus: int | None, resources: Resources) -> dict[str, str]:
    """What each trial's worker gets (`run_trial`'s payload), as JSON by trial id. torch reads
    TORCH_TRACE when imported, so a traced trial's measuring processes are new interpreters."""
    import_path, r = user_import_path(), resources  # where the driver found the spec's factories
    return {t.trial_id: json.dumps({"trial": t.to_dict(), "device": device, "import_path": import_path,
                                    "pin_cpus": pin_cpus, "trials_per_gpu": r.trials_per_gpu if device == "cuda" else 1,
                                    "process_start": "subprocess" if t.measure.trace else r.process_start})
            for t in trials}


def _pythonpath(extra: list[str]) -> str:
    here = str(Path(sweeper.__file__).resolve().parent.parent)
    rest = os.environ.get("PYTHONPATH")
    return os.pathsep.join([here, *extra, *user_import_path(), *([rest] if rest else [])])


def _child_env(cache_dir: Path, import_path: list[str], measure: dict[str, Any],
               cpus: list[int] | None) -> dict[str, str]:
    env = dict(os.environ)
    threads = measure.get("compile_threads") or (len(cpus) if cpus else None)
    if threads:
        env["TORCHINDUCTOR_COMPILE_THREADS"] = str(threads)
    if cpus:  # intra-op threads follow the trial's share, not the host's core count
        env["OMP_NUM_THREADS"] = str(len(cpus))
    env.update(TORCHINDUCTOR_CACHE_DIR=str(cache_dir / "inductor"),
               TRITON_CACHE_DIR=str(cache_dir / "triton"),
               TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE="0",
               TORCHINDUCTOR_AUTOTUNE_REMOTE_CACHE="0",
               PYTHONPATH=_pythonpath(import_path), PYTHONUNBUFFERED="1")
    return env


def _start_child(cpus: list[int] | None):
    """What the measuring process runs before Python starts: die with the worker, and keep to
    the trial's CPUs (inherited by everything it starts, inductor's compile workers included)."""
    def start() -> None:
        forkserver_child.die_with_parent()
        if cpus:
            os.sched_setaffinity(0, cpus)
    return start


def _kill_group(pid: int, alive: bool) -> None:
    """SIGKILL the process group `pid` leads, and any descendant that left it (a child calling
    setsid). `alive`: the leader is not reaped yet (once reaped, its pid may belong to another)."""
    strays: list[psutil.Process] = []
    if alive:
        with contextlib.suppress(psutil.Error):
            strays = psutil.Process(pid).children(recursive=True)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    for child in strays:
        with contextlib.suppress(psutil.Error):
            child.kill()


def _run_subprocess(args: list[str], env: dict[str, str], err_file: Path, cpus: list[int] | None,
                    timeout_s: float) -> tuple[int, bool]:
    """`python -m sweeper.measure ARGS` as a new interpreter: (return code, timed out)."""
    with open(err_file, "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "sweeper.measure", *args], env=env,
                                stdout=subprocess.DEVNULL, stderr=err, start_new_session=True,
                                preexec_fn=_start_child(cpus))
        try:
            proc.wait(timeout=max(timeout_s, 1.0))
            timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            _kill_group(proc.pid, proc.poll() is None)  # also reaps compile workers left in the group
            proc.wait()
    return proc.returncode, timed_out


def _run_forked(args: list[str], env: dict[str, str], err_file: Path, cpus: list[int] | None,
                timeout_s: float) -> tuple[int, bool]:
    """The same measuring process forked from the host's fork server (imports already done), or a
    new interpreter where that server cannot fork (it said why, once, in the worker's log)."""
    try:
        child = forkserver_client.fork(args, env, err_file, cpus)
    except forkserver_client.ForkServerUnusable:
        return _run_subprocess(args, env, err_file, cpus, timeout_s)
    with child:
        code = child.wait(max(timeout_s, 1.0))
        if code is None:  # timed out: the server reaps it once killed
            _kill_group(child.pid, alive=True)
            return child.wait(None), True
        _kill_group(child.pid, alive=False)  # compile workers left in its group
        return code, False


def _exit_text(code: int, stderr: str) -> str:
    if code < 0:
        name = signal.Signals(-code).name
        why = " (possibly the host's out-of-memory killer)" if name == "SIGKILL" else ""
        head = f"process killed by {name}{why}"
    else:
        head = f"process exited with code {code} before finishing"
    tail = stderr.strip()[-_STDERR_TAIL:]
    return f"{head}; stderr: {tail}" if tail else head


def run_process(payload: dict[str, Any], workdir: Path, cache_dir: Path, timeout_s: float,
                warm: bool = False, cpus: list[int] | None = None, tag: str | None = None,
                extra: tuple[str, ...] = ()) -> dict[str, Any]:
    """One `python -m sweeper.measure` process (`extra`: more of its arguments); returns its row
    whatever happens."""
    tag = tag or ("warm" if warm else "cold")
    trial_file, out_file, err_file = (workdir / f"{tag}.{n}" for n in ("trial.json", "row.json", "stderr"))
    trial_file.write_text(json.dumps(payload))
    out_file.unlink(missing_ok=True)
    args = ["--trial", str(trial_file), "--out", str(out_file), *(["--warm"] if warm else []), *extra]
    env = _child_env(cache_dir, payload.get("import_path", []), payload["trial"]["measure"], cpus)
    t0 = time.monotonic()
    env[SPAWN_TIME_ENV] = repr(t0)  # the measuring process times its start-up from here (one monotonic clock)
    env[WORKER_PID_ENV] = str(os.getpid())
    if not warm and payload["trial"]["measure"].get("trace"):
        env["TORCH_TRACE"] = str(cache_dir / "trace")  # wiped with the cache before each attempt
    if payload.get("device") == "cuda":
        env[NEEDS_CUDA_ENV] = "1"
    start = _run_forked if payload.get("process_start") == "forkserver" else _run_subprocess
    try:
        code, timed_out = start(args, env, err_file, cpus, timeout_s)
    except forkserver_client.ForkServerDied as e:
        code, timed_out = None, False
        err_file.write_text(f"{e}\n")
    row = json.loads(out_file.read_text()) if out_file.exists() else {}
    row["_process_s"] = time.monotonic() - t0
    if timed_out and row.get("status") in (None, "running"):  # a finished row stands, even if exit hung
        row.update(status="timeout", error=f"trial exceeded trial_timeout_s={timeout_s:g}; "
                   f"killed with its process group while {row.get('status', 'starting')}")
    elif row.get("status") in (None, "running"):
        stderr = err_file.read_text(errors="replace") if err_file.exists() else ""
        row.update(status="crashed", error=_exit_text(code, stderr) if code is not None else stderr.strip())
    return row


def run_trial(payload: dict[str, Any], max_retries: int = 1) -> dict[str, Any]:
    """Cold run (retried after a crash), then a warm-cache run for compiled trials, on the
    trial's own CPUs when the payload asks to pin them (`pin_cpus`: how many)."""
    pin = payload.get("pin_cpus")
    with cpu_slot(pin) if pin else contextlib.nullcontext() as cpus:
        return _run_pinned(payload, max_retries, cpus)


def _phases_of(tag: str, phase_s_json: str | None, process_s: float) -> dict[str, float]:
    """A later process's own phases (its row's `phase_s_json`), named `TAG.PHASE`, and `TAG.exit`:
    what its process time holds beyond them (interpreter exit, CUDA context teardown, the row's way back)."""
    phases = json.loads(phase_s_json or "{}")
    return {**{f"{tag}.{k}": v for k, v in phases.items()}, f"{tag}.exit": max(0.0, process_s - sum(phases.values()))}


def _warm_processes(payload: dict[str, Any], workdir: Path, row: dict[str, Any], deadline: float,
                    cpus: list[int] | None) -> dict[str, float]:
    """The warm compile from the trial's cache, then (unless the spec skips it) the warm start from
    its Mega-Cache artifact, each in a new process; their columns go into `row`, their seconds out."""
    trial = payload["trial"]
    if row.get("first_call_s") is not None and row.get("compile_s") is not None:
        payload = {**payload, "steady_step_s": row["first_call_s"] - row["compile_s"]}  # what compile_s left out
    warm = run_process(payload, workdir, workdir / "cache", deadline - time.monotonic(), warm=True, cpus=cpus)
    processes = {"warm_process": warm.pop("_process_s")}
    processes.update(_phases_of("warm", warm.get("phase_s_json"), processes["warm_process"]))
    if warm.get("status") == "ok":
        row.update(warm_compile_s=warm["warm_compile_s"], warm_first_call_s=warm["warm_first_call_s"],
                   compiled_need_reserved_gib=warm.get("compiled_need_reserved_gib"))
    else:
        log.warning("trial %s warm compile: %s %s", trial["trial_id"], warm["status"], warm["error"])
    if trial["measure"].get("megacache_warm_start", True):
        mega = artifacts.warm_start(run_process, payload, workdir, deadline - time.monotonic(), cpus)
        if mega:
            processes["megacache_process"] = mega.pop("_process_s")
            processes.update(_phases_of("megacache", mega.pop("_phase_s_json", None), processes["megacache_process"]))
        row.update(mega)
    return processes


def _run_pinned(payload: dict[str, Any], max_retries: int, cpus: list[int] | None) -> dict[str, Any]:
    trial = payload["trial"]
    timeout_s = float(trial["measure"]["trial_timeout_s"])
    started, t0 = datetime.now(UTC), time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix=f"sweeper-{trial['trial_id']}-"))
    try:
        for attempt in range(1, max_retries + 2):
            shutil.rmtree(workdir / "cache", ignore_errors=True)  # every attempt compiles cold
            row = (aoti_runs.run(run_process, payload, workdir, timeout_s, cpus) if aoti_runs.is_aoti(trial) else
                   run_process(payload, workdir, workdir / "cache", timeout_s, cpus=cpus,
                               extra=artifacts.save_args(trial, workdir)))
            if row["status"] not in RETRIED_STATUSES or not row.pop("_retry", True):
                break
            log.warning("trial %s crashed (attempt %d): %s", trial["trial_id"], attempt, row["error"])
        row["attempts"] = attempt
        packed = traces.pack(workdir / "cache" / "trace")
        if packed and trial["mode"] != "eager":
            row[traces.PACKED_KEY] = packed
        processes = {"cold_process": row.pop("_process_s")}
        if row["status"] == "ok" and trial["mode"] != "eager" and trial["measure"]["warm_compile"] \
                and not aoti_runs.is_aoti(trial):  # a package is its own warm start
            processes.update(_warm_processes(payload, workdir, row, t0 + timeout_s, cpus))
        artifacts.attach(row, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    phases = json.loads(row.get("phase_s_json") or "{}")
    row["phase_s_json"] = json.dumps({**phases, **{k: round(v, 4) for k, v in processes.items()}})
    row.update(started_at=started.isoformat(), finished_at=datetime.now(UTC).isoformat(),
               trial_wall_s=time.monotonic() - t0, cpus_pinned=cpus is not None)
    return row
