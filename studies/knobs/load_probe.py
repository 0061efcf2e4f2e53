"""Why a fresh process's aoti_load_package crashed: one package, loaded in fresh processes in
different orders, each ending (exit code or signal) and the last stage it reached recorded.

    python -m studies.knobs.load_probe OUT_DIR [--model resnet50] [--batch-size 64] [--device cuda]

Builds OUT_DIR/model.pt2 once (torch.export + aoti_compile_and_package, as sweeper's aoti path does),
then runs every variant in a new interpreter and writes OUT_DIR/load_probe.jsonl (one line a variant)
and prints a table. Variants: the load before or after the process made its CUDA context, with the
device index left to its default (-1) or named; and, after a correct load, inputs on the wrong
device or of another batch size (the package's inputs are fixed).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

VARIANTS = ("load_before_cuda_default_index", "load_before_cuda_index0", "load_after_cuda_default_index",
            "load_after_cuda_index0", "inputs_on_cpu", "inputs_other_batch")


def _stage(name: str, **more) -> None:
    print(json.dumps({"stage": name, "t": time.time(), **more}), flush=True)


def child(variant: str, package: str, batch_size: int, device: str) -> None:
    import torch
    import torch._inductor

    cuda = device == "cuda"
    _stage("imported", torch=torch.__version__, cuda=torch.version.cuda)
    if "after_cuda" in variant or variant.startswith("inputs_"):
        if cuda:
            torch.cuda.init()
            torch.empty(1, device="cuda:0")
        _stage("cuda_context")
    index = 0 if (variant.endswith("index0") or variant.startswith("inputs_")) and cuda else -1
    t0 = time.perf_counter()
    runner = torch._inductor.aoti_load_package(package, device_index=index)
    _stage("loaded", load_s=time.perf_counter() - t0, device_index=index)
    meta = json.loads(Path(package + ".inputs.json").read_text())
    shape, dtype = meta["inputs"][0][0], getattr(torch, meta["inputs"][0][1].removeprefix("torch."))
    if variant == "inputs_other_batch":
        shape = [max(1, batch_size // 2), *shape[1:]]
    where = "cpu" if variant == "inputs_on_cpu" or not cuda else "cuda:0"
    x = torch.randn(shape, device=where).to(dtype) if dtype.is_floating_point else \
        torch.randint(0, 1000, shape, device=where, dtype=dtype)
    _stage("inputs", shape=shape, device=where)
    t0 = time.perf_counter()
    out = runner(x)
    if cuda:
        torch.cuda.synchronize()
    first = out[0] if isinstance(out, (list, tuple)) else out
    _stage("first_call", first_call_s=time.perf_counter() - t0, out_shape=list(getattr(first, "shape", [])))


def build(out: Path, model: str, batch_size: int, device: str) -> Path:
    import torch

    from sweeper.measure import aoti
    from sweeper.measure.workbench import build_workbench
    from sweeper.spec.sweep_spec import parse_spec
    from sweeper.spec.trials import expand

    spec = parse_spec({"name": "probe", "models": [{"name": model}], "axes": {
        "mode": ["default"], "path": ["aoti"], "batch_size": [batch_size], "dynamic": [False]},
        "measure": {"matmul_precision": "highest"}})
    (trial,) = expand(spec)[0]
    wb = build_workbench(trial, torch.device(device))
    package, row = out / "model.pt2", {}
    aoti.build(wb, row, package)
    (out / "build.json").write_text(json.dumps(row, indent=2))
    return package


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--child", nargs=2, metavar=("VARIANT", "PACKAGE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child[0], args.child[1], args.batch_size, args.device)
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    package = args.out / "model.pt2"
    if not package.exists():
        build(args.out, args.model, args.batch_size, args.device)
    results = []
    for variant in VARIANTS:
        proc = subprocess.run([sys.executable, __file__, str(args.out), "--batch-size", str(args.batch_size),
                               "--device", args.device, "--child", variant, str(package)],
                              capture_output=True, text=True, timeout=900)
        stages = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
        results.append({"variant": variant, "returncode": proc.returncode,
                        "signal": -proc.returncode if proc.returncode < 0 else None,
                        "last_stage": stages[-1]["stage"] if stages else None, "stages": stages,
                        "stderr_tail": proc.stderr.strip()[-1500:]})
        print(f"{variant:34s} exit {proc.returncode:4d}  last stage {results[-1]['last_stage']}", flush=True)
    with open(args.out / "load_probe.jsonl", "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
