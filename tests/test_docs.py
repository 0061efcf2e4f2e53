"""The README and docs/ promise what code can check: the README's length and first two commands,
every relative link, the spec examples (valid, and the annotated one at the defaults), the pages
generated from the code, and the `sweeper recommend` examples on the committed H200 rows."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from sweeper import docs
from sweeper.spec.reference import missing_docs, sections
from sweeper.spec.resources import Resources
from sweeper.spec.sections import MeasureSpec
from sweeper.spec.sweep_spec import SweepSpec, parse_spec
from tests.helpers import REPO, run_cli

README = REPO / "README.md"
PAGES = sorted((REPO / "docs").glob("*.md"))
LINK_RE = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)\n```", text, re.S)


def test_readme_is_a_front_door_with_the_two_commands_first_and_ci_runs_the_tests():
    text = README.read_text()
    assert len(text.splitlines()) <= 250, "README.md over 250 lines: move the detail into docs/"
    first = "\n".join(text.splitlines()[:10])
    commands = _blocks(first, "bash")[0].splitlines()
    assert commands[0].endswith("sweeper run experiments/smoke.yaml")
    assert commands[1].endswith("pytest")
    assert commands[1] in (REPO / ".ci" / "run").read_text()


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _broken_links(page: Path) -> list[str]:
    broken = []
    for target in LINK_RE.findall(page.read_text()):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and resolved.suffix == ".md":
            headings = re.findall(r"^#+ (.*)$", resolved.read_text(), re.M)
            if anchor not in {_slug(h) for h in headings}:
                broken.append(f"{target} (no such heading)")
    return broken


@pytest.mark.parametrize("page", [README, *PAGES], ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page: Path):
    assert _broken_links(page) == [], f"{page.relative_to(REPO)}: broken links"


def test_a_broken_link_is_found(tmp_path: Path):
    (tmp_path / "a.md").write_text("# Top\n\n[ok](a.md#top) [gone](b.md) [bad anchor](a.md#nope) [web](https://x.org)\n")
    assert _broken_links(tmp_path / "a.md") == ["b.md (no such file)", "a.md#nope (no such heading)"]


def test_the_readme_spec_examples_are_valid_specs():
    spec_block, own_model = _blocks(README.read_text(), "yaml")[:2]
    spec = parse_spec(yaml.safe_load(spec_block), source="README")
    assert spec.measure.windows == MeasureSpec().windows
    mine = SweepSpec.model_validate({"name": "own", **yaml.safe_load(own_model)})  # its factory is a placeholder
    assert mine.models[0].factory == "mypkg.models:build" and mine.models[0].block == "MyBlock"


def test_the_annotated_spec_is_valid_and_shows_the_defaults():
    block = _blocks((REPO / "docs" / "writing-specs.md").read_text(), "yaml")[0]
    data = yaml.safe_load(block)
    SweepSpec.model_validate(data)
    for section, model in (("measure", MeasureSpec()), ("resources", Resources())):
        shown = data[section]
        assert shown == {k: getattr(model,
                                    k) for k in shown}, f"docs/writing-specs.md: {section} is not at the defaults"


def test_the_generated_reference_pages_are_current():
    assert docs.stale() == [], "run: python -m sweeper.docs"
    assert missing_docs(SweepSpec) == [], "every spec field needs a docstring under it"


def test_a_stale_or_missing_page_is_named_and_rewritten(tmp_path: Path, capsys):
    (tmp_path / "spec.md").write_text(docs.spec_page().replace("| `windows` | int (>= 5) | `10` |",
                                                               "| `windows` | int | `5` |"))
    assert docs.main(["--check", "--docs", str(tmp_path)]) == 1
    assert capsys.readouterr().err.count("is stale") == 2  # spec.md edited, results-schema.md missing
    assert docs.main(["--docs", str(tmp_path)]) == 0 and docs.stale(tmp_path) == []
    assert docs.main(["--check", "--docs", str(tmp_path / "nowhere")]) == 2


def test_the_spec_reference_has_every_field_with_its_type_default_and_doc():
    page = docs.spec_page()
    for section in sections(SweepSpec):
        assert f"## {section.model.__name__}\n" in page
        for name in section.model.model_fields:
            assert f"| `{name}` |" in page
    assert "| `windows` | int (>= 5) | `10` | Timed windows per arm;" in page
    assert '| `precision` | list["fp32" \\| "bf16"] | `["fp32"]` |' in page
    assert "| `lengths` | [FixedLengths](#fixedlengths) \\|" in page


def test_recommend_examples_are_what_recommend_prints_for_the_committed_rows(capsys):
    text = README.read_text() + "\n".join(p.read_text() for p in PAGES)
    blocks = re.findall(r"```\n\$ (sweeper recommend (?:[^\n]*\\\n)*[^\n]*)\n(.*?)\n```", text, re.S)
    assert len(blocks) >= 2, "the README and docs show recommend's output"
    for command, shown in blocks:
        args = command.replace("\\\n", " ").split()[1:]
        capsys.readouterr()
        run_cli(args)
        assert capsys.readouterr().out.strip() == shown.strip(), f"example out of date: {command}"
