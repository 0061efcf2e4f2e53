"""Where an aoti load process died, read back from the mark it leaves beside the package, and a
package library that carries its own C++ runtime, named after a failed load."""

from __future__ import annotations

import json
import shutil
import subprocess
import zipfile

import pytest

from sweeper.measure import aoti_inputs_file, aoti_stage_file
from sweeper.run import aoti_runs


def test_a_crash_inside_the_loader_names_it_and_torch_s_versions(tmp_path):
    package = tmp_path / aoti_runs.PACKAGE
    assert aoti_runs.crash_place(package) == ""  # died before the load began: nothing to add
    mark = aoti_stage_file(package)
    mark.write_text(json.dumps({"stage": "load", "torch": "2.11.0+cu130", "cuda": "13.0"}))
    assert aoti_runs.crash_place(package) == "inside torch's aoti_load_package (torch 2.11.0+cu130, CUDA 13.0)"
    mark.write_text(json.dumps({"stage": "loaded", "torch": "2.14.1", "cuda": None}))
    assert aoti_runs.crash_place(package).startswith("after the package loaded")
    mark.write_text("{torn")
    assert aoti_runs.crash_place(package) == ""


_LOCALE_USER = ('#include <locale>\n'
                'extern "C" int facets() { return std::has_facet<std::ctype<char>>(std::locale()); }\n')


def _library(tmp_path, name: str, *flags: str) -> bytes:
    src = tmp_path / "lib.cpp"
    src.write_text(_LOCALE_USER)
    subprocess.run([shutil.which("g++"), "-shared", "-fPIC", str(src), "-o", str(tmp_path / name), *flags],
                   check=True, capture_output=True, timeout=120)
    return (tmp_path / name).read_bytes()


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_a_library_linked_with_its_own_libstdcxx_is_named_with_the_compiler_and_the_remedy(tmp_path):
    """Two real libraries using std::locale, one linked as a compiler that puts libstdc++ in every
    shared object does (-static-libstdc++), packed as a package holds its libraries."""
    package = tmp_path / aoti_runs.PACKAGE
    with zipfile.ZipFile(package, "w") as z:
        z.writestr("model/data/aotinductor/model/a.wrapper.so", _library(tmp_path, "a.so"))
        z.writestr("model/data/aotinductor/model/b.wrapper.so", _library(tmp_path, "b.so", "-static-libstdc++"))
    assert aoti_runs.own_cxx_runtimes(package) == ["b.wrapper.so"]
    aoti_inputs_file(package).write_text(json.dumps({"inputs": [], "device": "cpu", "cxx": "/opt/gcc/bin/g++"}))
    note = aoti_runs.runtime_note(package)
    assert "b.wrapper.so carries its own libstdc++" in note and "/opt/gcc/bin/g++" in note
    assert "CXX set to a compiler that links libstdc++ dynamically" in note


def test_a_package_without_such_a_library_or_unreadable_adds_nothing(tmp_path):
    package = tmp_path / aoti_runs.PACKAGE
    assert aoti_runs.runtime_note(package) == ""  # no package (the build failed)
    package.write_bytes(b"not a zip")
    assert aoti_runs.runtime_note(package) == ""
    with zipfile.ZipFile(package, "w") as z:
        z.writestr("m/data/aotinductor/model/a.wrapper.so", b"\x7fELF ... libstdc++.so.6 ... _ZNSt6localeC1Ev")
        z.writestr("m/data/aotinductor/model/kernels.so", b"\x7fELF ... plain C, no C++ runtime at all")
    assert aoti_runs.own_cxx_runtimes(package) == []
