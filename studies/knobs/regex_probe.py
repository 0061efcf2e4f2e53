"""Is the AOTI load fault torch's package or the host's C++ toolchain? Three questions, each in a
fresh process whose end (exit code or signal) is recorded:

- `toolchain`: the C++ compiler inductor calls (`torch._inductor.cpp_builder.get_cpp_compiler`),
  its version, torch's `_GLIBCXX_USE_CXX11_ABI`, and the libstdc++ a torch process has mapped (its
  path and newest `GLIBCXX_` version).
- `regex_lib`: a small shared library holding the same `std::regex` the package's constructor
  compiles (`(cpu|cuda|xpu|mps)(:([0-9]+))?`, torch's `aoti_runtime/model_base.h`), built with that
  compiler and torch's ABI flag, loaded with `ctypes` into a process that imported torch (and made
  its CUDA context when there is a GPU), and called; then called in a process that never imported
  torch; and how it was linked (the linker line of `-v`: is libstdc++ linked in statically?). Where
  it faults in the torch process, the toolchain is the cause; where it runs, the package's build is.
- `alternatives`: the same library built by every other C++ compiler on the host (`g++`, `c++`,
  `clang++` under /usr/bin, other than the one inductor calls), how each links libstdc++, and
  whether each one's library runs in a torch process: a compiler to name in `CXX` (which inductor's
  `get_cpp_compiler` honours) if the one it calls is the cause.
- `package_libs`: for each package library under `--packages` (the load probe's builds), what it
  needs (`readelf -d`) and whether it carries a libstdc++ of its own (defined `std::locale` symbols).

    python -m studies.knobs.regex_probe OUT_DIR [--packages DIR]

OUT_DIR/regex_probe.json holds the answers.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

PATTERN = "(cpu|cuda|xpu|mps)(:([0-9]+))?"
SOURCE = textwrap.dedent(f"""\
    #include <regex>
    #include <string>
    extern "C" int parse_device(const char* text) {{
      std::regex re("{PATTERN}");
      std::smatch m;
      std::string s(text);
      if (!std::regex_match(s, m, re)) return -2;
      return m[3].matched ? std::stoi(m[3].str()) : -1;
    }}
    """)
CALLER = textwrap.dedent("""\
    import ctypes, sys, torch
    if torch.cuda.is_available():
        torch.zeros(1, device="cuda")
    lib = ctypes.CDLL(sys.argv[1])
    print("parsed", lib.parse_device(b"cuda:3"), lib.parse_device(b"cpu"), flush=True)
    """)
CALLER_NO_TORCH = CALLER.replace(", torch", "").replace("if torch.cuda.is_available():", "if False:")
OTHER_COMPILERS = ("/usr/bin/g++", "/usr/bin/c++", "/usr/bin/clang++")
LINKERS = ("collect2", "/ld", "ld.lld", "ld.gold")
"""How the linker's line in a `-v` build starts (gcc's collect2, clang's ld)."""
TOOLCHAIN = textwrap.dedent("""\
    import json, re, subprocess, torch
    from torch._inductor.cpp_builder import get_cpp_compiler
    cxx = get_cpp_compiler()
    maps = [line.split()[-1] for line in open("/proc/self/maps") if "libstdc++" in line]
    lib = sorted(set(maps))[0] if maps else None
    versions = re.findall(rb"GLIBCXX_3\\.4\\.(\\d+)", open(lib, "rb").read()) if lib else []
    print(json.dumps({"cxx": cxx, "cxx_version": subprocess.run([cxx, "--version"], capture_output=True,
                      text=True).stdout.splitlines()[:1], "cxx11_abi": bool(torch._C._GLIBCXX_USE_CXX11_ABI),
                      "torch": torch.__version__, "libstdcxx_mapped": lib,
                      "libstdcxx_newest": f"GLIBCXX_3.4.{max(map(int, versions))}" if versions else None}))
    """)


