"""A spec's workload section and the stream trials it expands to: one-line errors, lengths carried,
stable ids of fixed-shape trials, models that run the stream."""

from __future__ import annotations

import pytest

from sweeper.spec.sweep_spec import SpecError, parse_spec
from sweeper.spec.trials import expand
from tests.helpers import REPO, run_cli, stream_spec, tiny_spec


@pytest.mark.parametrize(("patch", "message"), [
    ({"axes": {"bucketing": ["pow3"]}}, "axes.bucketing: unknown bucketing 'pow3'"),
    ({"workloads": {"w": {"lengths": {"kind": "lognormal", "mu": 5, "sigma": 0.5}}}}, "max_len: Field required"),
    ({"workloads": {"w": {"lengths": {"kind": "file", "path": "missing.txt"}}}}, "no such file 'missing.txt'"),
    ({"workloads": {"w": {"images": {"dataset_size": 10}, "lengths": {"kind": "fixed", "length": 3}}}},
     "exactly one of 'lengths'"),
    ({"workloads": {"w": {"lengths": {"kind": "fixed", "length": 3}, "models": ["gpt2"]}}}, "no model 'gpt2'"),
    ({"workloads": {"w": {"images": {"dataset_size": 9}, "models": ["bert-tiny"]}}}, "is a nlp model"),
])
def test_stream_spec_errors_are_one_line_and_name_the_field(patch: dict, message: str) -> None:
    spec = stream_spec()
    spec.update(patch) if "workloads" in patch else spec["axes"].update(patch["axes"])
    with pytest.raises(SpecError, match=message) as err:
        parse_spec(spec)
    assert "\n" not in str(err.value)


def test_stream_axes_need_a_workload() -> None:
    spec = tiny_spec(axes={"bucketing": ["pow2"]})
    with pytest.raises(SpecError, match="add a workload with 'lengths'"):
        parse_spec(spec)
    with pytest.raises(SpecError, match="mark_dynamic marks dimensions"):
        parse_spec(tiny_spec(axes={"mark_dynamic": [True]}))


def test_stream_trials_carry_their_lengths_and_collapse_what_cannot_apply() -> None:
    spec = stream_spec(axes={"dynamic": [None, True, False], "bucketing": ["none", "pow2"],
                             "mark_dynamic": [False, True], "phase": ["infer", "train"]})
    trials, dropped = expand(parse_spec(spec))
    eager = [t for t in trials if t.mode == "eager"]
    assert len(eager) == 2 and not any(t.mark_dynamic for t in eager)  # one per bucketing policy
    compiled = [t for t in trials if t.mode != "eager"]
    assert len(compiled) == 2 * (2 + 1 + 2)  # dynamic=True has nothing left to mark
    assert all(t.seq_len is None and len(t.workload.lengths) == 12 for t in trials)
    assert {tuple(t.workload.lengths) for t in trials} == {tuple(trials[0].workload.lengths)}
    assert dropped and all("inference only" in d.reason for d in dropped)
    assert "stream=w bucketing=pow2" in next(t.label for t in trials if t.bucketing == "pow2")


def test_fixed_shape_trial_ids_do_not_change_when_streams_exist_elsewhere() -> None:
    plain, _ = expand(parse_spec(tiny_spec(models=[{"name": "resnet18-tiny"}])))
    mixed = tiny_spec(models=[{"name": "resnet18-tiny"}, {"name": "bert-tiny"}],
                      workloads={"w": {"lengths": {"kind": "fixed", "length": 8}}}, axes={"bucketing": ["none",
                                                                                                        "pow2"]})
    trials, _ = expand(parse_spec(mixed))
    assert {t.trial_id for t in plain} == {t.trial_id for t in trials if t.model_name == "resnet18-tiny"}


def test_lengths_beyond_the_model_positions_drop_the_trial() -> None:
    spec = stream_spec(workloads={"w": {"lengths": {"kind": "fixed", "length": 600}}})
    trials, dropped = expand(parse_spec(spec))
    assert not trials and "600 tokens, above bert-tiny's 512 positions" in dropped[0].reason


def test_workload_models_pick_which_models_run_the_stream() -> None:
    spec = stream_spec(models=[{"name": "bert-tiny"}, {"name": "gpt2-tiny"}])
    spec["workloads"]["w"]["models"] = ["gpt2-tiny"]
    trials, _ = expand(parse_spec(spec))
    assert {t.model_name for t in trials if t.workload} == {"gpt2-tiny"}
    assert {t.seq_len for t in trials if t.model_name == "bert-tiny"} == {16}  # the fixed grid


def test_h200_streams_spec_validates(capsys) -> None:
    assert run_cli(["validate", str(REPO / "studies/streams/streams.yaml")]) == 0
    assert "valid; 48 trials over 2 models" in capsys.readouterr().out
