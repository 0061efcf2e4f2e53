"""An independent check of `aoti_isa_check_s`, in plain torch (nothing imported from sweeper).

    python -m studies.knobs.isa_check OUT_DIR [--device cpu|cuda] [--runs 3]

Builds a two-layer MLP's AOTInductor package once, then in fresh processes, each with an empty
inductor cache of its own: (a) `aoti_load_package` alone, timed; (b) inductor's CPU check
(`pick_vec_isa`) first, then `aoti_load_package`, each timed; (c) as (b) in a process whose cache
already holds the check's test programs. Prints one JSON line per process and writes them all to
OUT_DIR/isa_check.json. If the load's time in (a) is the check's plus the load's in (b), the tool's
split (check timed apart, then the load) measures what a plain load spends.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = """
import json, sys, time, torch, torch._inductor
device, package, check_first = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
if device == "cuda":
    torch.empty(1, device="cuda")  # the context first, as a deployment does
out = {"check_first": check_first}
if check_first:
    from torch._inductor.cpu_vec_isa import pick_vec_isa
    t0 = time.perf_counter(); pick_vec_isa(); out["isa_check_s"] = time.perf_counter() - t0
t0 = time.perf_counter()
runner = torch._inductor.aoti_load_package(package, **({"device_index": 0} if device == "cuda" else {}))
out["load_s"] = time.perf_counter() - t0
print(json.dumps(out))
"""


def build(package: Path, device: str) -> None:
    import torch

    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)).eval()
    model = model.to(device)
    x = torch.randn(64, 256, device=device)
    torch._inductor.aoti_compile_and_package(torch.export.export(model, (x,)), package_path=str(package))


def child(device: str, package: Path, check_first: bool, cache: str) -> dict:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache}
    done = subprocess.run([sys.executable, "-c", CHILD, device, str(package), "1" if check_first else "0"], env=env,
                          capture_output=True, text=True, timeout=600, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    package = args.out / "mlp.pt2"
    build(package, args.device)
    results = []
    for run in range(args.runs):
        for arm in ("load_only", "check_then_load", "check_then_load_warm_cache"):
            cache = tempfile.mkdtemp(prefix="isa-check-")
            if arm == "check_then_load_warm_cache":
                child(args.device, package, True, cache)  # fills this cache first
            r = {"run": run, "arm": arm, **child(args.device, package, arm != "load_only", cache)}
            print(json.dumps(r), flush=True)
            results.append(r)
    package.unlink()
    (args.out / "isa_check.json").write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
