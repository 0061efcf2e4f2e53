"""`recommend --warm-start` and `sweeper export` on hand-made rows: the warm start from the
artifact replaces the cold compile in the workload arithmetic; an export writes the module, the
artifact, its versions and a README; the module refuses an artifact built for another setup."""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest
import torch

from sweeper.analysis.recommend import Limits, recommend_all
from sweeper.deploy.export import ExportError, export
from sweeper.results.store import write_rows
from sweeper.run.artifacts import keep
from tests.helpers import run_cli

_CONTEXT = {"sweep_id": "s", "sweep_name": "s", "model": "bert-tiny", "task": "nlp", "batch_size": 8, "seq_len": 16,
            "phase": "infer", "precision": "fp32", "status": "ok", "backend": "inductor", "device_type": "cpu",
            "device_name": "test-cpu", "torch_version": torch.__version__, "matmul_precision": "high"}


def _rows(artifact_torch: str = torch.__version__) -> list[dict]:
    eager = {**_CONTEXT, "trial_id": "e", "mode": "eager", "scope": "whole", "throughput_items_s": 100.0,
             "eager_throughput_items_s": 100.0, "peak_mem_gib": 1.0, "accuracy_ok": True}
    compiled = {**_CONTEXT, "mode": "default", "dynamic": False, "eager_throughput_items_s": 100.0,
                "peak_mem_gib": 1.0, "accuracy_ok": True, "speedup_ci_low": 1.5, "torch_version": artifact_torch}
    whole = {**compiled, "trial_id": "w", "scope": "whole", "compiled_regions": 1, "throughput_items_s": 210.0,
             "speedup_vs_eager": 2.1, "speedup_ci_high": 2.3, "compile_s": 100.0, "warm_megacache_s": 2.0,
             "megacache_load_s": 0.1, "megacache_bytes": 5}
    regional = {**compiled, "trial_id": "r", "scope": "regional", "compiled_regions": 2,
                "region_classes": "BertLayer", "throughput_items_s": 200.0, "speedup_vs_eager": 2.0,
                "speedup_ci_high": 2.2, "compile_s": 20.0, "warm_megacache_s": 1.5, "megacache_load_s": 0.1,
                "megacache_bytes": 5}
    return [eager, whole, regional]


def _results(tmp_path, rows):
    for r in rows:
        if r["mode"] != "eager":
            keep(tmp_path, r["trial_id"], {**r, "_megacache_b64": "YXJ0aWZhY3Q="})  # b"artifact"
            r["megacache_file"] = f"megacache/{r['trial_id']}.bin"
    write_rows(tmp_path / "results.parquet", rows)
    return tmp_path


def test_warm_start_replaces_the_cold_compile_in_the_workload_arithmetic(tmp_path):
    import pandas as pd

    df = pd.DataFrame(_rows())
    cold = recommend_all(df, "bert-tiny", Limits(iterations=1000))[0]  # 8,000 items
    warm = recommend_all(df, "bert-tiny", Limits(iterations=1000, warm_start=True))[0]
    assert cold.best.setting.endswith("regional, batch 8, seq 16") and cold.best.compile_s == 20.0
    assert "block.compile(" in cold.best.compile_call and "BertLayer" in cold.best.compile_call
    assert warm.best.trial_id == "w" and warm.best.compile_s == pytest.approx(2.1)
    assert warm.best.compile_what == "warm start from the artifact"


def test_export_writes_the_module_artifact_versions_and_readme(tmp_path, capsys):
    results = _results(tmp_path / "res", _rows())
    out = tmp_path / "out"
    assert run_cli(["export", str(results), "--model", "bert-tiny", "--iterations", "1000", "-o", str(out)]) == 0
    assert "megacache.bin" in capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "megacache.bin", "sweeper_compiled.py",
                                                     "versions.json"]
    assert (out / "megacache.bin").read_bytes() == b"artifact"
    versions = json.loads((out / "versions.json").read_text())
    assert versions["trial_id"] == "r" and versions["setting"]["scope"] == "regional"
    assert versions["compile_kwargs"] == {"mode": "default", "dynamic": False}
    assert versions["setting"]["batch_size"] == 8 and versions["setting"]["compiled_regions"] == 2
    module = _load(out)
    assert (module.SCOPE, module.BLOCKS) == ("regional", ("BertLayer",))
    assert "block.compile(" in (out / "README.md").read_text()


