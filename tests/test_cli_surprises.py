"""The CLI does what a new user expects: an unwritable results directory is refused before Ray."""

from __future__ import annotations

from conftest import run_cli, tiny_spec, write_spec


def test_unwritable_results_directory_fails_with_exit_2_before_ray(tmp_path, capsys, no_ray) -> None:
    spec = write_spec(tmp_path, tiny_spec())
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    assert run_cli(["run", str(spec), "--results", str(blocker / "results")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("sweeper: error: ") and err.count("\n") == 1
    assert "cannot write results there" in err and "--results" in err
