"""A generated section of a docs page: the text between `<!-- NAME:start -->` and `<!-- NAME:end -->`,
made from committed rows by a benchmark script (`--write`) and checked against them by a test."""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent / "docs"


def markers(name: str) -> tuple[str, str]:
    return f"<!-- {name}:start -->", f"<!-- {name}:end -->"


def extract(page: str, name: str) -> str | None:
    """The section's body, or None when the page lacks its markers."""
    start, end = markers(name)
    found = re.search(re.escape(start) + r"\n(.*?)\n" + re.escape(end), page, re.S)
    return found.group(1) if found else None


def replace(page: str, name: str, body: str) -> str:
    """The page with the section's body replaced; a ValueError naming the markers if it has none."""
    start, end = markers(name)
    if extract(page, name) is None:
        raise ValueError(f"the page lacks the {start} ... {end} markers")
    return re.sub(re.escape(start) + r"\n.*?\n" + re.escape(end), lambda _: f"{start}\n{body}\n{end}", page,
                  flags=re.S)


def write(name: str, body: str, path: Path) -> None:
    path.write_text(replace(path.read_text(), name, body))