def _run(cmd: list[str], timeout_s: float = 300) -> dict[str, object]:
    """One fresh process: its exit (negative: the signal), and the tails of its output."""
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    return {"exit": out.returncode, "stdout": out.stdout[-2000:], "stderr": out.stderr[-2000:]}


def toolchain() -> dict[str, object]:
    run = _run([sys.executable, "-c", TOOLCHAIN])
    return {**run, **(json.loads(run["stdout"].splitlines()[-1]) if run["exit"] == 0 else {})}


def regex_lib(out: Path, cxx: str, cxx11_abi: bool) -> dict[str, object]:
    src, lib = out / "regex_lib.cpp", out / f"regex_lib.{cxx.strip('/').replace('/', '_')}.so"
    src.write_text(SOURCE)
    build = [cxx, "-shared", "-fPIC", "-O2", "-std=c++17", f"-D_GLIBCXX_USE_CXX11_ABI={int(cxx11_abi)}",
             str(src), "-o", str(lib)]
    built = _run([*build, "-v"])
    if built["exit"] != 0:
        return {"build": build, "built": built}
    link = [line for line in built["stderr"].splitlines()
            if line.split(" ", 2)[1 if line.startswith(" ") else 0].strip('"').endswith(LINKERS)][-1:]
    return {"build": build, "version": _run([cxx, "--version"])["stdout"].splitlines()[:1],
            "link_line": link[0][-1500:] if link else None,
            "libstdcxx_static": bool(link) and ("-Bstatic -lstdc++" in link[0] or "libstdc++.a" in link[0]),
            "needed": _needed(lib), "defines_std_locale": _defines_locale(lib),
            "call": _run([sys.executable, "-c", CALLER, str(lib)]),
            "call_without_torch": _run([sys.executable, "-c", CALLER_NO_TORCH, str(lib)])}


def alternatives(out: Path, cxx: str, cxx11_abi: bool) -> list[dict[str, object]]:
    mine = Path(shutil.which(cxx) or cxx).resolve()
    seen, found = {mine}, []
    for other in OTHER_COMPILERS:
        path = Path(other)
        if path.exists() and path.resolve() not in seen:
            seen.add(path.resolve())
            found.append({"cxx": other, **regex_lib(out, other, cxx11_abi)})
    return found


def _defines_locale(lib: Path) -> bool:
    symbols = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True).stdout \
        if shutil.which("nm") else ""
    return "_ZNSt6localeC1Ev" in symbols


def _needed(lib: Path) -> list[str]:
    if not shutil.which("readelf"):
        return []
    text = subprocess.run(["readelf", "-d", str(lib)], capture_output=True, text=True).stdout
    return [line.split("[")[-1].rstrip("]") for line in text.splitlines() if "(NEEDED)" in line]


def package_libs(packages: Path) -> list[dict[str, object]]:
    return [{"library": str(lib), "needed": _needed(lib), "defines_std_locale": _defines_locale(lib)}
            for lib in sorted(packages.rglob("*.so"))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--packages", type=Path, help="a folder of extracted package libraries (the load probe's)")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    tools = toolchain()
    result: dict[str, object] = {"toolchain": tools}
    if tools.get("cxx"):
        result["regex_lib"] = regex_lib(args.out, str(tools["cxx"]), bool(tools["cxx11_abi"]))
        result["alternatives"] = alternatives(args.out, str(tools["cxx"]), bool(tools["cxx11_abi"]))
    if args.packages:
        result["package_libs"] = package_libs(args.packages)
    (args.out / "regex_probe.json").write_text(json.dumps(result, indent=2) + "\n")
    built = [result.get("regex_lib", {}), *result.get("alternatives", [])]
    print(json.dumps({"cxx": tools.get("cxx_version"), "libstdcxx": tools.get("libstdcxx_newest"),
                      "libs": [{"build": b.get("build", [None])[0], "libstdcxx_static": b.get("libstdcxx_static"),
                                "exit_in_torch": b.get("call", {}).get("exit"),
                                "exit_without_torch": b.get("call_without_torch", {}).get("exit")}
                               for b in built if b]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
