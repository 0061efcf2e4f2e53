"""The decisive study's drift-between-processes tables, regenerated from its committed rows."""

from __future__ import annotations

import pytest

from studies.decisive import drift_between, repeat_coverage
from tests.helpers import REPO

ROOT = REPO / "studies/decisive/results"


@pytest.fixture(scope="module")
def tables() -> dict[str, str]:
    df = drift_between.repeats(ROOT)
    return {"spread": drift_between.spread_table(df), "corrected": drift_between.corrected_table(df),
            "coverage": drift_between.coverage_table(df), "sweeps": drift_between.sweeps_table(ROOT),
            "repeat coverage": repeat_coverage.table(df), "witness gap": drift_between.witness_gap_line(ROOT),
            "matched speed": repeat_coverage.matched_table(df)}


@pytest.mark.slow  # regenerates every table from all the study's committed sweeps (seconds)
def test_the_study_page_matches_the_committed_rows(tables) -> None:
    page = (ROOT / "README.md").read_text()
    for name, part in tables.items():
        assert part in page, f"{name}: run python -m studies.decisive.drift_between, update the study's README"


@pytest.mark.slow  # the same tables
def test_drift_between_processes_no_longer_blocks_but_other_causes_do(tables) -> None:
    table = tables["sweeps"].splitlines()
    assert table[-1] == "| **all** | **230** | **57** | **53** | **4** |"
    blocked = [line for line in table[2:-1] if not line.endswith("| 0 |")]
    assert [line.split(" | ")[0].lstrip("| ") for line in blocked] == [
        "consensus/shared", "h100_same/shared", "placement/hop_gate/smoke", "ungated/r2"]


def test_calibrated_intervals_hold_another_run_as_often_as_their_spread_says() -> None:
    """Runs of one setting drawn from one normal spread: an exact 95% interval of each holds the other's
    headline in erf(1.96 / 2) of the checks, and the module's expectation says the same."""
    import math

    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(0)
    sigma, rows = 0.04, []
    for setting in range(200):
        for rep in range(3):
            x = 5.0 * math.exp(rng.normal(0, sigma))
            rows.append({"arm": "sim", "model": f"m{setting}", "mode": "default", "rep": f"r{rep}",
                         "speedup_vs_eager": x, "speedup_low": x * math.exp(-1.96 * sigma),
                         "speedup_high": x * math.exp(1.96 * sigma)})
    p = repeat_coverage.pairs(pd.DataFrame(rows))
    assert p["held"].mean() == pytest.approx(math.erf(1.96 / 2), abs=0.03)
    assert p["expected"].mean() == pytest.approx(math.erf(1.96 / 2), abs=0.08)  # sigma from 3 runs: noisy


def test_matched_speed_takes_reduce_overhead_rows_to_one_witness_reading() -> None:
    """Two repeats whose eager step went as the witness reading: at beta 1 their speedups coincide;
    other modes' rows are left as they are."""
    import pandas as pd

    df = pd.DataFrame({"mode": ["reduce-overhead", "reduce-overhead", "default"],
                       "speedup_vs_eager": [6.0, 5.0, 1.5], "speedup_low": [5.4, 4.5, 1.4],
                       "speedup_high": [6.6, 5.5, 1.6], "eager_witness_ms": [1.2, 1.0, 1.1]})
    matched = repeat_coverage.matched_speed(df, 1.0)
    assert matched["speedup_vs_eager"].tolist() == pytest.approx([5.0, 5.0, 1.5])
    assert matched["speedup_low"].tolist() == pytest.approx([4.5, 4.5, 1.4])
    assert repeat_coverage.matched_speed(df, 0.0).equals(df.astype({"speedup_vs_eager": float}))
