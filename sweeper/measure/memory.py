"""Memory of one trial: allocator peaks per phase, and what the process needs of the device.

`max_memory_allocated` sees tensors. A CUDA graph's private memory pool is reserved by the
caching allocator, and after capture its blocks count as free, though every replay writes into
them: a CUDA-graph mode's steady allocated peak can sit near the weights alone. So a row also
carries what the process really took: the allocator's reserved peak over the whole trial
(compile and autotuning included), which is what `torch.cuda.set_per_process_memory_fraction`
caps, and the device's used memory (CUDA context and loaded kernels included), sampled at the
end of each phase. On CPU: the process's resident high-water mark.
"""

from __future__ import annotations

import contextlib
import resource
from collections.abc import Iterator
from pathlib import Path

import torch

GIB = 1024**3


class MemoryTracker:
    """Peak memory since the last reset: CUDA allocator stats, or the process's RSS high-water.
    A reset first hands the peaks it is about to lose to the trial's `DeviceNeed`, if given."""

    def __init__(self, device: torch.device, need: DeviceNeed | None = None):
        self.device, self.need = device, need

    def reset(self) -> None:
        if self.need is not None:
            self.need.sample()
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        else:
            _reset_rss_hwm()

    def peak_gib(self) -> float:
        if self.device.type == "cuda":
            return torch.cuda.max_memory_allocated(self.device) / GIB
        return _rss_hwm_bytes() / GIB

    def peak_reserved_gib(self) -> float | None:
        if self.device.type == "cuda":
            return torch.cuda.max_memory_reserved(self.device) / GIB
        return None


class DeviceNeed:
    """What the trial's process needed of the device over its whole life, sampled at phase ends
    and before every reset of the allocator's peaks (which would lose the reserved peak)."""

    def __init__(self, device: torch.device):
        self.device = device
        self.reserved_gib = 0.0
        self.used_gib = 0.0

    def sample(self) -> None:
        if self.device.type != "cuda":
            return
        self.reserved_gib = max(self.reserved_gib, torch.cuda.max_memory_reserved(self.device) / GIB)
        free, total = torch.cuda.mem_get_info(self.device)
        self.used_gib = max(self.used_gib, (total - free) / GIB)

    @contextlib.contextmanager
    def excluded(self) -> Iterator[None]:
        """Leave what the block allocates (accuracy references, float64 copies) out of the need:
        sample before it, and after it release the cache and restart the peaks from what is live."""
        self.sample()
        try:
            yield
        finally:
            if self.device.type == "cuda":
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats(self.device)

    def as_row(self) -> dict[str, float | None]:
        self.sample()
        cuda = self.device.type == "cuda"
        return {"mem_need_reserved_gib": self.reserved_gib if cuda else None,
                "device_mem_used_gib": self.used_gib if cuda else None}


def cap_memory(device: torch.device, cap_gib: float) -> None:
    """Let the caching allocator take at most `cap_gib` of the device (as on a smaller GPU)."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    total = torch.cuda.get_device_properties(index).total_memory
    torch.cuda.set_per_process_memory_fraction(min(1.0, cap_gib * GIB / total), index)


def _reset_rss_hwm() -> None:
    with contextlib.suppress(OSError):  # Linux: writing 5 resets the peak resident set size (VmHWM)
        Path("/proc/self/clear_refs").write_text("5")


def _rss_hwm_bytes() -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
