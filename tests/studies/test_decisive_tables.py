"""The decisive study's drift-between-processes tables, regenerated from its committed rows."""

from __future__ import annotations

import pytest

from studies.decisive import drift_between
from tests.helpers import REPO

ROOT = REPO / "studies/decisive/results"


@pytest.fixture(scope="module")
def tables() -> dict[str, str]:
    df = drift_between.repeats(ROOT)
    return {"spread": drift_between.spread_table(df), "corrected": drift_between.corrected_table(df),
            "coverage": drift_between.coverage_table(df), "sweeps": drift_between.sweeps_table(ROOT)}


def test_the_study_page_matches_the_committed_rows(tables) -> None:
    page = (ROOT / "README.md").read_text()
    for name, part in tables.items():
        assert part in page, f"{name}: run python -m studies.decisive.drift_between, update the study's README"


def test_drift_between_processes_no_longer_blocks_but_other_causes_do(tables) -> None:
    table = tables["sweeps"].splitlines()
    assert table[-1] == "| **all** | **172** | **50** | **45** | **5** |"
    blocked = [line for line in table[2:-1] if not line.endswith("| 0 |")]
    assert [line.split(" | ")[0].lstrip("| ") for line in blocked] == [
        "consensus/shared", "placement/hop_gate/smoke", "placement/lease1/r1", "ungated/r2"]
