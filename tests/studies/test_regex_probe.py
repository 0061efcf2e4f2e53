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
