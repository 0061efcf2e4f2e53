"""Trial expansion: counts, stable ids, impossible combinations dropped with a reason."""

from __future__ import annotations

from sweeper.spec.sweep_spec import parse_spec
from sweeper.spec.trials import Trial, expand


def _spec(**axes):
    base = {"mode": ["eager", "default", "reduce-overhead"], "dynamic": [None, False],
            "batch_size": [1, 8], "seq_len": [128], "phase": ["infer"], "precision": ["fp32", "bf16"]}
    return parse_spec({"name": "x", "models": [{"name": "resnet50"}, {"name": "bert-base"}],
                       "axes": {**base, **axes}})


def test_grid_size_and_eager_has_no_dynamic():
    trials, dropped = expand(_spec())
    # per model: 2 bs x 2 precisions x (1 eager + 2 compiled modes x 2 dynamic) = 20
    assert len(trials) == 40
    assert not dropped
    eager = [t for t in trials if t.mode == "eager"]
    assert len(eager) == 8 and all(t.dynamic is None for t in eager)


def test_vision_models_ignore_seq_len():
    trials, _ = expand(_spec(seq_len=[64, 128]))
    assert {t.seq_len for t in trials if t.model_name == "resnet50"} == {None}
    assert {t.seq_len for t in trials if t.model_name == "bert-base"} == {64, 128}


def test_ids_are_stable_and_config_sensitive():
    a, _ = expand(_spec())
    b, _ = expand(_spec())
    assert [t.trial_id for t in a] == [t.trial_id for t in b]
    assert len({t.trial_id for t in a}) == len(a)
    c, _ = expand(_spec(batch_size=[1, 16]))
    assert {t.trial_id for t in a if t.batch_size == 1} == {t.trial_id for t in c if t.batch_size == 1}
    assert not {t.trial_id for t in a if t.batch_size == 8} & {t.trial_id for t in c}


def test_too_long_sequences_are_dropped_with_reason():
    trials, dropped = expand(_spec(seq_len=[128, 1024]))
    assert all(t.seq_len != 1024 for t in trials if t.model_name == "bert-base")
    assert dropped and all("exceeds bert-base's 512 positions" in d.reason for d in dropped)


def test_modes_needing_inductor_are_dropped_for_other_backends():
    spec = parse_spec({"name": "x", "models": [{"name": "bert-tiny"}],
                       "axes": {"mode": ["eager", "default", "max-autotune"]},
                       "measure": {"backend": "aot_eager"}})
    trials, dropped = expand(spec)
    assert {t.mode for t in trials} == {"eager", "default"}
    assert any("needs the inductor backend" in d.reason for d in dropped)


def test_trial_round_trips_through_json_dict():
    trials, _ = expand(_spec())
    t = trials[3]
    assert Trial.from_dict(t.to_dict()) == t
    assert t.label.startswith(t.model_name)


def test_compile_threads_enters_the_config_only_when_set():
    plain, _ = expand(_spec())
    capped_spec = parse_spec({**_spec().model_dump(mode="json"), "measure": {"compile_threads": 4}})
    capped, _ = expand(capped_spec)
    assert all("compile_threads" not in t.measure for t in plain)
    assert all(t.measure.compile_threads == 4 for t in capped)
    assert not {t.trial_id for t in plain} & {t.trial_id for t in capped}
