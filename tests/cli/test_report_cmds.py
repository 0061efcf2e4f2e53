"""`sweeper report` / `sweeper recommend` through argparse: outputs, exit codes, one-line errors."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from sweeper.cli import results_cmds as report_cmds
from sweeper.results import synthetic
from sweeper.results.store import read_results, write_rows


def run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="sweeper")
    report_cmds.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("results")
    write_rows(root / "a" / "results.parquet", synthetic.make_rows(200, seed=1, models=["resnet50"]))
    write_rows(root / "b" / "results.parquet", synthetic.make_rows(200, seed=2, models=["resnet50"]))
    (root / "notes.parquet").write_text("not parquet")
    return root


def test_report_from_several_sweeps_with_comparison(results: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "r.html"
    assert run(["report", str(results / "a"), str(results / "b" / "results.parquet"), "-o", str(out),
                "--compare", str(results / "b"), "--title", "T"]) == 0
    assert out.exists() and "Comparison with the base results" in out.read_text()
    assert capsys.readouterr().out.startswith(f"report: {out}")


@pytest.mark.parametrize(("paths", "message"), [
    (["missing-dir"], "missing-dir: no such file or directory"),
    (["notes.parquet"], "not a readable Parquet file"),
])
def test_bad_inputs_are_one_line_and_exit_2(results: Path, tmp_path: Path, capsys, paths, message) -> None:
    full = [str(results / p) for p in paths]
    for cmd in (["report", *full, "-o", str(tmp_path / "r.html")], ["recommend", *full, "--model", "x"]):
        assert run(cmd) == 2
        err = capsys.readouterr().err
        assert err.startswith("sweeper: error: ") and message in err and err.count("\n") == 1


def test_recommend_unknown_model_lists_valid_ones(results: Path, capsys) -> None:
    assert run(["recommend", str(results / "a"), "--model", "vit"]) == 2
    assert capsys.readouterr().err == "sweeper: error: unknown model 'vit'; models in these results: resnet50\n"


def test_recommend_text_and_json(results: Path, capsys) -> None:
    base = ["recommend", str(results / "a"), "--model", "resnet50", "--phase", "infer", "--precision", "fp32"]
    assert run([*base, "--iterations", "100000", "--max-memory-gib", "8"]) == 0
    text = capsys.readouterr().out
    assert "Recommendation: " in text and "limits: peak memory <= 8 GiB" in text
    assert run([*base, "--json", "--max-compile-s", "60"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["constraints"]["max_compile_s"] == 60 and data["best"]["compile_s"] <= 60
    assert run([*base, "--max-memory-gib", "0.001"]) == 1  # an answer, but no setting fits
    assert "No setting meets the constraints" in capsys.readouterr().out
    assert run([*base, "--iterations", "0"]) == 2


def test_without_filters_every_context_is_answered(results: Path, capsys) -> None:
    assert run(["recommend", str(results / "a"), "--model", "resnet50"]) == 0
    lines = capsys.readouterr().out.splitlines()
    contexts = [line for line in lines[1:] if line.startswith("resnet50 ")]
    assert lines[0].split()[:3] == ["model", "context", "recommendation"]
    measured = read_results([results / "a"]).groupby(["phase", "precision"]).ngroups
    assert measured >= 3 and len(contexts) == measured
    assert len({tuple(c.split()[1:4:2]) for c in contexts}) == measured  # phase, precision
    assert run(["recommend", str(results / "a"), "--json"]) == 0
    answers = json.loads(capsys.readouterr().out)
    assert isinstance(answers, list) and len(answers) == measured
    for a in answers:
        best = a["best"]
        assert best["dynamic"] in (None, True, False)  # a JSON boolean or null, never "False"
        assert isinstance(best["throughput_items_s"], float) and isinstance(best["batch_size"], int)
        assert isinstance(best["speedup_established"], bool)
        assert a["constraints"]["iterations"] is None


def test_choices_are_listed_and_global_flags_follow_the_subcommand(results: Path, capsys) -> None:
    from sweeper.cli.app import build_parser, main

    with pytest.raises(SystemExit):
        build_parser().parse_args(["recommend", "--help"])
    help_text = capsys.readouterr().out
    assert "--phase {infer,train,generate}" in help_text and "--precision {fp32,bf16}" in help_text
    args = build_parser().parse_args(["recommend", str(results / "a"), "-v"])
    assert args.verbose is True
    assert build_parser().parse_args(["-v", "models"]).verbose is True
    assert build_parser().parse_args(["models"]).verbose is False
    assert main(["recommend", str(results / "a"), "--model", "resnet50", "--phase", "infer",
                 "--precision", "fp32", "-v"]) == 0
    assert "Recommendation: " in capsys.readouterr().out


def test_report_modules_import_neither_torch_nor_ray() -> None:
    code = ("import sys; import sweeper.report.page, sweeper.analysis.pareto, sweeper.analysis.recommend, "
            "sweeper.analysis.compare, sweeper.cli.results_cmds; "
            "bad = [m for m in ('torch', 'ray') if m in sys.modules]; "
            "print(bad); sys.exit(1 if bad else 0)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
