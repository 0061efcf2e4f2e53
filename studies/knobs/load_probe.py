"""Why a fresh process's aoti_load_package crashed: packages built three ways, each loaded in fresh
processes in different orders and environments, each ending (exit code or signal), the last stage it
reached and its seconds recorded.

    python -m studies.knobs.load_probe OUT_DIR [--model resnet50] [--batch-size 64] [--device cuda]
                                       [--builds default,consts_on_disk,tiny]

Builds (each in its own process, which then loads its package in-process and calls it once, so a
crash there is a recorded result, not the probe's end):

- `default`: the model, torch.export + aoti_compile_and_package as sweeper's aoti path does
  (constants inside the shared library).
- `consts_on_disk`: the same with `aot_inductor.package_constants_in_so=False` and the constants
  in one binary blob beside the library.
- `tiny`: a two-layer MLP on the same device (is it the model or every package?).

Each build's package listing (`OUT_DIR/<build>/package.json`) and the shared library's unresolved
libraries (`ldd`, with and without this environment's LD_LIBRARY_PATH) are written too. Then every
fresh-process variant runs on the `default` package, and `load_after_cuda_index0` on the others:
the load before or after the process made its CUDA context, with the device index left to its
default (-1) or named; inputs on the wrong device or of another batch size; the correct order in an
environment stripped to PATH and HOME (`clean_env`); with the dynamic loader's trace (`ld_debug`:
the last libraries opened before an end); with the CUDA runtime torch itself loads preloaded
(`preload_torch_cudart`: one runtime in the process, should the library link another); and under
gdb when the host has it (`gdb`: the native stack); with a small fault handler preloaded that prints the
native stack and the faulting address without gdb (`native_stack`, built with the host's C compiler,
which an AOTI build needs anyway); and with the CUDA (or CPU) model runner constructed on the
package's extracted library, without the package loader (`runner_direct`: the loader or the model
container?). OUT_DIR/cuda.json records which CUDA runtime
torch loads and the toolkit (CUDA_HOME, nvcc) a build compiles against. Every child runs with core
dumps off and Python's fault handler on (its stack of the crash is in `stderr_tail`).
OUT_DIR/load_probe.jsonl holds one line a run; a table is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

VARIANTS = ("load_before_cuda_default_index", "load_before_cuda_index0", "load_after_cuda_default_index",
            "load_after_cuda_index0", "inputs_on_cpu", "inputs_other_batch", "clean_env", "ld_debug",
            "preload_torch_cudart", "gdb", "native_stack", "runner_direct")
BUILDS = ("default", "consts_on_disk", "tiny")
# the correct order, another setting
AFTER_CUDA = ("clean_env", "ld_debug", "preload_torch_cudart", "gdb", "native_stack", "runner_direct")
CONSTS_ON_DISK = {"aot_inductor.package_constants_in_so": False,
                  "aot_inductor.package_constants_on_disk_format": "binary_blob"}


def _stage(name: str, **more) -> None:
    print(json.dumps({"stage": name, "t": time.time(), **more}), flush=True)


def _call(runner, shape: list[int], dtype, where: str, cuda: bool) -> None:
    import torch

    x = torch.randn(shape, device=where).to(dtype) if dtype.is_floating_point else \
        torch.randint(0, 1000, shape, device=where, dtype=dtype)
    _stage("inputs", shape=shape, device=where)
    t0 = time.perf_counter()
    out = runner(x)
    if cuda:
        torch.cuda.synchronize()
    first = out[0] if isinstance(out, (list, tuple)) else out
    _stage("first_call", first_call_s=time.perf_counter() - t0, out_shape=list(getattr(first, "shape", [])))


def _inputs_file(package: str | Path) -> Path:
    """What the package was built for, beside it (sweeper's aoti path writes the same file)."""
    return Path(f"{package}.inputs.json")


def _first_input(package: str | Path):
    """The shape and dtype of the package's first recorded input."""
    import torch

    shape, dtype = json.loads(_inputs_file(package).read_text())["inputs"][0][:2]
    return shape, getattr(torch, dtype.removeprefix("torch."))


def child(variant: str, package: str, batch_size: int, device: str) -> None:
    import torch
    import torch._inductor

    cuda = device == "cuda"
    _stage("imported", torch=torch.__version__, cuda=torch.version.cuda)
    if "after_cuda" in variant or variant.startswith("inputs_") or variant in AFTER_CUDA:
        if cuda:
            torch.cuda.init()
            torch.empty(1, device="cuda:0")
        _stage("cuda_context")
    named = variant.endswith("index0") or variant.startswith("inputs_") or variant in AFTER_CUDA
    index = 0 if named and cuda else -1
    t0 = time.perf_counter()
    if variant == "runner_direct":
        runner = _runner_direct(package, cuda)
    else:
        runner = torch._inductor.aoti_load_package(package, device_index=index)
    _stage("loaded", load_s=time.perf_counter() - t0, device_index=index)
    shape, dtype = _first_input(package)
    if variant == "inputs_other_batch":
        shape = [max(1, shape[0] // 2), *shape[1:]]
    where = "cpu" if variant == "inputs_on_cpu" or not cuda else "cuda:0"
    _call(runner, shape, dtype, where, cuda)


def _runner_direct(package: str, cuda: bool):
    """The model runner on the package's own library, extracted beside it: no package loader."""
    import torch

    where = Path(f"{package}.extracted")
    with zipfile.ZipFile(package) as z:
        z.extractall(where)
    (lib,) = list(where.rglob("*.so"))
    _stage("extracted", library=str(lib.relative_to(where)), cubins=len(list(lib.parent.glob("*.cubin"))))
    if cuda:
        runner = torch._C._aoti.AOTIModelContainerRunnerCuda(str(lib), 1, "cuda:0", str(lib.parent))
    else:
        runner = torch._C._aoti.AOTIModelContainerRunnerCpu(str(lib), 1)
    _stage("runner_constructed")
    return lambda x: runner.run([x])


def _tiny(batch_size: int, device: str):
    """A two-layer MLP and its batch (the `tiny` build)."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10)).to(device).eval()
    return model, torch.randn(batch_size, 256, device=device)


def _package(net, args: tuple, kwargs: dict, package: Path, configs: dict, row: dict) -> None:
    import torch
    import torch._inductor

    t0 = time.perf_counter()
    with torch.no_grad():
        exported = torch.export.export(net, tuple(args), kwargs or None)
    row["aoti_export_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    torch._inductor.aoti_compile_and_package(exported, package_path=str(package), inductor_configs=configs)
    row["aoti_package_s"] = time.perf_counter() - t0
    row["inductor_configs"] = {k: v for k, v in configs.items() if isinstance(v, (bool, int, float, str))}


def build_child(build: str, model: str, batch_size: int, device: str, out: Path) -> None:
    """Build one package at out/model.pt2 (the row beside it), then load it here and call it once."""
    import torch
    import torch._inductor

    from sweeper.measure import aoti
    from sweeper.measure.inductor_options import aoti_configs

    cuda = device == "cuda"
    package, row = out / "model.pt2", {}
    if build == "tiny":
        net, x = _tiny(batch_size, device)
        _package(net, (x,), {}, package, {}, row)
        _inputs_file(package).write_text(json.dumps(
            {"inputs": [[list(x.shape), str(x.dtype), x.device.type]], "device": device}))
    else:
        from sweeper.measure.workbench import build_workbench
        from sweeper.spec.sweep_spec import parse_spec
        from sweeper.spec.trials import expand

        spec = parse_spec({"name": "probe", "models": [{"name": model}], "axes": {
            "mode": ["default"], "path": ["aoti"], "batch_size": [batch_size], "dynamic": [False]},
            "measure": {"matmul_precision": "highest"}})
        (trial,) = expand(spec)[0]
        wb = build_workbench(trial, torch.device(device))
        if build == "default":  # exactly sweeper's build
            aoti.build(wb, row, package)
        else:  # the trial's own configs, the constants out of the library
            _package(wb.model, wb.batch.args, wb.batch.kwargs, package, {**aoti_configs(trial), **CONSTS_ON_DISK}, row)
            _inputs_file(package).write_text(json.dumps({"inputs": aoti.signature(wb), "device": device}))
    row["aoti_package_bytes"] = package.stat().st_size
    (out / "build.json").write_text(json.dumps(row, indent=2))
    _stage("built", **row)
    shape, dtype = _first_input(package)
    t0 = time.perf_counter()
    runner = torch._inductor.aoti_load_package(str(package), device_index=0 if cuda else -1)
    _stage("same_process_loaded", load_s=time.perf_counter() - t0)
    _call(runner, shape, dtype, "cuda:0" if cuda else "cpu", cuda)


def _no_core() -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _run(cmd: list[str], env: dict[str, str] | None = None, timeout: float = 1200) -> dict:
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, preexec_fn=_no_core)
        code, stdout, stderr = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as e:
        code, stdout, stderr = None, (e.stdout or b"").decode(errors="replace"), "timeout"
    stages = [json.loads(line) for line in stdout.splitlines() if line.startswith('{"stage"')]
    return {"returncode": code, "signal": -code if code is not None and code < 0 else None,
            "last_stage": stages[-1]["stage"] if stages else None, "wall_s": round(time.perf_counter() - t0, 2),
            "stages": stages, "stdout_tail": stdout.strip()[-3000:] if "gdb" in cmd[0] else "",
            "stderr_tail": stderr.strip()[-4000:]}


SEGV_STACK_C = r"""
#define _GNU_SOURCE
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void on_fault(int sig, siginfo_t *info, void *ctx) {
    void *frames[64];
    char line[128];
    int n = backtrace(frames, 64);
    int len = snprintf(line, sizeof line, "native stack: signal %d at address %p\n", sig, info->si_addr);
    write(2, line, len);
    backtrace_symbols_fd(frames, n, 2);
    signal(sig, SIG_DFL);
    raise(sig);
}

__attribute__((constructor)) static void install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSEGV, &sa, NULL);
    sigaction(SIGBUS, &sa, NULL);
}
"""


def _segv_stack_library(out: Path) -> Path | None:
    """A preloadable fault handler that prints the native stack (None: no C compiler here)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return None
    src, lib = out / "segv_stack.c", out / "segv_stack.so"
    src.write_text(SEGV_STACK_C)
    done = subprocess.run([cc, "-shared", "-fPIC", "-O0", "-o", str(lib), str(src)], capture_output=True, text=True)
    return lib if done.returncode == 0 else None


CUDA_FACTS = """
import json, torch
from torch.utils import cpp_extension
found = {"cuda_home": cpp_extension.CUDA_HOME, "torch_cuda": torch.version.cuda, "torch_libs": []}
if torch.cuda.is_available():
    torch.empty(1, device="cuda")
    found["driver"] = torch.cuda.get_device_name()
    with open("/proc/self/maps") as f:
        found["torch_libs"] = sorted({line.split()[-1] for line in f if "libcudart" in line or "libcuda.so" in line})
print(json.dumps(found))
"""


def _cuda_facts() -> dict:
    """Which CUDA runtime torch loads, and the toolkit (CUDA_HOME, nvcc) an AOTI build compiles against."""
    done = subprocess.run([sys.executable, "-c", CUDA_FACTS], capture_output=True, text=True)
    found = json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else {"error": done.stderr[-800:]}
    nvcc = shutil.which("nvcc") or (str(Path(found["cuda_home"], "bin", "nvcc")) if found.get("cuda_home") else None)
    if nvcc and Path(nvcc).exists():
        found["nvcc"] = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout.strip()[-200:]
    return found


def _package_facts(out: Path) -> dict:
    """The package's members and sizes, and what the dynamic loader cannot resolve in its library."""
    package = out / "model.pt2"
    with zipfile.ZipFile(package) as z:
        members = {i.filename: i.file_size for i in z.infolist()}
        libs = [n for n in members if n.endswith(".so")]
        found = {"members": members, "ldd": {}}
        if libs and shutil.which("ldd"):
            lib = out / "extracted" / Path(libs[0]).name
            lib.parent.mkdir(exist_ok=True)
            lib.write_bytes(z.read(libs[0]))
            for name, env in (("this_env", None), ("no_ld_library_path",
                                                   {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"})):
                ldd = subprocess.run(["ldd", str(lib)], capture_output=True, text=True, env=env)
                found["ldd"][name] = [line.strip() for line in ldd.stdout.splitlines()
                                      if "not found" in line or "torch" in line or "cud" in line or "c10" in line]
            shutil.rmtree(lib.parent)
    (out / "package.json").write_text(json.dumps(found, indent=2))
    return found


def _child_cmd(variant: str, package: Path, args, cuda: dict,
               segv_lib: Path | None = None) -> tuple[list[str], dict[str, str] | None]:
    cmd = [sys.executable, "-X", "faulthandler", str(Path(__file__).resolve()), str(args.out),
           "--batch-size", str(args.batch_size), "--device", args.device, "--child", variant, str(package)]
    env = None
    if variant == "clean_env":
        env = {k: os.environ[k] for k in ("PATH", "HOME", "LANG") if k in os.environ}
    elif variant == "ld_debug":
        env = {**os.environ, "LD_DEBUG": "files"}
    elif variant == "preload_torch_cudart":  # the runtime torch itself loads, first: one CUDA runtime only
        cudart = [lib for lib in cuda.get("torch_libs", []) if "libcudart" in lib]
        env = {**os.environ, "LD_PRELOAD": cudart[0]} if cudart else None
    elif variant == "native_stack" and segv_lib is not None:  # Python's fault handler chains to it
        env = {**os.environ, "LD_PRELOAD": str(segv_lib)}
    elif variant == "gdb":
        cmd = ["gdb", "-q", "-batch", "-ex", "run", "-ex", "bt 40", "--args", *cmd]
    return cmd, env


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--builds", default=",".join(BUILDS), help=f"comma-separated, of {', '.join(BUILDS)}")
    ap.add_argument("--child", nargs=2, metavar=("VARIANT", "PACKAGE"), help=argparse.SUPPRESS)
    ap.add_argument("--build-child", metavar="BUILD", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child[0], args.child[1], args.batch_size, args.device)
        return 0
    if args.build_child:
        build_child(args.build_child, args.model, args.batch_size, args.device, args.out / args.build_child)
        return 0
    builds = [b for b in args.builds.split(",") if b]
    unknown = sorted(set(builds) - set(BUILDS))
    if unknown:
        ap.error(f"unknown build {unknown[0]!r}: one of {', '.join(BUILDS)}")
    results = []
    args.out.mkdir(parents=True, exist_ok=True)
    cuda = _cuda_facts() if args.device == "cuda" else {}
    (args.out / "cuda.json").write_text(json.dumps(cuda, indent=2))
    segv_lib = _segv_stack_library(args.out)

    def record(result: dict) -> None:
        results.append(result)
        print(f"{result['build']:15s} {result['variant']:31s} exit {result['returncode']!s:>4s}  "
              f"{result['wall_s']:7.1f} s  last stage {result['last_stage']}", flush=True)
        with open(args.out / "load_probe.jsonl", "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in results)

    for build in builds:
        out = args.out / build
        out.mkdir(parents=True, exist_ok=True)
        if not (out / "model.pt2").exists():
            cmd = [sys.executable, "-X", "faulthandler", str(Path(__file__).resolve()), str(args.out), "--model",
                   args.model, "--batch-size", str(args.batch_size), "--device", args.device, "--build-child", build]
            record({"build": build, "variant": "build_then_load_in_process", **_run(cmd)})
        if not (out / "model.pt2").exists():
            continue
        _package_facts(out)
        variants = VARIANTS if build == "default" else ("load_after_cuda_index0", "native_stack", "runner_direct")
        for variant in variants:
            if (variant == "gdb" and not shutil.which("gdb")) or (variant == "preload_torch_cudart" and not any(
                    "libcudart" in lib for lib in cuda.get("torch_libs", []))) or (
                    variant == "native_stack" and segv_lib is None):
                continue
            cmd, env = _child_cmd(variant, out / "model.pt2", args, cuda, segv_lib)
            record({"build": build, "variant": variant, **_run(cmd, env)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
