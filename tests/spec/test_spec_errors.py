"""Bad input is refused in one line naming the field and what is allowed: exit code 2, no
traceback, no Ray started, nothing written. Through the real CLI (`cli.main` in this process
for the many cases, `python -m sweeper` in a subprocess for a few)."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from sweeper.cli.app import main
from sweeper.results.store import write_rows
from tests.helpers import REPO, tiny_spec, write_spec


def _set(path: str, value: Any):
    """A change to the tiny spec: set `a.b.c` (list indexes as numbers); value DELETE removes it."""
    def change(spec: dict) -> dict:
        spec = copy.deepcopy(spec)
        *parents, last = path.split(".")
        node = spec
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node.setdefault(key, {})
        if value is DELETE:
            del node[last]
        elif isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value
        return spec
    return change


DELETE = object()
TENSOR_INPUT = {"kind": "tensor", "shape": [8]}

# id -> (change to the tiny spec, or the raw file text; words the one-line message must contain)
CASES: dict[str, tuple[Any, list[str]]] = {
    "unknown top-level key": (_set("nmae", "x"), ["nmae: unknown key", "allowed:", "name", "models"]),
    "unknown axes key": (_set("axes.modes", ["eager"]), ["axes.modes: unknown key", "mode", "batch_size"]),
    "unknown measure key": (_set("measure.warmup", 3), ["measure.warmup: unknown key", "warmup_iters"]),
    "unknown resources key": (_set("resources.gpus", 1), ["resources.gpus: unknown key", "gpus_per_trial"]),
    "unknown model key": (_set("models.0.facotry", "a:b"), ["models.0.facotry: unknown key", "factory"]),
    "unknown input key": (lambda s: {**s, "models": [{"name": "m", "factory": "faulty_models:make_ok",
                                                      "input": {**TENSOR_INPUT, "dims": 3}}]},
                          ["models.0.input.dims: unknown key", "shape"]),
    "missing name": (_set("name", DELETE), ["name: Field required"]),
    "missing models": (_set("models", DELETE), ["models: Field required"]),
    "empty models": (_set("models", []), ["models: must list at least one model"]),
    "models not a list": (_set("models", "bert-tiny"), ["models: ", "valid list", "bert-tiny"]),
    "unknown model": (_set("models.0.name", "bert-huge"), ["unknown model 'bert-huge'", "valid:", "bert-tiny"]),
    "duplicate models": (_set("models", [{"name": "bert-tiny"}, {"name": "bert-tiny"}]),
                         ["models: duplicate model names bert-tiny"]),
    "bad model name": (_set("models.0.name", "my model!"), ["'my model!' is not a valid model name"]),
    "unknown mode": (_set("axes.mode", ["fast"]), ["axes.mode.0:", "'eager'", "'max-autotune'", "'fast'"]),
    "empty mode axis": (_set("axes.mode", []), ["axes.mode: must list at least one value"]),
    "duplicate modes": (_set("axes.mode", ["eager", "eager"]), ["axes.mode: duplicate values"]),
    "zero batch size": (_set("axes.batch_size", [0]), ["axes.batch_size.0:", "greater than 0", "got 0"]),
    "negative batch size": (_set("axes.batch_size", [-4]), ["axes.batch_size.0:", "greater than 0", "got -4"]),
    "batch size not a number": (_set("axes.batch_size", ["big"]), ["axes.batch_size.0:", "integer", "'big'"]),
    "fractional batch size": (_set("axes.batch_size", [2.5]), ["axes.batch_size.0:", "integer"]),
    "batch size not a list": (_set("axes.batch_size", 8), ["axes.batch_size:", "valid list", "got 8"]),
    "empty batch axis": (_set("axes.batch_size", []), ["axes.batch_size: must list at least one value"]),
    "bad dynamic": (_set("axes.dynamic", ["maybe"]), ["axes.dynamic.0:", "boolean", "'maybe'"]),
    "unknown phase": (_set("axes.phase", ["eval"]), ["axes.phase.0:", "'infer'", "'train'", "'eval'"]),
    "unknown precision": (_set("axes.precision", ["fp16"]), ["axes.precision.0:", "'fp32'", "'bf16'"]),
    "zero seq_len": (_set("axes.seq_len", [0]), ["axes.seq_len.0:", "greater than 0"]),
    "unknown backend": (_set("measure.backend", "tvm"), ["measure.backend:", "'inductor'", "'aot_eager'", "'tvm'"]),
    "too few windows": (_set("measure.windows", 3), ["measure.windows:", "greater than or equal to 5", "got 3"]),
    "zero timeout": (_set("measure.trial_timeout_s", 0), ["measure.trial_timeout_s:", "greater than 0"]),
    "timeout not a number": (_set("measure.trial_timeout_s", "soon"), ["measure.trial_timeout_s:", "'soon'"]),
    "bad matmul precision": (_set("measure.matmul_precision", "low"), ["measure.matmul_precision:", "'highest'"]),
    "zero accuracy tolerance": (_set("measure.accuracy_tol", 0), ["measure.accuracy_tol:", "greater than 0"]),
    "measure not a mapping": (_set("measure", 5), ["measure:", "MeasureSpec"]),
    "unknown device": (_set("resources.device", "tpu"), ["resources.device:", "'auto'", "'cuda'", "'cpu'"]),
    "too many retries": (_set("resources.max_retries", 9), ["resources.max_retries:", "less than or equal to 5"]),
    "negative retries": (_set("resources.max_retries", -1), ["resources.max_retries:", "greater than or equal to 0"]),
    "zero gpus per trial": (_set("resources.gpus_per_trial", 0), ["resources.gpus_per_trial:", "greater than 0"]),
    "fractional gpus above one": (lambda s: _set("resources.device", "cuda")(_set("resources.gpus_per_trial", 1.5)(s)),
                                  ["resources.gpus_per_trial:", "whole number", "1.5"]),
    "gpus for a cpu sweep": (_set("resources.gpus_per_trial", 2), ["resources.gpus_per_trial:", "device 'cpu'"]),
    "zero concurrency": (_set("resources.max_concurrent_trials", 0), ["resources.max_concurrent_trials:"]),
    "bad sweep name": (_set("name", "my sweep"), ["'my sweep' is not a valid sweep name"]),
    "name not a string": (_set("name", 123), ["name:", "string", "got 123"]),
    "factory not module:callable": (_set("models.0", {"name": "m", "factory": "faulty_models.make_ok"}),
                                    ["models.0.factory:", "'package.module:callable'"]),
    "factory module missing": (_set("models.0", {"name": "m", "factory": "no_such_module_xyz:make",
                                                 "input": TENSOR_INPUT}),
                               ["models.m.factory: cannot import 'no_such_module_xyz'"]),
    "factory callable missing": (_set("models.0", {"name": "m", "factory": "faulty_models:make_nothing",
                                                   "input": TENSOR_INPUT}),
                                 ["models.m.factory: module 'faulty_models' has no callable 'make_nothing'"]),
    "input for a zoo model": (_set("models.0.input", TENSOR_INPUT), ["'input' is only for factory models"]),
    "tensor input without shape": (_set("models.0", {"name": "m", "factory": "faulty_models:make_ok",
                                                     "input": {"kind": "tensor"}}), ["kind 'tensor' needs 'shape'"]),
    "unknown input kind": (_set("models.0", {"name": "m", "factory": "faulty_models:make_ok",
                                             "input": {"kind": "audio"}}),
                           ["models.0.input.kind:", "'image'", "'tokens'", "'tensor'", "'audio'"]),
    "kwargs not a mapping": (_set("models.0.kwargs", [1, 2]), ["models.0.kwargs:", "dictionary"]),
    "results_dir not a string": (_set("results_dir", 5), ["results_dir:", "string"]),
    "no trial survives (backend)": (lambda s: _set("axes.mode", ["max-autotune"])(s),
                                    ["no trials to run", "needs the inductor backend"]),
    "no trial survives (seq_len)": (_set("axes.seq_len", [4096]), ["no trials to run", "exceeds bert-tiny's 512"]),
    "top level is a list": ("- name: x\n", ["top level must be a mapping"]),
    "empty file": ("", ["top level must be a mapping"]),
    "invalid YAML": ("name: t\nmodels: [bert-tiny\n", ["invalid YAML at line"]),
    "unclosed bracket": ("name: t\nmodels: [{name: bert-tiny}\naxes: {mode: [eager]}\n",
                         ["invalid YAML at line 2, column 9: '[' opened here is never closed", "at line 3)"]),
    "unclosed quote": ('name: "t\nmodels: [{name: bert-tiny}]\n',
                       ["invalid YAML at line 1, column 7: the quote opened here is never closed"]),
    "tab indentation": ("name: t\nmodels:\n\t- name: bert-tiny\n", ["invalid YAML at line 3"]),
    "duplicate YAML key": ("name: t\nmodels: [{name: bert-tiny}]\naxes: {mode: [eager]}\naxes: {mode: [default]}\n",
                           ["duplicate key 'axes'", "line 4"]),
    "python object tag": ("name: !!python/object/apply:os.system ['echo pwned']\nmodels: []\n",
                          ["invalid YAML", "python/object/apply:os.system"]),
    "binary file": (b"\xff\xfe\x00\x01garbage", ["not a text file"]),
}


def _write(tmp_path: Path, change: Any) -> Path:
    path = tmp_path / "bad.yaml"
    if isinstance(change, bytes):
        path.write_bytes(change)
    elif isinstance(change, str):
        path.write_text(change)
    else:
        path.write_text(yaml.safe_dump(change(tiny_spec("bad")), sort_keys=False))
    return path


def _one_line_error(capsys) -> str:
    out, err = capsys.readouterr()
    assert err.startswith("sweeper: error: "), err
    assert err.count("\n") == 1 and err.endswith("\n"), err
    assert "Traceback" not in err and out == ""
    return err


def test_at_least_thirty_different_refusals(tmp_path, capsys, no_ray):
    """The table covers at least thirty different messages (an empty file and a top-level list, two
    inputs with one mistake, share theirs)."""
    messages = set()
    for case, (change, _) in CASES.items():
        assert main(["validate", str(_write(tmp_path, change))]) == 2, case
        messages.add(_one_line_error(capsys))
    assert len(messages) >= 30, len(messages)


@pytest.mark.parametrize("case", list(CASES))
def test_bad_spec_refused_by_run_and_validate(case, tmp_path, monkeypatch, capsys, no_ray):
    change, words = CASES[case]
    spec = _write(tmp_path, change)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)  # the default results/<name> would land here
    assert main(["run", str(spec), "--results", str(tmp_path / "out")]) == 2
    err = _one_line_error(capsys)
    for word in words:
        assert word in err, f"{word!r} not in {err!r}"
    assert not (tmp_path / "out").exists() and list(work.iterdir()) == []
    assert main(["validate", str(spec)]) == 2
    assert _one_line_error(capsys) == err


def test_missing_spec_file(tmp_path, capsys, no_ray):
    assert main(["run", str(tmp_path / "nope.yaml"), "--results", str(tmp_path / "out")]) == 2
    assert "nope.yaml: no such spec file" in _one_line_error(capsys)
    assert not (tmp_path / "out").exists()


def test_results_path_is_a_file(tmp_path, capsys, no_ray):
    spec = write_spec(tmp_path, tiny_spec("t"))
    (tmp_path / "taken").write_text("x")
    assert main(["run", str(spec), "--results", str(tmp_path / "taken")]) == 2
    assert "taken: not a directory" in _one_line_error(capsys)


def test_multiline_factory_error_is_one_line(tmp_path, capsys, monkeypatch, no_ray):
    (tmp_path / "broken_factory.py").write_text("def make(:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = write_spec(tmp_path, tiny_spec("t", models=[{"name": "m", "factory": "broken_factory:make",
                                                         "input": TENSOR_INPUT}]))
    assert main(["run", str(spec), "--results", str(tmp_path / "out")]) == 2
    assert "cannot import 'broken_factory': SyntaxError" in _one_line_error(capsys)


@pytest.mark.parametrize("case", ["unknown mode", "zero batch size", "invalid YAML", "unknown model"])
def test_real_entry_point(case, tmp_path):
    spec = _write(tmp_path, CASES[case][0])
    proc = subprocess.run([sys.executable, "-m", "sweeper", "run", str(spec), "--results", str(tmp_path / "out")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**_env(), "PYTHONPATH": f"{REPO}:{REPO / 'tests'}"})
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("sweeper: error: ") and proc.stderr.count("\n") == 1, proc.stderr
    assert all(word in proc.stderr for word in CASES[case][1]), proc.stderr
    assert proc.stdout == "" and not (tmp_path / "out").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.yaml"]


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}


# ---- report / recommend on bad inputs ----------------------------------------------------

def _bad_results(tmp_path: Path, kind: str) -> Path:
    good = tmp_path / "good.parquet"
    from sweeper.results import synthetic

    write_rows(good, synthetic.make_rows(5, seed=1, models=["resnet50"]))
    if kind == "missing":
        return tmp_path / "nowhere.parquet"
    if kind == "text":
        (tmp_path / "notes.parquet").write_text("model,status\nx,ok\n")
        return tmp_path / "notes.parquet"
    if kind == "empty file":
        (tmp_path / "empty.parquet").write_bytes(b"")
        return tmp_path / "empty.parquet"
    if kind == "truncated":
        data = good.read_bytes()
        (tmp_path / "cut.parquet").write_bytes(data[: len(data) // 2])
        return tmp_path / "cut.parquet"
    if kind == "empty dir":
        (tmp_path / "nothing").mkdir()
        return tmp_path / "nothing"
    if kind == "foreign parquet":
        import pandas as pd

        pd.DataFrame({"a": [1, 2]}).to_parquet(tmp_path / "foreign.parquet")
        return tmp_path / "foreign.parquet"
    if kind == "dir with a corrupt file":  # never silently skipped
        (tmp_path / "mixed").mkdir()
        good.rename(tmp_path / "mixed" / "results.parquet")
        (tmp_path / "mixed" / "old.parquet").write_bytes(b"PAR1 not really")
        return tmp_path / "mixed"
    raise AssertionError(kind)


BAD_RESULTS = {
    "missing": "no such file or directory",
    "text": "not a readable Parquet file",
    "empty file": "not a readable Parquet file",
    "truncated": "not a readable Parquet file",
    "empty dir": "no .parquet files in this directory",
    "foreign parquet": "not a sweeper results file",
    "dir with a corrupt file": "old.parquet: not a readable Parquet file",
}


@pytest.mark.parametrize("kind", list(BAD_RESULTS))
def test_report_and_recommend_refuse_bad_results(kind, tmp_path, capsys):
    bad = _bad_results(tmp_path, kind)
    for argv in (["report", str(bad), "-o", str(tmp_path / "r.html")], ["recommend", str(bad), "--model", "resnet50"]):
        assert main(argv) == 2
        err = _one_line_error(capsys)
        assert BAD_RESULTS[kind] in err and str(bad.name) in err, err
    assert not (tmp_path / "r.html").exists()


def test_report_through_real_entry_point(tmp_path):
    bad = _bad_results(tmp_path, "truncated")
    proc = subprocess.run([sys.executable, "-m", "sweeper", "report", str(bad), "-o", str(tmp_path / "r.html")],
                          capture_output=True, text=True, timeout=120, env={**_env(), "PYTHONPATH": str(REPO)})
    assert proc.returncode == 2 and proc.stderr.startswith("sweeper: error: ")
    assert proc.stderr.count("\n") == 1 and "not a readable Parquet file" in proc.stderr
