"""Does a launch-bound eager step keep its speed on this host, alone and beside a neighbour?

    python -m benchmarks.host_jitter [--cpus 0-15] [--neighbour-cpus 16-31] [--neighbour-gpu 1]

Prints the CPU topology the guest sees, then the median step time of bert-base bf16 (batch 64,
seq 128, eager: hundreds of small kernels launched from one CPU thread) over 10 windows of 20
iterations, pinned to `--cpus`: alone, beside processes spinning on the neighbour CPUs, beside
processes spinning on its own slot, alone again; then in 1-second samples while a real inductor
compile (resnet50, cold cache, `default` then `max-autotune-no-cudagraphs`) runs pinned to the
neighbour CPUs on the neighbour GPU. A CUDA device is required.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing as mp
import os
import subprocess
import sys
import tempfile
import time

NEIGHBOUR = r'''
import time, torch, torchvision
m = torchvision.models.resnet50().cuda().eval(); x = torch.randn(64, 3, 224, 224, device="cuda")
for mode in ["default", "max-autotune-no-cudagraphs"]:
    torch._dynamo.reset(); c = torch.compile(m, mode=mode); t = time.time()
    with torch.no_grad(): c(x)
    print("neighbour compiled", mode, round(time.time() - t, 1), "s", flush=True)
'''


def cpu_list(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += range(int(lo), int(hi or lo) + 1)
    return out


def topology() -> str:
    def read(cpu: int, name: str) -> str:
        path = f"/sys/devices/system/cpu/cpu{cpu}/topology/{name}"
        return open(path).read().strip() if os.path.exists(path) else "?"
    cpus = " ".join(f"{c}:{read(c, 'physical_package_id')}/{read(c, 'core_id')}/{read(c, 'thread_siblings_list')}"
                    for c in range(os.cpu_count() or 0))
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    keep = ("Model name", "Thread(s) per core", "Core(s) per socket", "Socket(s)", "Hypervisor", "L3", "NUMA node(")
    found = "\n".join(line for line in lscpu.splitlines() if line.startswith(keep))
    return "cpu:package/core/siblings " + cpus + "\n" + found


def spin(cpu: int) -> None:
    os.sched_setaffinity(0, {cpu})
    while True:
        pass


def step_timer(windows: int):
    import torch
    from transformers import BertConfig, BertModel

    model = BertModel(BertConfig()).cuda().eval()
    ids = torch.randint(0, 30000, (64, 128), device="cuda")

    def median_ms(n: int = windows) -> str:
        times = []
        with torch.no_grad(), torch.autocast("cuda", torch.bfloat16):
            for _ in range(5):
                model(ids)
            torch.cuda.synchronize()
            for _ in range(n):
                t0 = time.perf_counter()
                for _ in range(20):
                    model(ids)
                torch.cuda.synchronize()
                times.append((time.perf_counter() - t0) / 20 * 1e3)
        times.sort()
        return f"median {times[len(times) // 2]:.2f} ms, min {times[0]:.2f}, max {times[-1]:.2f}"
    return median_ms


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cpus", default="0-15")
    ap.add_argument("--neighbour-cpus", default="16-31")
    ap.add_argument("--neighbour-gpu", default="1")
    args = ap.parse_args()
    own, other = cpu_list(args.cpus), cpu_list(args.neighbour_cpus)
    print(topology(), flush=True)
    os.sched_setaffinity(0, set(own))
    median_ms = step_timer(10)
    ctx = mp.get_context("fork")
    cases = [("alone", []), ("spin on neighbour CPUs", other), ("alone", []),
             ("spin on own CPUs (half)", own[len(own) // 2:]), ("alone", [])]
    for name, cpus in cases:
        spinners = [ctx.Process(target=spin, args=(c,), daemon=True) for c in cpus]
        for p in spinners:
            p.start()
        time.sleep(0.5)
        print(f"{name:26s} {median_ms()}", flush=True)
        for p in spinners:
            p.kill()
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": args.neighbour_gpu, "TORCHINDUCTOR_CACHE_DIR": tempfile.mkdtemp(),
           "TORCHINDUCTOR_COMPILE_THREADS": str(len(other))}
    neighbour = subprocess.Popen(["taskset", "-c", args.neighbour_cpus, sys.executable, "-c", NEIGHBOUR], env=env,
                                 start_new_session=True)
    t0 = time.time()
    while neighbour.poll() is None and time.time() - t0 < 120:
        print(f"neighbour compiling, t={time.time() - t0:5.1f} s: {median_ms(5)}", flush=True)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(neighbour.pid, 9)  # its compile workers too
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
