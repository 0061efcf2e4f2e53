"""The C++ compiler an AOTInductor build uses: one that links libstdc++ into shared libraries is
replaced by one that does not (real compiles of a three-line library; a wrapper of this machine's
g++ plays a host compiler that links libstdc++ in statically)."""

from __future__ import annotations

import os
import shutil

import pytest

from sweeper.measure import cxx_runtime
from tests.helpers import static_gxx

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")


def test_a_compiler_is_judged_by_the_library_it_links(tmp_path):
    assert cxx_runtime.links_own_runtime(static_gxx(tmp_path / "bin")) is True
    assert cxx_runtime.links_own_runtime(shutil.which("g++")) is False
    assert cxx_runtime.links_own_runtime(str(tmp_path / "no-such-g++")) is None


def test_a_compiler_that_links_its_own_runtime_is_replaced_even_where_cxx_names_it(tmp_path, monkeypatch):
    """A host may set CXX to such a compiler for everything it builds (a GPU host's image did): its
    packages could not load beside torch, so CXX does not protect it."""
    monkeypatch.delenv("CXX", raising=False)
    static = static_gxx(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")  # first on PATH, as on a host
    cxx, replaced = cxx_runtime.choose("g++")
    assert replaced == static and os.path.realpath(cxx) != os.path.realpath(static)
    assert cxx_runtime.links_own_runtime(cxx) is False
    monkeypatch.setenv("CXX", static)
    assert cxx_runtime.choose(static) == (cxx, static)
    monkeypatch.delenv("CXX")
    assert cxx_runtime.choose(cxx) == (cxx, None)  # a compiler that links libstdc++ dynamically is kept
