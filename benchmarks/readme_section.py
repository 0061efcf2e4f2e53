"""A generated section of the README: the text between `<!-- NAME:start -->` and `<!-- NAME:end -->`,
made from committed rows by a benchmark script (`--write`) and checked against them by a test."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def markers(name: str) -> tuple[str, str]:
    return f"<!-- {name}:start -->", f"<!-- {name}:end -->"


def extract(readme: str, name: str) -> str | None:
    """The section's body, or None when the README lacks its markers."""
    start, end = markers(name)
    found = re.search(re.escape(start) + r"\n(.*?)\n" + re.escape(end), readme, re.S)
    return found.group(1) if found else None


def replace(readme: str, name: str, body: str) -> str:
    """The README with the section's body replaced; a ValueError naming the markers if it has none."""
    start, end = markers(name)
    if extract(readme, name) is None:
        raise ValueError(f"README lacks the {start} ... {end} markers")
    return re.sub(re.escape(start) + r"\n.*?\n" + re.escape(end), lambda _: f"{start}\n{body}\n{end}", readme,
                  flags=re.S)


def write(name: str, body: str, path: Path = README) -> None:
    path.write_text(replace(path.read_text(), name, body))
