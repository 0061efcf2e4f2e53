"""The spec's search section and the Tune searcher every sweep runs through: which trials it
proposes (only real ones, none twice, baselines first, within budget), driven as Tune drives it."""

from __future__ import annotations

import math
import sys

import pytest

from sweeper.results.synthetic import make_rows
from sweeper.run.search import PARAMS, STATUS_CODES, make_search, metrics_of, objective_values, params_of
from sweeper.spec.search_spec import SearchSpec
from sweeper.spec.sweep_spec import SpecError, parse_spec
from sweeper.spec.trials import expand
from tests.helpers import tiny_spec


def _parse(**search):
    return parse_spec(tiny_spec("s", search=search))


def test_search_section_defaults_to_the_grid_and_leaves_the_spec_hash_alone():
    plain = parse_spec(tiny_spec("s"))
    searched = _parse(algorithm="optuna", max_trials=3, seed=7)
    assert plain.search.algorithm == "grid"
    assert searched.search.objectives == {"throughput_items_s": "max", "compile_s": "min", "peak_mem_gib": "min"}
    assert plain.spec_hash() == searched.spec_hash()  # rows measured under either are the same rows


@pytest.mark.parametrize(("search", "message"), [
    ({"algorithm": "optuna"}, "search: algorithm 'optuna' needs max_trials"),
    ({"algorithm": "grid", "max_trials": 4}, "search: max_trials limits a search"),
    ({"algorithm": "random", "max_trials": 2, "objectives": {"items": "max"}}, "search.objectives.items"),
    ({"algorithm": "random", "max_trials": 2, "objectives": {"compile_s": "lowest"}}, "'max' or 'min'"),
    ({"algorithm": "bayes", "max_trials": 2}, "search.algorithm"),
    ({"algoritm": "random"}, "search.algoritm: unknown key (allowed: algorithm, objectives, max_trials, seed)"),
])
def test_bad_search_sections_fail_in_one_line(search, message):
    with pytest.raises(SpecError, match=r"^spec: ") as err:
        _parse(**search)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_optuna_missing_is_one_line_naming_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "optuna", None)  # how Python marks a module that cannot be imported
    with pytest.raises(SpecError, match=r"needs the optuna package: pip install 'sweeper\[search\]'"):
        _parse(algorithm="optuna", max_trials=3)
    assert _parse(algorithm="random", max_trials=3).search.algorithm == "random"


def test_params_and_metrics_are_flat_and_typed():
    spec = parse_spec(tiny_spec("s", axes={"mode": ["eager", "default"], "dynamic": [None], "batch_size": [2],
                                           "seq_len": [16]}))
    trial = expand(spec)[0][1]
    params = params_of(trial.to_dict())
    assert params == {"model": "bert-tiny", "mode": "default", "dynamic": "none", "batch_size": 2, "seq_len": 16,
                      "phase": "infer", "precision": "fp32", "workload": "none", "bucketing": "none",
                      "mark_dynamic": False, "scope": "whole", "option_set": "none", "path": "jit"}
    row = make_rows(1)[0]
    metrics = metrics_of({**row, "status": "oom", "compile_s": None})
    assert metrics["status_code"] == STATUS_CODES["oom"] and math.isnan(metrics["compile_s"])
    assert all(isinstance(v, float) for v in metrics.values())
    assert objective_values(metrics, {"throughput_items_s": "max"}) is None


def _table(n: int = 300, drop_every: int = 7) -> dict[str, dict]:
    """Synthetic rows of one model, with holes: every `drop_every`-th setting does not exist."""
    rows = [r for i, r in enumerate(make_rows(n, models=["resnet50"])) if i % drop_every]
    return {r["trial_id"]: r for r in rows}


def _drive(searcher, rows: dict[str, dict], limit: int = 10_000) -> list[str]:
    """Tune's calls: suggest a trial, run it (here: look its row up), report it complete."""
    order: list[str] = []
    for i in range(limit):
        config = searcher.suggest(f"tune{i}")
        if config == "FINISHED":
            return order
        assert config == {"trial_id": config["trial_id"], **params_of(rows[config["trial_id"]])}
        order.append(config["trial_id"])
        searcher.on_trial_complete(f"tune{i}", metrics_of(rows[config["trial_id"]]))
    raise AssertionError("the searcher never finished")


@pytest.mark.parametrize("algorithm", ["optuna", "random"])
def test_a_search_runs_baselines_first_then_only_real_unseen_trials_within_budget(algorithm):
    rows = _table()
    settings = {tid: params_of(r) for tid, r in rows.items()}
    eager = [tid for tid, p in settings.items() if p["mode"] == "eager"]
    order = _drive(make_search(SearchSpec(algorithm=algorithm, max_trials=40, seed=3), settings, {}), rows)
    assert order[:len(eager)] == eager
    assert len(order) == len(eager) + 40 and len(set(order)) == len(order)
    assert all(rows[t]["mode"] != "eager" for t in order[len(eager):])


def test_optuna_exhausts_a_holed_space_without_repeats():
    rows = _table(120, drop_every=3)
    settings = {tid: params_of(r) for tid, r in rows.items()}
    order = _drive(make_search(SearchSpec(algorithm="optuna", max_trials=10_000), settings, {}), rows)
    assert sorted(order) == sorted(settings)


def test_a_resumed_search_skips_what_was_measured_and_spends_only_what_is_left():
    rows = _table()
    settings = {tid: params_of(r) for tid, r in rows.items()}
    compiled = [t for t, p in settings.items() if p["mode"] != "eager"]
    done = {t: {"params": settings[t], "metrics": metrics_of(rows[t])} for t in compiled[:15]}
    todo = {t: p for t, p in settings.items() if t not in done}
    order = _drive(make_search(SearchSpec(algorithm="optuna", max_trials=40, seed=1), todo, done), rows)
    assert not set(order) & set(done)
    assert sum(settings[t]["mode"] != "eager" for t in order) == 40 - 15


def test_the_grid_is_every_trial_in_order():
    rows = _table(60)
    settings = {tid: params_of(r) for tid, r in rows.items()}
    assert _drive(make_search(SearchSpec(), settings, {}), rows) == list(settings)
    assert set(PARAMS) == set(settings[next(iter(settings))])
