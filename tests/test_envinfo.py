"""Rows record the versions that decide compiled performance besides torch, without the
measuring process importing Ray (or transformers, for a model that does not need it)."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys

from sweeper import envinfo


def test_device_info_names_triton_transformers_and_ray_versions():
    info = envinfo.device_info("cpu")
    assert info["ray_version"] == importlib.metadata.version("ray")
    assert info["transformers_version"] == importlib.metadata.version("transformers")
    assert info["triton_version"] == envinfo.package_version(*envinfo.TRITON_DISTRIBUTIONS)
    assert envinfo.package_version("no-such-distribution-here") is None


def test_reading_versions_imports_neither_ray_nor_transformers():
    script = ("import json, sys; from sweeper import envinfo; info = envinfo.device_info('cpu'); "
              "print(json.dumps([info['ray_version'], [m for m in ('ray', 'transformers') if m in sys.modules]]))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    version, loaded = json.loads(out.strip().splitlines()[-1])
    assert version == importlib.metadata.version("ray") and loaded == []
