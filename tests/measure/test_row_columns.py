"""The columns a measured row carries are schema columns, and a trial survives its JSON round trip."""

from __future__ import annotations

import json

import pytest

from sweeper.measure import process as measure
from sweeper.spec.sweep_spec import parse_spec
from sweeper.spec.trials import Trial, expand
from tests.helpers import tiny_spec


def _trial(**overrides) -> tuple[Trial, Trial]:
    trials, _ = expand(parse_spec(tiny_spec(**overrides)))
    return tuple(sorted(trials, key=lambda t: t.mode != "eager"))  # (eager, compiled)


@pytest.mark.slow
def test_new_columns_are_schema_columns(tmp_path):
    from sweeper.results.schema import COLUMN_NAMES

    _eager, compiled = _trial()
    row = measure.run({"trial": compiled.to_dict(), "device": "cpu"}, tmp_path / "row.json")
    for key in ("speedup_ci_low", "speedup_ci_high", "host_busy_windows_pct", "cpu_affinity", "eager_err_vs_fp64",
                "compiled_err_vs_fp64", "accuracy_reference", "mem_need_reserved_gib", "device_mem_used_gib",
                "eager_spread_pct"):
        assert key in row and key in COLUMN_NAMES, key
    assert json.loads((tmp_path / "row.json").read_text())["status"] == "ok"
    assert Trial.from_json(compiled.to_json()) == compiled
