"""The AOTI toolchain probe (studies/knobs/regex_probe.py) on this machine: the same std::regex the
package's constructor compiles, in a library built with inductor's compiler, runs in a torch process."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from tests.helpers import REPO


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None, reason="needs a C++ compiler")
def test_the_regex_library_is_built_with_torchs_abi_and_parses_device_strings(tmp_path):
    out = subprocess.run([sys.executable, "-m", "studies.knobs.regex_probe", str(tmp_path)], cwd=REPO,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads((tmp_path / "regex_probe.json").read_text())
    tools = result["toolchain"]
    assert tools["exit"] == 0 and tools["cxx"] and tools["libstdcxx_mapped"]
    assert f"-D_GLIBCXX_USE_CXX11_ABI={int(tools['cxx11_abi'])}" in result["regex_lib"]["build"]
    call = result["regex_lib"]["call"]
    assert call["exit"] == 0 and "parsed 3 -1" in call["stdout"], call  # "cuda:3" -> 3, "cpu" -> no index
    lib = result["regex_lib"]
    assert lib["call_without_torch"]["exit"] == 0 and "parsed 3 -1" in lib["call_without_torch"]["stdout"]
    assert lib["link_line"]  # the linker's line of the -v build was found
    # this machine's compiler loads libstdc++ as a library: not the statically linked kind
    assert "libstdc++.so.6" in lib["needed"] and lib["libstdcxx_static"] is False and not lib["defines_std_locale"]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_a_library_linked_with_its_own_libstdcxx_is_seen_as_such_and_fails_only_beside_torch(tmp_path):
    """The host fault, made here on purpose: the regex library linked with -static-libstdc++."""
    from studies.knobs import regex_probe

    gxx = tmp_path / "g++"
    gxx.write_text(f'#!/bin/sh\nexec {shutil.which("g++")} "$@" -static-libstdc++\n')
    gxx.chmod(0o755)
    lib = regex_probe.regex_lib(tmp_path, str(gxx), cxx11_abi=True)
    assert lib["libstdcxx_static"] and lib["defines_std_locale"] and "libstdc++.so.6" not in lib["needed"]
    assert lib["call_without_torch"]["exit"] == 0, lib["call_without_torch"]
    assert lib["call"]["exit"] != 0, lib["call"]  # bad_cast (g++ 12) or a fault (g++ 13) beside torch's libstdc++
