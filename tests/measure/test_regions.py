"""The scope axis: regional trials expand with their own ids (whole trials keep theirs), models
without a repeated block are dropped with a reason, and a regional trial compiles each block in
place, measured in-process with the aot_eager backend."""

from __future__ import annotations

import json

import pytest
import torch

from sweeper.measure import process as measure
from sweeper.measure.regions import Regional, compile_scope, find_blocks
from sweeper.measure.workbench import build_bundle
from sweeper.spec.sweep_spec import parse_spec
from sweeper.spec.trials import expand
from tests.helpers import tiny_spec


def _trials(**overrides):
    return expand(parse_spec(tiny_spec(**overrides)))


def test_whole_trials_keep_their_ids_and_regional_trials_get_new_ones():
    before, _ = _trials()
    both, dropped = _trials(axes={"scope": ["whole", "regional"]})
    assert not dropped
    whole = [t for t in both if t.scope == "whole"]
    regional = [t for t in both if t.scope == "regional"]
    assert [t.trial_id for t in whole] == [t.trial_id for t in before]
    assert [t.mode for t in regional] == ["default"]  # eager has no scope: one eager trial
    assert regional[0].trial_id not in {t.trial_id for t in whole}
    assert "regional" in regional[0].label and regional[0].stream_columns()["scope"] == "regional"
    spec = parse_spec(tiny_spec())
    assert "scope" not in spec.identity()["axes"] and "block" not in spec.identity()["models"][0]


def test_a_zoo_model_without_a_known_block_is_dropped_and_a_factory_model_without_one_fails_saying_why(tmp_path):
    models = [{"name": "mobilenet_v3_large"}, {"name": "mine", "factory": "torch.nn:Identity",
                                                  "input": {"kind": "tensor", "shape": [4]}}]
    trials, dropped = _trials(models=models, axes={"scope": ["regional"], "mode": ["default"]})
    assert [d.config.split()[0] for d in dropped] == ["mobilenet_v3_large"]
    assert "needs a repeated block class" in dropped[0].reason and "`block`" in dropped[0].reason
    (mine,) = [t for t in trials if t.scope == "regional"]  # its block is looked for when it runs
    row = measure.run({"trial": mine.to_dict(), "device": "cpu"}, tmp_path / "row.json")
    assert row["status"] == "compile_error" and row["block_choice"].startswith("none: no module class of Identity")
    assert "no repeated block found" in row["error"] and "`block`" in row["error"]
    assert row.get("eager_throughput_items_s") is None  # refused before anything was timed


def test_a_factory_model_names_its_block():
    model = {"name": "mine", "factory": "torch.nn:TransformerEncoder", "block": "TransformerEncoderLayer",
             "input": {"kind": "tensor", "shape": [4, 8]}}
    trials, dropped = _trials(models=[model], axes={"scope": ["regional"], "mode": ["default"]})
    assert not dropped and trials[0].model.blocks == ("TransformerEncoderLayer",)
    assert json.loads(trials[0].to_json())["model"]["block"] == "TransformerEncoderLayer"


@pytest.mark.parametrize(("name", "blocks"), [("bert-tiny", 2), ("gpt2-tiny", 2), ("t5-tiny", 4), ("vit-tiny", 2),
                                          ("resnet18-tiny", 8)])
def test_the_zoo_knows_each_models_repeated_block(name, blocks):
    (trial,) = [t for t in _trials(models=[{"name": name}], axes={"scope": ["regional"]})[0] if t.mode != "eager"]
    model = build_bundle(trial).model
    assert len(find_blocks(model, trial.model.blocks)) == blocks


def test_regional_blocks_run_compiled_only_through_the_wrapper():
    (trial,) = [t for t in _trials(axes={"scope": ["regional"]})[0] if t.mode != "eager"]
    bundle = build_bundle(trial)
    model = bundle.model.eval()
    torch._dynamo.reset()
    compiled = compile_scope(model, "regional", trial.model.blocks, {"backend": "aot_eager"})
    assert isinstance(compiled, Regional) and len(compiled.compiled_blocks) == 2
    assert list(compiled.parameters()) == list(model.parameters())  # one set of weights, two ways to call it
    batch = bundle.make_batch(2, 16, torch.Generator().manual_seed(0))
    with torch.no_grad():
        compiled(**batch.kwargs)
        assert all(b._compiled_call_impl is None for b, _ in compiled.compiled_blocks)  # the model itself stays eager
    with pytest.raises(ValueError, match="no module of class Nope"):
        compile_scope(model, "regional", ("Nope",), {"backend": "aot_eager"})


@pytest.mark.slow  # a real regional compile of each phase
@pytest.mark.parametrize("phase", ["infer", "train"])
def test_a_regional_trial_is_measured_like_a_whole_one(tmp_path, phase):
    (trial,) = [t for t in _trials(axes={"scope": ["regional"], "phase": [phase]})[0] if t.mode != "eager"]
    row = measure.run({"trial": trial.to_dict(), "device": "cpu"}, tmp_path / "row.json")
    assert row["status"] == "ok", row["error"]
    assert row["scope"] == "regional" and row["compiled_regions"] == 2
    assert row["graphs"] == 1  # both layers served by one compiled block
    assert row["accuracy_ok"] and row["speedup_vs_eager"] > 0 and row["first_call_s"] > 0
