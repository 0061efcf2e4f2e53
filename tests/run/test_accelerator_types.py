"""GPU types as an axis, without a cluster: trials and ids, where a cluster's node table places
them, the driver's lines as nodes leave and join, the unplaced row, and analysis that keeps types
apart (contexts, recommend, compare one type against another)."""

from __future__ import annotations

import pandas as pd
import pytest

from sweeper.analysis.compare import compare_types
from sweeper.analysis.recommend import recommend_all
from sweeper.results.schema import ResultsError, check_row
from sweeper.run import placement, search
from sweeper.run.state import make_row
from sweeper.spec.sweep_spec import SpecError, parse_spec
from sweeper.spec.trials import expand

BASE = {"name": "t", "models": [{"name": "bert-tiny"}], "axes": {"mode": ["eager", "default"], "batch_size": [2]}}


def _spec(**axes):
    return parse_spec({**BASE, "axes": {**BASE["axes"], **axes}}, source="t")


def test_every_setting_runs_on_each_type_and_untyped_specs_keep_their_ids() -> None:
    plain, typed = expand(_spec())[0], expand(_spec(accelerator_type=["A100", "H100"]))[0]
    assert len(typed) == 2 * len(plain)
    assert sorted(t.accelerator_type for t in typed) == ["A100", "A100", "H100", "H100"]
    assert {t.trial_id for t in plain}.isdisjoint(t.trial_id for t in typed)
    assert all(t.accelerator_type is None for t in plain)
    assert _spec().spec_hash() == parse_spec(BASE, source="t").spec_hash()
    assert typed[0].label.endswith(" on A100")
    assert search.params_of(plain[0].to_dict()).keys() == set(search.PARAMS)
    assert search.params_of(typed[0].to_dict())["accelerator_type"] == "A100"


@pytest.mark.parametrize("bad", [[], ["A100", "A100"], ["H100 SXM"]])
def test_bad_type_lists_are_one_line_errors(bad: list[str]) -> None:
    with pytest.raises(SpecError, match=r"axes\.accelerator_type"):
        _spec(accelerator_type=bad)


def _node(nid: str, *types: str, alive: bool = True, gpus: float = 8) -> dict:
    return {"NodeID": nid * 16, "Alive": alive, "NodeManagerAddress": "10.0.0.1",
            "Resources": {"CPU": 64, "GPU": gpus, **{f"accelerator_type:{t}": 1 for t in types}}}


def test_placement_counts_trials_and_nodes_per_type_and_names_what_is_missing() -> None:
    trials = expand(_spec(accelerator_type=["A100", "H100", "H200"]))[0]
    found = placement.plan(trials, [_node("a", "A100"), _node("b", "A100"), _node("c", "H100", gpus=4),
                                    _node("d", "H200", alive=False), _node("e")])
    assert found.trials_by_type == {"A100": 2, "H100": 2, "H200": 2}
    assert found.nodes_by_type == {"A100": 2, "H100": 1} and found.missing == ["H200"]
    lines = found.lines()
    assert lines[0] == "  accelerator_type A100: 2 trials; 2 nodes, 16 GPUs"
    assert lines[1] == "  accelerator_type H100: 2 trials; 1 node, 4 GPUs"
    assert lines[2].startswith("  accelerator_type H200: 2 trials; no node of this type: its trials wait")
    assert placement.trial_resources({"cpu": 4, "gpu": 1}, "H100") == {"cpu": 4, "gpu": 1,
                                                                       "accelerator_type:H100": placement.PER_TRIAL}
    assert placement.trial_resources({"cpu": 4}, None) == {"cpu": 4}


def test_the_watch_says_which_node_left_and_which_joined() -> None:
    watch = placement.NodeWatch.of([_node("a", "A100"), _node("b", "H100")])
    assert watch.update([_node("a", "A100"), _node("b", "H100")]) == []
    left = watch.update([_node("a", "A100"), _node("b", "H100", alive=False)], now=0.0)
    assert len(left) == 1 and left[0].startswith("node bbbbbbbbbbbb (10.0.0.1, H100) left the cluster")
    assert watch.left_at == {"b" * 16: 0.0}
    joined = watch.update([_node("a", "A100"), _node("c", "H200")])
    assert len(joined) == 1 and "node cccccccccccc (10.0.0.1, H200) joined the cluster" in joined[0]


def test_an_unplaced_row_keeps_the_row_contract() -> None:
    trial = expand(_spec(accelerator_type=["H200"]))[0][0]
    row = make_row("sweep", "t", trial, placement.unplaced_row(trial, {"A100": 2}))
    check_row(row)
    assert row["status"] == "unplaced" and row["accelerator_type"] == "H200"
    assert "no alive node of accelerator_type H200" in row["error"] and "(its types: A100)" in row["error"]


def _row(gpu_type: str, mode: str, tp: float) -> dict:
    return {"sweep_id": "s", "trial_id": f"{gpu_type}{mode}", "model": "net", "mode": mode, "dynamic": None,
            "backend": "inductor", "batch_size": 8, "seq_len": None, "phase": "infer", "precision": "fp32",
            "status": "ok", "throughput_items_s": tp, "compile_s": 0.0 if mode == "eager" else 30.0,
            "peak_mem_gib": 4.0, "accuracy_ok": True, "device_name": "NVIDIA GPU", "accelerator_type": gpu_type}


ROWS = pd.DataFrame([_row("H100", "eager", 1000.0), _row("H100", "default", 1500.0),
                     _row("H200", "eager", 1100.0), _row("H200", "default", 2000.0)])


def test_types_are_contexts_of_their_own() -> None:
    recs = recommend_all(ROWS, "net")
    assert sorted(r.context["accelerator_type"] for r in recs) == ["H100", "H200"]


def test_compare_sets_one_type_against_another() -> None:
    table = compare_types(ROWS, "H100", "H200").set_index("mode")
    assert table.loc["default", "verdict"] == "improvement"
    assert table.loc["default", "throughput_items_s_change_pct"] == pytest.approx(100 / 3)
    assert table.loc["eager", "verdict"] == "improvement"  # +10%
    with pytest.raises(ResultsError, match=r"no rows of accelerator_type .A100.; measured: H100, H200"):
        compare_types(ROWS, "A100", "H200")
