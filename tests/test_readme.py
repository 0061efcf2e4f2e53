"""The README's promises that code can check: its schema table, its first two commands, and the
`sweeper recommend` examples it shows on the committed H200 rows."""

from __future__ import annotations

import re

from sweeper.results.schema import schema_markdown

from conftest import REPO, run_cli


def _readme() -> str:
    return (REPO / "README.md").read_text()


def test_schema_table_matches_the_code():
    section = re.search(r"<!-- schema:start -->\n(.*?)\n<!-- schema:end -->", _readme(), re.S)
    assert section, "README lacks the schema markers"
    assert section.group(1) == schema_markdown(), "run: python tests/test_readme.py to refresh it"


def test_first_lines_are_the_main_job_and_the_tests_and_ci_runs_the_latter():
    commands = re.search(r"```bash\n(.*?)\n```", _readme(), re.S).group(1).splitlines()
    assert commands[0].endswith("sweeper run experiments/smoke.yaml")
    assert commands[1].endswith("pytest")
    assert commands[1] in (REPO / ".ci" / "run").read_text()


def test_recommend_examples_are_what_recommend_prints_for_the_committed_rows(capsys):
    blocks = re.findall(r"```\n\$ (sweeper recommend (?:[^\n]*\\\n)*[^\n]*)\n(.*?)\n```", _readme(), re.S)
    assert len(blocks) >= 2, "the README shows recommend's output"
    for command, shown in blocks:
        args = command.replace("\\\n", " ").split()[1:]
        capsys.readouterr()
        run_cli(args)
        assert capsys.readouterr().out.strip() == shown.strip(), f"README example out of date: {command}"


if __name__ == "__main__":  # refresh the README's schema table
    path = REPO / "README.md"
    text = re.sub(r"(<!-- schema:start -->\n).*?(<!-- schema:end -->)",
                  lambda m: m.group(1) + schema_markdown() + "\n" + m.group(2), path.read_text(), flags=re.S)
    path.write_text(text)
