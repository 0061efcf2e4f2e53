"""Which C++ compiler builds an AOTInductor package: one whose shared libraries load libstdc++.

Some hosts' compilers link libstdc++ into every shared object statically. A package library built
so carries a second C++ runtime beside the one torch loads, and the package's constructor then
faults or throws std::bad_cast when it is loaded (docs/options-and-aoti.md). So before a build,
the compiler inductor would call (from CXX or its default) builds a three-line library; if that
library carries its own runtime, the first other compiler on PATH or in /usr/bin whose library does
not is used instead. A host may set CXX to such a compiler for everything it builds: a package built
by it cannot load in any torch process, so it is replaced too. The row names the compiler that built
the package and the one it replaced.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

PROBE_SOURCE = "#include <locale>\nint probe() { return std::has_facet<std::ctype<char>>(std::locale()); }\n"
"""A library that uses std::locale, as a package's constructor does (through std::regex)."""
OTHER_COMPILERS = ("g++", "c++", "clang++", "/usr/bin/g++", "/usr/bin/c++", "/usr/bin/clang++")
PROBE_TIMEOUT_S = 120


def carries_own_runtime(data: bytes) -> bool:
    """A shared library's bytes: it defines std::locale but does not load libstdc++.so."""
    return b"libstdc++.so" not in data and b"_ZNSt6locale" in data


def links_own_runtime(cxx: str) -> bool | None:
    """Whether `cxx` puts libstdc++ into a shared library it links (None: it could not build one)."""
    with tempfile.TemporaryDirectory(prefix="sweeper-cxx-") as tmp:
        lib = Path(tmp) / "probe.so"
        try:
            done = subprocess.run([cxx, "-shared", "-fPIC", "-x", "c++", "-", "-o", str(lib)], input=PROBE_SOURCE,
                                  capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired):
            return None
        if done.returncode != 0 or not lib.exists():
            return None
        return carries_own_runtime(lib.read_bytes())


def _others(current: str) -> list[str]:
    """The compilers of OTHER_COMPILERS found here, each once (by the file it resolves to), `current` not."""
    seen = {os.path.realpath(shutil.which(current) or current)}
    found: list[str] = []
    for path in filter(None, map(shutil.which, OTHER_COMPILERS)):
        if os.path.realpath(path) not in seen:
            seen.add(os.path.realpath(path))
            found.append(path)
    return found


def choose(current: str) -> tuple[str, str | None]:
    """The compiler to build with and the one it replaces (None: `current` itself is kept). `current`
    is kept when its libraries load libstdc++ (or it could not build one), or when no other compiler's do."""
    if links_own_runtime(current) is not True:
        return current, None
    for other in _others(current):
        if links_own_runtime(other) is False:
            return other, shutil.which(current) or current
    return current, None
