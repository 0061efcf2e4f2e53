"""A forked measuring process's first steps, before any measuring code: leave the server's
connections, session and environment behind and become the trial's process (measure/forkserver.py
forks it; docs/measurement.md: what each child has as its own)."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from typing import Any


def die_with_parent() -> None:
    """Linux, in a new process before it runs anything: be killed when the thread that started it
    ends (PR_SET_PDEATHSIG)."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _become_trial(request: dict[str, Any]) -> None:
    """In the child, before any measuring code: session, death with the server, CPUs, environment."""
    os.setsid()
    die_with_parent()
    if request.get("cpus"):
        os.sched_setaffinity(0, request["cpus"])
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])  # PYTHONPATH is part of the server's key: its sys.path already has those entries
    err = os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(err, 2)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):
        os.dup2(devnull, fd)
    _reread_env_config()


def _reread_env_config() -> None:
    """Settings torch fixed from the environment when the server imported it, read again."""
    import torch
    from torch._inductor import config as inductor_config

    inductor_config.compile_threads = inductor_config.decide_compile_threads()
    torch._logging._init_logs()  # TORCH_LOGS, TORCH_TRACE (a trial's structured trace directory)
    if os.environ.get("OMP_NUM_THREADS"):
        torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


def run(request: dict[str, Any], inherited: list[int]) -> None:
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        for signum in (signal.SIGCHLD, signal.SIGTERM):  # the server's handlers: not the trial's
            signal.signal(signum, signal.SIG_DFL)
        for fd in inherited:  # the server's socket and other callers' connections: theirs alone
            with contextlib.suppress(OSError):
                os.close(fd)
        _become_trial(request)
        from sweeper.measure.process import main

        code = main(request["argv"])
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            import logging

            logging.shutdown()
            sys.stderr.flush()
        os._exit(code)
