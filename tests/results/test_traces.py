"""Compile traces: `measure.trace: true` keeps each compiled trial's TORCH_TRACE log (a real
aot_eager compile on CPU), the row says its size, the report links it and `sweeper trace` turns
it into tlparse's HTML; ids of specs that do not trace stay as they were."""

from __future__ import annotations

import base64
import gzip
import re
import sys

import pandas as pd
import pytest

from sweeper.spec.sweep_spec import parse_spec
from sweeper.spec.trials import expand
from tests.helpers import run_cli, tiny_spec, write_spec

SPEC = tiny_spec("traced", models=[{"name": "m", "factory": "faulty_models:make_ok",
                                     "input": {"kind": "tensor", "shape": [8]}}],
                 axes={"mode": ["eager", "default"], "batch_size": [2]}, measure={"trace": True})


def test_trace_off_keeps_trial_ids_and_trace_on_gives_compiled_trials_their_own() -> None:
    plain = {t.mode: t.trial_id for t in expand(parse_spec(tiny_spec("ids")))[0]}
    off = {t.mode: t.trial_id for t in expand(parse_spec(tiny_spec("ids", measure={"trace": False})))[0]}
    on = {t.mode: t.trial_id for t in expand(parse_spec(tiny_spec("ids", measure={"trace": True})))[0]}
    assert plain == off
    assert plain["default"] != on["default"]
    assert re.fullmatch(r"[0-9a-f]{12}", plain["default"])


def test_trace_of_an_unknown_trial_or_without_tlparse_is_one_line(tmp_path, capsys, monkeypatch) -> None:
    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / "abc123456789.log.gz").write_bytes(gzip.compress(b"x"))
    assert run_cli(["trace", str(tmp_path), "fff"]) == 2
    assert "no trace of trial 'fff' (1 traced trials: abc123456789)" in capsys.readouterr().err
    monkeypatch.setenv("PATH", str(tmp_path))  # a virtual environment not activated: tlparse beside its Python
    assert run_cli(["trace", str(tmp_path), "abc", "-o", str(tmp_path / "html")]) == 0  # found, and run
    assert (tmp_path / "html" / "index.html").exists()
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))  # and a Python without it
    assert run_cli(["trace", str(tmp_path), "abc"]) == 2
    err = capsys.readouterr().err
    assert err == ("sweeper: error: sweeper trace needs tlparse (on PATH or beside this Python): "
                   "pip install tlparse (or sweeper's trace extra)\n")


@pytest.mark.slow
def test_traced_sweep_keeps_each_compiled_trace_and_renders_it(ray_local, tmp_path, capsys) -> None:
    out = tmp_path / "out"
    assert run_cli(["run", str(write_spec(tmp_path, SPEC)), "--results", str(out)]) == 0
    rows = pd.read_parquet(out / "results.parquet").set_index("mode")
    assert pd.isna(rows.loc["eager", "trace_bytes"])
    tid = rows.loc["default", "trial_id"]
    trace = out / "traces" / f"{tid}.log.gz"
    assert sorted(p.name for p in (out / "traces").iterdir()) == [trace.name]
    assert rows.loc["default", "trace_bytes"] == trace.stat().st_size
    piece = base64.b64encode(trace.read_bytes()[:3000])  # the trace went to the driver's node as a file,
    assert not [p for p in (out / "tune").rglob("*") if p.is_file() and piece in p.read_bytes()]  # not a result
    log = gzip.decompress(trace.read_bytes()).decode()
    assert '] {"dynamo_start"' in log and '] {"dynamo_output_graph"' in log  # a real compile, traced
    assert f'href="traces/{tid}.log.gz"' in (out / "report.html").read_text()
    capsys.readouterr()
    assert run_cli(["trace", str(out), tid[:6], "-o", str(tmp_path / "html")]) == 0
    assert capsys.readouterr().out == f"trace: {tmp_path / 'html' / 'index.html'}\n"
    index = (tmp_path / "html" / "index.html").read_text()
    assert "Stack trie" in index and "dynamo_output_graph" in index, index[:2000]
