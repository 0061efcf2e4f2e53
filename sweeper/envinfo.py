"""The environment a trial ran in: versions, device, host. Recorded in every row."""

from __future__ import annotations

import importlib.metadata
import platform
import re
import socket
import subprocess
from functools import cache
from pathlib import Path

import sweeper


def _run(cmd: list[str], cwd: Path | None = None) -> str | None:
    try:
        out = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


@cache
def git_commit() -> str | None:
    """Commit of the sweeper checkout (None for an installed, non-git copy)."""
    repo = Path(sweeper.__file__).resolve().parent.parent
    if not (repo / ".git").exists():
        return None
    sha = _run(["git", "rev-parse", "HEAD"], cwd=repo)
    dirty = _run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=repo)
    return f"{sha}{'-dirty' if dirty else ''}" if sha else None


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


TRITON_DISTRIBUTIONS = ("triton", "pytorch-triton", "pytorch-triton-rocm", "pytorch-triton-xpu")
"""Names Triton is installed under: plain, and the builds PyTorch's own wheel indexes ship."""


def package_version(*names: str) -> str | None:
    """The installed version of the first of these distributions found, read from its metadata
    without importing it (the measuring process must not load Ray)."""
    for name in names:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def device_info(device_type: str) -> dict:
    import torch

    info = {
        "sweeper_version": sweeper.__version__,
        "torch_version": torch.__version__,
        "cuda_version": torch.version.cuda,
        "python_version": platform.python_version(),
        "triton_version": package_version(*TRITON_DISTRIBUTIONS),
        "transformers_version": package_version("transformers"),
        "ray_version": package_version("ray"),
        "hostname": socket.gethostname(),
        "device_type": device_type,
        "device_name": _cpu_name(),
        "gpu_uuid": None,
        "driver_version": None,
    }
    if device_type == "cuda":
        props = torch.cuda.get_device_properties(0)
        uuid = getattr(props, "uuid", None)
        info["device_name"] = props.name
        if uuid is not None:
            info["gpu_uuid"] = str(uuid) if str(uuid).startswith("GPU-") else f"GPU-{uuid}"
        info["driver_version"] = driver_version()
    return info


_PROC_VERSION = Path("/proc/driver/nvidia/version")


def parse_proc_version(text: str) -> str | None:
    """The driver version in /proc/driver/nvidia/version's first line ("NVRM version: NVIDIA UNIX
    ... Kernel Module ... 580.159.04 ..."), or None."""
    first = text.splitlines()[0] if text else ""
    m = re.search(r"Kernel Module.*?\s(\d+\.\d+(?:\.\d+)?)\s", first + " ")
    return m.group(1) if m else None


def driver_version() -> str | None:
    """The NVIDIA driver version (one per host): read from the kernel module's /proc entry, else
    asked of nvidia-smi, which costs every measuring process another process start."""
    try:
        found = parse_proc_version(_PROC_VERSION.read_text())
    except OSError:
        found = None
    if found:
        return found
    smi = _run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
    return smi.splitlines()[0] if smi else None


def format_cpus(cpus: list[int]) -> str:
    """CPU list in the kernel's range notation: [0, 1, 2, 5] -> "0-2,5"."""
    parts, start = [], None
    for i, c in enumerate(cpus):
        if start is None:
            start = c
        if i + 1 == len(cpus) or cpus[i + 1] != c + 1:
            parts.append(f"{start}-{c}" if c != start else f"{c}")
            start = None
    return ",".join(parts)
