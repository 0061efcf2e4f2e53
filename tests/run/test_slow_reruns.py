"""A compiled trial whose headline ran at the host's slow CPU state is timed again after the sweep's
other trials (resources.slow_reruns): which trials go again, which row is kept, what it records,
that the setting never changes a trial's id, and a real sweep whose first measuring process saw
the host slow throughout."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweeper.api.run import slow_reruns
from sweeper.results.store import RESULTS_FILE, read_results
from sweeper.run.state import SweepState
from sweeper.spec.sweep_spec import load_spec, parse_spec
from sweeper.spec.trials import expand
from tests.helpers import run_cli, tiny_spec, write_spec


def _state(tmp_path: Path, **resources: object) -> tuple[SweepState, dict[str, object]]:
    spec = load_spec(write_spec(tmp_path, tiny_spec("reruns", axes={"mode": ["eager", "default"],
                                                                    "batch_size": [1, 2, 4]},
                                                    resources=resources)))
    state = SweepState.open(spec, tmp_path / "out", resume=False)
    state.save_manifest()
    trials = {f"{t.mode}{t.batch_size}": t for t in expand(spec)[0]}
    return state, trials


def _measured(host_state: str, speedup: float, status: str = "ok") -> dict[str, object]:
    return {"status": status, "host_state": host_state, "speedup_vs_eager": speedup}


def test_only_ok_compiled_rows_whose_headline_ran_slow_go_again(tmp_path) -> None:
    state, t = _state(tmp_path)
    state.add(t["eager1"], _measured("slow", 1.0))
    state.add(t["default1"], _measured("slow", 1.9))
    state.add(t["default2"], _measured("fast", 1.4))
    state.add(t["default4"], _measured("slow", 0.0, status="crashed"))
    assert [x.trial_id for x in state.slow_headlines(list(t.values()), 1)] == [t["default1"].trial_id]
    assert state.slow_headlines([t["default2"]], 0) == []


def test_an_ok_rerun_replaces_the_row_and_names_the_earlier_speedup(tmp_path) -> None:
    state, t = _state(tmp_path)
    state.add(t["default1"], _measured("slow", 1.9))
    assert state.slow_headlines([t["default1"]], 2) == [t["default1"]]
    state.add(t["default1"], _measured("slow", 2.3))
    row = state.by_trial[t["default1"].trial_id]
    assert (row["speedup_vs_eager"], row["slow_reruns"], row["slow_rerun_speedup"]) == (2.3, 1, 1.9)
    assert state.slow_headlines([t["default1"]], 2) == [t["default1"]]  # still slow, one more allowed
    state.add(t["default1"], _measured("fast", 2.6))
    row = state.by_trial[t["default1"].trial_id]
    assert (row["speedup_vs_eager"], row["slow_reruns"], row["slow_rerun_speedup"]) == (2.6, 2, 2.3)
    assert state.slow_headlines([t["default1"]], 2) == []
    state.close()
    on_disk = read_results([tmp_path / "out" / RESULTS_FILE])
    assert on_disk["speedup_vs_eager"].tolist() == [2.6] and on_disk["slow_reruns"].tolist() == [2]


def test_a_failed_rerun_leaves_the_earlier_row(tmp_path) -> None:
    state, t = _state(tmp_path)
    state.add(t["default2"], _measured("slow", 1.7))
    state.slow_headlines([t["default2"]], 1)
    kept = state.add(t["default2"], {"status": "timeout", "error": "trial timed out"})
    assert kept["speedup_vs_eager"] == 1.7 and kept.get("slow_reruns") is None
    assert state.by_trial[t["default2"].trial_id] is kept
    state.close()
    assert read_results([tmp_path / "out" / RESULTS_FILE])["status"].tolist() == ["ok"]


def test_reruns_default_to_one_on_gpus_none_on_the_cpu_and_none_in_a_search(tmp_path) -> None:
    base = tiny_spec("d")
    assert slow_reruns(parse_spec(base), "cuda") == 1
    assert slow_reruns(parse_spec(base), "cpu") == 0
    assert slow_reruns(parse_spec(tiny_spec("d", resources={"device": "cpu", "slow_reruns": 2})), "cpu") == 2
    assert slow_reruns(parse_spec(tiny_spec("d", resources={"slow_reruns": 0})), "cuda") == 0
    search = tiny_spec("d", search={"algorithm": "random", "max_trials": 1})
    assert slow_reruns(parse_spec(search), "cuda") == 0


def test_the_setting_never_changes_a_trial_id_or_the_spec_hash() -> None:
    plain, set_ = parse_spec(tiny_spec("h")), parse_spec(tiny_spec("h", resources={"slow_reruns": 2}))
    assert [t.trial_id for t in expand(plain)[0]] == [t.trial_id for t in expand(set_)[0]]
    assert plain.spec_hash() == set_.spec_hash()


@pytest.mark.slow
def test_a_trial_that_saw_the_host_slow_is_timed_again_after_the_others(ray_local, tmp_path, caplog) -> None:
    """The first measuring process (the bs1 trial's) judges its windows by a record of a host a
    million times faster, so its headline runs at the slow state; the bs2 trial's process and the
    rerun's judge theirs by their own readings. On a loaded machine those readings can be truly
    slow too, and then the bs2 trial goes again as well: one process per trial and per rerun."""
    tickets = tmp_path / "tickets"
    spec = write_spec(tmp_path, tiny_spec(
        "slowrerun", models=[{"name": "m", "factory": "faulty_models:make_slow_host_once",
                              "kwargs": {"tickets_dir": str(tickets)}, "input": {"kind": "tensor", "shape": [8]}}],
        axes={"mode": ["default"], "batch_size": [1, 2]}, measure={"megacache_warm_start": False},
        resources={"device": "cpu", "max_concurrent_trials": 1, "slow_reruns": 1}))
    out = tmp_path / "out"
    assert run_cli(["run", str(spec), "--results", str(out), "--no-report"]) == 0
    df = read_results([out / RESULTS_FILE]).set_index("batch_size")
    assert (df["status"] == "ok").all(), df[["status", "error"]]
    rerun = df.loc[1]
    assert rerun["slow_reruns"] == 1 and rerun["slow_rerun_speedup"] > 0, rerun
    assert rerun["witness_ref_ms"] > 1e-3  # the row is the rerun's, judged by its own readings
    went_again = int((df["slow_reruns"].fillna(0) == 1).sum())  # 1, or 2 where bs2 truly read slow
    processes = sorted(int(p.name) for p in tickets.iterdir() if p.name.isdigit())
    assert processes == list(range(2 + went_again)), (processes, df["slow_reruns"])
    assert any(f"timing {went_again} compiled trials again" in r.getMessage() for r in caplog.records)
