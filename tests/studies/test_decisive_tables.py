"""The decisive study's drift-between-processes tables, regenerated from its committed rows."""

from __future__ import annotations

from studies.decisive import drift_between
from tests.helpers import REPO

ROOT = REPO / "studies/decisive/results"


def test_the_study_page_matches_the_committed_rows() -> None:
    df = drift_between.repeats(ROOT)
    page = (ROOT / "README.md").read_text()
    for part in (drift_between.spread_table(df), drift_between.corrected_table(df),
                 drift_between.coverage_table(df), drift_between.sweeps_table(ROOT)):
        assert part in page, "run: python -m studies.decisive.drift_between and update studies/decisive/results/README.md"


def test_drift_between_processes_no_longer_blocks_but_other_causes_do() -> None:
    table = drift_between.sweeps_table(ROOT).splitlines()
    assert table[-1] == "| **all** | **138** | **49** | **44** | **5** |"
    blocked = [line for line in table[2:-1] if not line.endswith("| 0 |")]
    assert [line.split(" | ")[0].lstrip("| ") for line in blocked] == [
        "consensus/shared", "placement/hop_gate/smoke", "placement/lease1/r1", "ungated/r2"]
