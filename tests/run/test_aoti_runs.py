"""Where an aoti load process died, read back from the mark it leaves beside the package."""

from __future__ import annotations

import json

from sweeper.measure import aoti_stage_file
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
