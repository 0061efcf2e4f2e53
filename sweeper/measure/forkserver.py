"""A fork server for measuring processes: imports once, forks one fresh child per measuring process.

    python -m sweeper.measure.forkserver SOCKET IDLE_S   (started by run/forkserver_client.py)

Importing torch, the zoo's model classes and what a `torch.compile` wrapper needs costs every
measuring process the same seconds; a fork of a parent that did it once costs none of them. The
parent only imports: it never runs a tensor operation, never initializes CUDA, never compiles, and
checks before every fork that dynamo's and inductor's state is what importing leaves. It asks NVML
rather than the CUDA runtime whether CUDA is there (PYTORCH_NVML_BASED_CUDA_CHECK=1), so forked
children may still use CUDA; a probe fork after the imports checks that, and if the guard is set
and children need CUDA (NEEDS_CUDA_ENV) it names the caller and exits, and the worker starts new
interpreters instead.

One server serves every worker of a host whose measuring processes share its environment (the
client names the socket after it): it outlives the worker that started it and retires after
IDLE_S seconds without a caller. A caller connects, sends one request line and reads `{"pid": P}`
at the child's start and `{"pid": P, "returncode": R}` at its end (R < 0: signal -R); a caller
that hangs up has its child killed, and a child dies with the server. The child's own first steps:
measure/forkserver_child.py."""

from __future__ import annotations

import contextlib
import gc
import json
import os
import select
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any

from sweeper.measure import forkserver_child

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


def _send(conn: socket.socket, message: dict[str, Any]) -> None:
    with contextlib.suppress(OSError):  # a caller that left: nobody to tell
        conn.sendall((json.dumps(message) + "\n").encode())


_BEFORE_IMPORTS = "something that ran before the server's own imports, e.g. a sitecustomize or .pth file"


def _start(path: str) -> socket.socket:
    """Import, listen on `path`, then say ready on stdout and leave the caller's process tree (the
    server outlives the worker that started it); or say why this server cannot fork measuring
    processes, and exit."""
    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"  # is_available() without the fork guard
    import torch  # noqa: F401 - imported before the watch goes on torch._C

    watch = _GuardWatch()
    try:
        preload_s = preload()
    finally:
        watch.stop()
    if os.environ.get(NEEDS_CUDA_ENV) == "1" and fork_guard_set():
        print(json.dumps({"ready": False, "error": "importing torch and the zoo set torch's CUDA fork guard (a CUDA "
              f"device count was asked by {watch.first or _BEFORE_IMPORTS}); forked children could not use CUDA"}))
        sys.exit(0)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)  # a server that died without cleaning up; the caller holds the start lock
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    if os.fork() > 0:  # the caller waits for this process to end; the server goes on in its child
        os._exit(0)
    print(json.dumps({"ready": True, "preload_s": round(preload_s, 3), "pid": os.getpid()}), flush=True)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):
        os.dup2(devnull, fd)
    return listener


class _Server:
    """Every caller's connection: one request line in, `{"pid": P}` and then `{"pid": P,
    "returncode": R}` out. A caller that hangs up while its child runs has the child killed."""

    def __init__(self, path: str, listener: socket.socket, idle_s: float):
        self.path, self.listener, self.idle_s = path, listener, idle_s
        self.inode = os.stat(path).st_ino
        self.buffers: dict[socket.socket, bytes] = {}
        self.pids: dict[socket.socket, int] = {}
        self.callers: dict[int, socket.socket | None] = {}
        self.served: set[socket.socket] = set()
        self.wake_r, wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w)  # a child's end wakes the loop at once
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, self._stop)
        self.stopping = False
        self.inherited = [listener.fileno(), self.wake_r, wake_w]

    def serve(self) -> None:
        idle_since = time.monotonic()
        while True:
            readable = select.select([self.listener, self.wake_r, *self.buffers], [], [], 1.0)[0]
            for sock in readable:
                if sock is self.listener:
                    conn, _ = self.listener.accept()
                    self.buffers[conn] = b""
                elif sock == self.wake_r:
                    with contextlib.suppress(BlockingIOError):
                        os.read(self.wake_r, 4096)
                else:
                    self._read(sock)
            self._reap()
            if self.stopping:
                return self._close()
            if self.buffers or self.callers:
                idle_since = time.monotonic()
            elif time.monotonic() - idle_since > self.idle_s or not self._still_named():
                return self._close()

    def _stop(self, *_: object) -> None:
        """SIGTERM: leave at once, socket removed (children die with the server)."""
        self.stopping = True

    def _read(self, conn: socket.socket) -> None:
        try:
            chunk = conn.recv(65536)
        except OSError:
            chunk = b""
        if not chunk:  # the caller hung up: its child, if any, goes too
            pid = self.pids.pop(conn, None)
            if pid is not None:
                self.callers[pid] = None
                for kill in (os.killpg, os.kill):
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        kill(pid, signal.SIGKILL)
            del self.buffers[conn]
            self.served.discard(conn)
            conn.close()
            return
        if conn in self.served:  # one request a connection: anything after it is not one
            return
        self.buffers[conn] += chunk
        if b"\n" in self.buffers[conn]:
            self.served.add(conn)
            self._fork(conn, json.loads(self.buffers[conn].split(b"\n", 1)[0]))

    def _fork(self, conn: socket.socket, request: dict[str, Any]) -> None:
        _check_fresh()
        inherited = [*self.inherited, *(c.fileno() for c in self.buffers)]
        pid = os.fork()
        if pid == 0:
            forkserver_child.run(request, inherited)
        self.pids[conn], self.callers[pid] = pid, conn
        _send(conn, {"pid": pid})

    def _reap(self) -> None:
        while self.callers:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.callers.pop(pid, None)
            if conn is not None:
                self.pids.pop(conn, None)
                _send(conn, {"pid": pid, "returncode": os.waitstatus_to_exitcode(status)})

    def _still_named(self) -> bool:
        """Whether the socket's path still leads here (removed or taken over: this server retires)."""
        try:
            return os.stat(self.path).st_ino == self.inode
        except OSError:
            return False

    def _close(self) -> None:
        if self._still_named():
            with contextlib.suppress(OSError):
                os.unlink(self.path)
        self.listener.close()


def serve(path: str, idle_s: float) -> None:
    """Serve callers on the Unix socket `path` until no caller came for `idle_s` seconds."""
    listener = _start(path)
    gc.collect()
    gc.freeze()  # the imported objects: never scanned by a child's collections, so never copied into it
    _Server(path, listener, idle_s).serve()


if __name__ == "__main__":
    serve(sys.argv[1], float(sys.argv[2]))
