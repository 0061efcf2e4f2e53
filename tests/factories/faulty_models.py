"""Test-only model factories that fail for real: specs name them as `faulty_models:make_xxx`.

Each returns a plain nn.Module fed by the spec's `input` section (kind tensor). The faults
are real, not mocked: an allocation that cannot fit, a compile that raises, a compile that
hangs (with a child process of its own), a process that kills itself, a dead Ray worker,
a compiled model whose outputs are wrong.

Compile-only faults use a custom op whose fake (meta) kernel misbehaves: torch.compile runs
the fake kernel while tracing, eager never does, so the eager baseline stays healthy and
only the compile fails. (A plain `raise` under `torch.compiler.is_compiling()` is not
enough: dynamo treats it as a graph break and runs the frame eagerly.)
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch
from torch import nn

HANG_CHILD_MARKER = "sweeper-fault-hang-child"
"""In the command line of the process a hanging compile starts, so a test can look for it."""
ALLOC_FLOATS = 10**13
"""40 TB of float32: no host or GPU can hold it."""
_hang_pid_dir: str | None = None


@torch.library.custom_op("sweeper_faults::refuse_compile", mutates_args=())
def _refuse_compile(x: torch.Tensor) -> torch.Tensor:
    return x.clone()


@_refuse_compile.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    raise RuntimeError("injected compile failure: this op cannot be traced")


@torch.library.custom_op("sweeper_faults::hang_compile", mutates_args=())
def _hang_compile(x: torch.Tensor) -> torch.Tensor:
    return x.clone()


@_hang_compile.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    # Children, as a compile would have: the timeout must kill them too, even the one that
    # left the process group.
    note_pid = f"open(os.path.join({_hang_pid_dir!r}, str(os.getpid())), 'w').close()" if _hang_pid_dir else ""
    sleeper = [sys.executable, "-c", f"import os, time; {note_pid}; time.sleep(3600)", HANG_CHILD_MARKER]
    subprocess.Popen(sleeper)
    subprocess.Popen(sleeper, start_new_session=True)
    while True:
        time.sleep(1)


class _Fault(nn.Module):
    """A small linear layer; subclasses inject their fault into forward."""

    def __init__(self, features: int = 8):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x)


class _HugeAllocation(_Fault):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scratch = torch.empty(ALLOC_FLOATS, dtype=torch.float32, device=x.device)
        return self.linear(x) + scratch[:1]


class _CompileRaises(_Fault):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _refuse_compile(self.linear(x))


class _CompileHangs(_Fault):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _hang_compile(self.linear(x))


class _RuntimeFails(_Fault):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise ValueError("injected runtime failure: bad input shape")


class _KillsItself(_Fault):
    def __init__(self, how: str, once_marker: str | None = None):
        super().__init__()
        self.how, self.once_marker = how, once_marker

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.once_marker is not None:  # crash in the first process only: the retry succeeds
            if os.path.exists(self.once_marker):
                return self.linear(x)
            open(self.once_marker, "w").close()
        if self.how == "segv":
            ctypes.string_at(0)  # reads address 0: SIGSEGV
        os.kill(os.getpid(), signal.SIGKILL)
        return self.linear(x)


class _KillsRayWorker(_Fault):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        import psutil

        # The Ray worker that asked for this process (its parent, or the fork server's caller)
        worker = psutil.Process(int(os.environ["SWEEPER_WORKER_PID"]))
        if not worker.name().startswith("ray::"):  # never kill anything but a Ray worker
            raise RuntimeError(f"not run by a Ray worker (it is {worker.name()!r})")
        worker.kill()
        time.sleep(60)  # the worker's death takes this process with it (its fork server's caller hung up)
        return self.linear(x)


class _WrongWhenCompiled(_Fault):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        if torch.compiler.is_compiling():
            y = y + 1.0
        return y


def make_ok(features: int = 8) -> nn.Module:
    return _Fault(features)


def make_numpy_scaled(features: int = 8) -> nn.Module:
    """Healthy, and built as much user code builds: a mask drawn on the host by name, then its
    initial weights scaled by a figure computed in numpy from a tensor it draws. Under a device as
    torch's default device that tensor is drawn there and numpy cannot read it, so the build fails
    anywhere but on the host (after drawing the mask from the host's generator)."""
    model = _Fault(features)
    keep = torch.rand(features, device="cpu") > 0.1  # drawn on the host whatever the default device
    scale = float((torch.randn(features, features).numpy() ** 2).mean()) ** -0.5
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(scale)
        model.register_buffer("keep", keep.to(next(model.parameters()).device))
    return model


def make_oom() -> nn.Module:
    return _HugeAllocation()


def make_compile_error() -> nn.Module:
    return _CompileRaises()


def make_hang(pid_dir: str | None = None) -> nn.Module:
    """Hangs in compile; the children it starts write their pids into `pid_dir`."""
    global _hang_pid_dir
    _hang_pid_dir = pid_dir
    return _CompileHangs()


def make_runtime_error() -> nn.Module:
    return _RuntimeFails()


def make_sigkill() -> nn.Module:
    return _KillsItself("sigkill")


def make_segfault(once_marker: str | None = None) -> nn.Module:
    """Segfaults; with `once_marker` (a file path) only until that file exists."""
    return _KillsItself("segv", once_marker)


def make_dead_worker() -> nn.Module:
    return _KillsRayWorker()


def make_inaccurate() -> nn.Module:
    return _WrongWhenCompiled()


def make_slow(seconds: float = 1.0) -> nn.Module:
    """Healthy, but takes `seconds` to build: gives a test time to act between trials."""
    time.sleep(seconds)
    return _Fault()


_tickets: dict[str, int] = {}


def _ticket(tickets_dir: str) -> int:
    """This process's place among the measuring processes that built a model with `tickets_dir`:
    0 for the first, 1 for the next...; one ticket per process, however often it builds."""
    if tickets_dir not in _tickets:
        Path(tickets_dir).mkdir(parents=True, exist_ok=True)
        n = 0
        while True:
            try:
                os.close(os.open(Path(tickets_dir) / str(n), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
                break
            except FileExistsError:
                n += 1
        _tickets[tickets_dir] = n
    return _tickets[tickets_dir]


def make_gated(tickets_dir: str, gate: str, free: int = 1, features: int = 8) -> nn.Module:
    """Healthy; the first `free` measuring processes to build it go on at once, every later one
    waits until the file `gate` exists. A test holds a sweep between trials for as long as it needs
    (its next trial is measuring, not finished), then creates `gate` to let the rest run."""
    ticket = _ticket(tickets_dir)
    while ticket >= free and not Path(gate).exists():
        time.sleep(0.05)
    return _Fault(features)


def make_barrier(tickets_dir: str, parties: int = 2, timeout_s: float = 300.0, features: int = 8) -> nn.Module:
    """Healthy; a measuring process that builds it waits until `parties` processes have built it (or
    `timeout_s` passed, then goes on): the first `parties` trials are measuring at one time whenever the
    scheduler lets that many run at once, and one after another, late, when it does not."""
    _ticket(tickets_dir)
    deadline = time.monotonic() + timeout_s
    while len(os.listdir(tickets_dir)) < parties and time.monotonic() < deadline:
        time.sleep(0.05)
    return _Fault(features)


def make_slow_host_once(tickets_dir: str, features: int = 8) -> nn.Module:
    """Healthy; the first measuring process to build it sees the host in its slow CPU state for its
    whole life: it judges its host-speed readings by a record of a host 10^6 times faster (a private
    record file: the host's own is left alone), so every window reads slow. Later processes judge
    theirs by their own readings alone (a private empty record), as on a host of one speed."""
    from sweeper.measure import witness

    record = Path(tickets_dir) / f"fast_ms.{os.getpid()}"
    first = _ticket(tickets_dir) == 0
    if first:
        fast_ms, now = witness.probe_ms() / 1e6, time.time()  # the host's record: its latest processes
        record.write_text("".join(f"{now:.3f} {pid} {fast_ms:.9f}\n" for pid in range(1, witness.HOST_PROCESSES + 1)))
    witness.HOST_FILE = record
    return _Fault(features)


def make_unbuildable() -> nn.Module:
    """Raises in the factory itself, as a user's model with a wrong argument would."""
    raise ValueError("width must be a multiple of 64 (got 50)\nsecond line of detail")