def test_the_exported_module_refuses_an_artifact_built_for_another_torch(tmp_path):
    results = _results(tmp_path / "res", _rows(artifact_torch="0.0.1"))
    export([str(results)], "bert-tiny", tmp_path / "out", Limits(iterations=1000))
    module = _load(tmp_path / "out")
    with pytest.raises(module.ArtifactMismatch) as err:
        module.compile_model(torch.nn.Linear(2, 2))
    text = str(err.value)
    assert "\n" not in text and "torch 0.0.1 (here: " in text and "use_artifact=False" in text


def test_export_refuses_when_eager_wins_or_the_artifact_is_missing(tmp_path):
    rows = _rows()
    results = _results(tmp_path / "a", rows)
    (results / "megacache" / "r.bin").unlink()
    with pytest.raises(ExportError, match="not beside the results"):
        export([str(results)], "bert-tiny", tmp_path / "out", Limits(iterations=1000))
    slow = [{**r, "throughput_items_s": 50.0, "speedup_vs_eager": 0.5, "speedup_ci_low": 0.4, "speedup_ci_high": 0.6}
            if r["mode"] != "eager" else r for r in _rows()]
    with pytest.raises(ExportError, match="not to compile"):
        export([str(_results(tmp_path / "b", slow))], "bert-tiny", tmp_path / "out2")


def _load(directory):
    spec = importlib.util.spec_from_file_location(f"exported_{id(directory)}", directory / "sweeper_compiled.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_report_shows_cold_compile_against_throughput_by_scope():
    import pandas as pd

    from sweeper.analysis.frames import prepare
    from sweeper.report.page import build_html
    from sweeper.report.scope import compile_vs_throughput, scope_rows

    page = build_html(pd.DataFrame(_rows()))
    assert "Compile scope: whole model vs regional" in page
    assert ">5×<" in page and ">0.952×<" in page  # cold compile 100 s vs 20 s; 200 vs 210 items/s
    assert ">98%<" in page and ">92.5%<" in page  # of the cold compile, a warm start from the artifact saves
    figure = compile_vs_throughput(scope_rows(prepare(pd.DataFrame(_rows()))), "t")
    assert [t.get("name") for t in figure["data"]] == [None, "regional", "whole"] and figure["expected"] == 2


def test_a_cpu_export_is_built_for_its_intra_op_thread_count(tmp_path):
    """Inductor's CPU code, and its cache key, depend on torch's intra-op thread count: a CPU export
    records the count its trial ran with, and its module refuses another, saying how to match it."""
    from sweeper import envinfo

    here = {"device_name": envinfo._cpu_name(), "triton_version": envinfo.package_version("triton", "pytorch-triton"),
            "cuda_version": torch.version.cuda}
    other = torch.get_num_threads() + 1
    rows = [{**r, **here, "torch_threads": other} for r in _rows()]
    export([str(_results(tmp_path / "res", rows))], "bert-tiny", tmp_path / "out", Limits(iterations=1000))
    assert json.loads((tmp_path / "out" / "versions.json").read_text())["built_for"]["torch_threads"] == other
    assert f"torch.set_num_threads({other})" in (tmp_path / "out" / "README.md").read_text()
    module = _load(tmp_path / "out")
    with pytest.raises(module.ArtifactMismatch) as err:
        module.check()
    assert str(err.value).startswith(f"megacache.bin was built for intra-op threads (CPU code is built for the "
                                     f"count) {other} (here: {torch.get_num_threads()}): call "
                                     f"torch.set_num_threads({other}) first, compile cold")
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(other)
        module.check()  # the same count: nothing else differs
    finally:
        torch.set_num_threads(before)
