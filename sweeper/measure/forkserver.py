"""A fork server for measuring processes: imports once, forks one fresh child per measuring process.

    python -m sweeper.measure.forkserver      (started by run/forkserver_client.py; JSON lines on stdin/stdout)

Importing torch, the zoo's model classes and what a `torch.compile` wrapper needs costs every
measuring process the same seconds; a fork of a parent that did it once costs none of them. The
parent only imports: it never runs a tensor operation, never initializes CUDA, never compiles, and
checks before every fork that dynamo's and inductor's state is what importing leaves. It asks NVML
rather than the CUDA runtime whether CUDA is there (PYTORCH_NVML_BASED_CUDA_CHECK=1), so forked
children may still use CUDA; a probe fork after the imports checks that, and if the guard is set
and children need CUDA (NEEDS_CUDA_ENV) it names the caller and exits, and the worker starts new
interpreters instead. Each child takes its own session, CPUs, threads, environment and caches,
re-reads what torch fixed at import, and runs `python -m sweeper.measure`'s main with the same
arguments. Replies: `{"pid": P}` at start, `{"pid": P, "returncode": R}` at the end (R < 0: signal
-R). What each child has as its own, in full: docs/measurement.md."""

from __future__ import annotations

import contextlib
import gc
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

NEEDS_CUDA_ENV = "SWEEPER_FORKSERVER_CUDA"
"""Set to 1 in the server's environment when its children measure on CUDA."""
PRELOAD = ("torch", "torchvision", "transformers", "sweeper.zoo.vision", "sweeper.zoo.nlp", "sweeper.zoo.recurrent",
           "sweeper.measure.process")
"""Modules imported once by the server; a zoo NLP model's transformers classes come with them."""
_ZOO_NLP_CLASSES = ("BertForSequenceClassification", "DistilBertForSequenceClassification",
                    "RobertaForSequenceClassification", "GPT2LMHeadModel", "T5ForConditionalGeneration")


def preload() -> float:
    """Import everything a measuring process imports; returns the seconds it took."""
    t0 = time.monotonic()
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    import transformers

    for cls in _ZOO_NLP_CLASSES:  # transformers imports a model's module on first attribute access
        getattr(transformers, cls)
    _preload_compile()
    return time.monotonic() - t0


class _GuardWatch:
    """While the server imports: who asks the CUDA runtime for its device count (which sets torch's
    fork guard). Notes the first caller's frames outside torch; the call itself goes through."""

    def __init__(self) -> None:
        import torch

        self.first: str | None = None
        self._c, self._original = torch._C, getattr(torch._C, "_cuda_getDeviceCount", None)
        if self._original is not None:
            self._c._cuda_getDeviceCount = self._count

    def _count(self) -> int:
        if self.first is None:
            import traceback

            cuda_dir = f"{os.sep}torch{os.sep}cuda{os.sep}"
            frames = [f for f in traceback.extract_stack()[:-1] if cuda_dir not in f.filename]
            self.first = " <- ".join(f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in reversed(frames[-4:]))
        return self._original()

    def stop(self) -> None:
        if self._original is not None:
            self._c._cuda_getDeviceCount = self._original


def fork_guard_set() -> bool:
    """Whether a child forked now would refuse CUDA (torch's fork guard): one probe child asks."""
    pid = os.fork()
    if pid == 0:
        import torch

        os._exit(3 if torch.cuda._is_in_bad_fork() else 0)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) != 0


def _preload_compile() -> None:
    """What making a `torch.compile` wrapper imports (inductor, AOTAutograd, the partitioner's
    networkx; 0.7 s on a 2-core machine, in every compiled measuring process): wrappers made here,
    never called, then dynamo reset. Inductor's compile-worker pool starts at the first compile (the
    inductor backend's first call), so never here; `_check_fresh` makes sure."""
    import torch

    for mode in ("default", "reduce-overhead", "max-autotune"):
        torch.compile(torch.nn.Identity(), mode=mode, dynamic=False)
    torch._dynamo.reset()


def _check_fresh() -> None:
    """What a fork must not copy: a CUDA context (unusable in a child) or compiled state."""
    import torch

    if torch.cuda.is_initialized():
        raise RuntimeError("the fork server initialized CUDA; its children would share a broken context")
    from torch._dynamo.utils import counters

    if any(counters.values()):
        raise RuntimeError("the fork server compiled something; its children would inherit dynamo state")
    pools = getattr(sys.modules.get("torch._inductor.async_compile"), "_pool_set", ())
    if pools:
        raise RuntimeError("the fork server started inductor's compile workers; its children would share them")
    triton_driver = getattr(sys.modules.get("triton.runtime.driver"), "driver", None)
    if any(getattr(triton_driver, a, None) is not None for a in ("_default", "_active")):
        raise RuntimeError("the fork server started Triton's GPU driver; its children would share it")


def _become_trial(request: dict[str, Any]) -> None:
    """In the child, before any measuring code: session, death with the server, CPUs, environment."""
    import ctypes

    os.setsid()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if request.get("cpus"):
        os.sched_setaffinity(0, request["cpus"])
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    for entry in reversed(request["env"].get("PYTHONPATH", "").split(os.pathsep)):
        if entry and entry not in sys.path:
            sys.path.insert(0, entry)
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


def _child(request: dict[str, Any]) -> None:
    code = 1
    try:
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


def _reply(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


_BEFORE_IMPORTS = "something that ran before the server's own imports, e.g. a sitecustomize or .pth file"


def _start() -> None:
    """Import, then say ready, or why this server cannot fork measuring processes (and exit)."""
    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"  # is_available() without the fork guard
    import torch  # noqa: F401 - imported before the watch goes on torch._C

    watch = _GuardWatch()
    try:
        preload_s = preload()
    finally:
        watch.stop()
    if os.environ.get(NEEDS_CUDA_ENV) == "1" and fork_guard_set():
        _reply({"ready": False, "error": "importing torch and the zoo set torch's CUDA fork guard (a CUDA "
                f"device count was asked by {watch.first or _BEFORE_IMPORTS}); forked children could not use CUDA"})
        sys.exit(0)
    _reply({"ready": True, "preload_s": round(preload_s, 3)})


def serve() -> None:
    """One request at a time: fork, say the child's pid, wait for it, say how it ended."""
    _start()
    gc.collect()
    gc.freeze()  # the imported objects: never scanned by a child's collections, so never copied into it
    for line in sys.stdin:
        request = json.loads(line)
        _check_fresh()
        pid = os.fork()
        if pid == 0:
            _child(request)
        _reply({"pid": pid})
        _, status = os.waitpid(pid, 0)
        _reply({"pid": pid, "returncode": os.waitstatus_to_exitcode(status)})


if __name__ == "__main__":
    serve()
