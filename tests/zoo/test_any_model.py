"""Any model in two lines: `timm:` and `hf:` models by name, the repeated block found when the
spec names none, and the Python API (`sweeper.sweep`, `sweeper.load`, `Results`) with a model class
defined in a script's `__main__`, shipped to the workers by value."""

from __future__ import annotations

import json
import logging

import pytest
import torch

import sweeper
from sweeper.measure import process as measure
from sweeper.spec.sweep_spec import SpecError, parse_spec
from sweeper.spec.trials import expand
from sweeper.zoo import hf_models, timm_models
from sweeper.zoo.blocks import MIN_COPIES, find_repeated_block
from sweeper.zoo.recurrent import lstm_tiny
from tests.helpers import run_cli, tiny_spec

timm = pytest.importorskip("timm")

TINY_DECODER = {"vocab_size": 1024, "hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 2,
                "intermediate_size": 128}
"""Four layers (the finder wants at least MIN_COPIES), a vocabulary small enough that the layers
hold most of the parameters, as they do at full size."""
LLAMA_2L = {**TINY_DECODER, "num_hidden_layers": 2}


def _plumbing(name: str, models: list[dict], **axes) -> dict:
    return tiny_spec(name, models=models, axes={"mode": ["eager", "default"], "dynamic": [False], "batch_size": [2],
                                                 "seq_len": [16], **axes})


# ---------------------------------------------------------------- models by name


@pytest.mark.parametrize(("model", "message"), [
    ({"name": "hf:llama"}, "hf:llama needs a 'task': one of causal-lm, masked-lm, seq-cls, seq2seq, image-cls"),
    ({"name": "hf:llama", "task": "generate"}, "(got 'generate')"),
    ({"name": "timm:test_vit", "task": "causal-lm"}, "'task' is only for hf: models"),
    ({"name": "timm:test_vit", "input": {"kind": "image"}}, "'input' is only for factory models; timm models"),
    ({"name": "timm:"}, "name the timm model after 'timm:'"),
    ({"name": "nope"}, "or timm:NAME, hf:MODEL_TYPE"),
])
def test_a_wrong_model_name_or_task_is_one_line(model, message):
    with pytest.raises(SpecError, match="models") as err:
        parse_spec(tiny_spec(models=[model]))
    assert message in str(err.value) and "\n" not in str(err.value)
    assert isinstance(err.value, sweeper.SweeperError)


def test_library_models_expand_with_their_input_task():
    spec = parse_spec(_plumbing("t", [{"name": "timm:test_vit"}, {"name": "hf:llama", "task": "causal-lm"},
                                      {"name": "hf:vit", "task": "image-cls"}]))
    trials, _ = expand(spec)
    assert {t.model_name: t.task for t in trials} == {"timm:test_vit": "vision", "hf:llama": "nlp", "hf:vit": "vision"}
    assert {t.seq_len for t in trials if t.task == "vision"} == {None}


def test_timm_models_take_their_input_size_from_their_pretrained_cfg():
    bundle = timm_models.build("test_vit")
    assert bundle.model.pretrained_cfg["input_size"] == (3, 160, 160)
    batch = bundle.make_batch(2, None, torch.Generator().manual_seed(0))
    assert tuple(batch.args[0].shape) == (2, 3, 160, 160) and batch.labels.max() < bundle.model.num_classes
    small = timm_models.build("test_vit", img_size=64).make_batch(1, None, torch.Generator())
    assert tuple(small.args[0].shape) == (1, 3, 64, 64)
    with pytest.raises(ValueError, match=r"timm has no model 'test_vitt' \(close: test_vit"):
        timm_models.build("test_vitt")


@pytest.mark.parametrize(("task", "kind", "logits_dims"), [("causal-lm", "clm", 3), ("masked-lm", "mlm", 3),
                                                      ("seq-cls", "cls", 2), ("seq2seq", "seq2seq", 3)])
def test_hf_tasks_build_their_model_inputs_and_loss(task, kind, logits_dims):
    model_type = {"masked-lm": "bert", "seq2seq": "t5"}.get(task, "llama")
    overrides = ({"vocab_size": 1024, "d_model": 64, "d_ff": 128, "d_kv": 32, "num_layers": 2, "num_heads": 2}
                 if model_type == "t5" else LLAMA_2L)
    bundle = hf_models.build(model_type, task, **overrides)
    batch = bundle.make_padded([5, 3], 8, torch.Generator().manual_seed(0))
    assert batch.kwargs["attention_mask"].tolist() == [[1] * 5 + [0] * 3, [1] * 3 + [0] * 5]
    assert ("decoder_input_ids" in batch.kwargs) == (task == "seq2seq") and batch.tokens == 8
    out = bundle.model(**batch.kwargs)
    assert out.logits.dim() == logits_dims
    loss = bundle.loss(out, batch)
    loss.backward()
    assert torch.isfinite(loss) and bundle.model.config.use_cache is False


def test_hf_image_classification_and_unknown_types():
    bundle = hf_models.build("vit", "image-cls", image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=1,
                             num_attention_heads=2, intermediate_size=64, num_labels=5)
    batch = bundle.make_batch(3, None, torch.Generator().manual_seed(0))
    assert tuple(batch.kwargs["pixel_values"].shape) == (3, 3, 32, 32)
    assert tuple(bundle.model(**batch.kwargs).logits.shape) == (3, 5)
    with pytest.raises(ValueError, match=r"transformers has no model type 'lama' \(close: .*llama"):
        hf_models.build("lama", "causal-lm")


# ---------------------------------------------------------------- the block finder


ARCHITECTURES = {
    "BertLayer": lambda: hf_models.build("bert", "masked-lm", **TINY_DECODER),
    "GPT2Block": lambda: hf_models.build("gpt2", "causal-lm", vocab_size=1024, n_embd=64, n_layer=4, n_head=2),
    "LlamaDecoderLayer": lambda: hf_models.build("llama", "causal-lm", **TINY_DECODER),
    "Qwen2DecoderLayer": lambda: hf_models.build("qwen2", "causal-lm", **TINY_DECODER),
    "ViTLayer": lambda: hf_models.build("vit", "image-cls", image_size=32, patch_size=8, hidden_size=64,
                                        num_hidden_layers=4, num_attention_heads=2, intermediate_size=128),
    "ConvNeXtBlock": lambda: timm_models.build("test_convnext"),
    "Block": lambda: timm_models.build("test_vit"),  # timm's ViT block class is called Block
}


@pytest.mark.parametrize("expected", list(ARCHITECTURES))
def test_the_block_finder_picks_each_architectures_layer_class(expected):
    model = ARCHITECTURES[expected]().model
    found = find_repeated_block(model)
    assert found.class_name == expected, found.note
    assert found.copies >= MIN_COPIES and found.param_share >= 0.5
    assert found.note.startswith(f"found: {expected}, {found.copies} copies")


def test_the_block_finder_refuses_a_model_without_a_repeated_block_and_says_why():
    found = find_repeated_block(lstm_tiny().model)
    assert found.class_name is None
    assert found.note == "none: no module class of LSTMClassifier has 4 or more copies of identical structure"
    small = find_repeated_block(hf_models.build("llama", "causal-lm", **{**TINY_DECODER, "vocab_size": 32000}).model)
    assert small.class_name is None and "LlamaDecoderLayer (4 copies), holds" in small.reason  # embeddings dominate
    two = find_repeated_block(hf_models.build("llama", "causal-lm", **LLAMA_2L).model)
    assert two.reason.endswith("identical structure (most: LlamaDecoderLayer, 2)")  # the layer, not its MLP


@pytest.mark.slow  # two real regional compiles
def test_a_regional_hf_trial_compiles_the_found_block_and_a_named_block_overrides_it(tmp_path):
    models = [{"name": "hf:llama", "task": "causal-lm", "kwargs": TINY_DECODER},
              {"name": "llama-mlp", "factory": "sweeper.zoo.hf_models:build",
               "kwargs": {"model_type": "llama", "task": "causal-lm", **TINY_DECODER}, "block": "LlamaMLP"}]
    trials, _ = expand(parse_spec(_plumbing("t", models, mode=["default"], scope=["regional"])))
    rows = {t.model_name: measure.run({"trial": t.to_dict(), "device": "cpu"}, tmp_path / f"{i}.json")
            for i, t in enumerate(trials)}
    found, named = rows["hf:llama"], rows["llama-mlp"]
    assert found["status"] == "ok", found["error"]
    assert (found["region_classes"], found["compiled_regions"]) == ("LlamaDecoderLayer", 4)
    assert found["block_choice"].startswith("found: LlamaDecoderLayer, 4 copies")
    assert named["status"] == "ok", named["error"]
    assert (named["region_classes"], named["block_choice"]) == ("LlamaMLP", "spec")


# ---------------------------------------------------------------- end to end, CLI and API


@pytest.mark.slow  # a real Ray sweep
def test_timm_and_hf_models_sweep_end_to_end(ray_local, tmp_path, capsys, caplog):
    caplog.set_level(logging.INFO, logger="sweeper")  # pytest holds the log: the script test sees stderr
    models = [{"name": "timm:test_vit"}, {"name": "timm:test_efficientnet"},
              {"name": "hf:llama", "task": "causal-lm", "kwargs": TINY_DECODER}]
    spec = _plumbing("libs", models, scope=["whole", "regional"])
    spec["resources"]["max_concurrent_trials"] = 1
    res = sweeper.sweep(spec, results=tmp_path / "r", report=False)
    rows = res.df.set_index(["model", "mode", "scope"])
    assert len(res) == 9 and not res.missing
    ok = rows.drop(index=("timm:test_efficientnet", "default", "regional"))
    assert ok["status"].eq("ok").all(), ok[["status", "error"]].to_string()
    failed = rows.loc[("timm:test_efficientnet", "default", "regional")]
    assert failed["status"] == "compile_error" and failed["block_choice"].startswith("none: no module class")
    assert rows.loc[("timm:test_vit", "default", "regional"), "region_classes"] == "Block"
    assert rows.loc[("hf:llama", "default", "whole"), "throughput_tokens_s"] > 0
    assert "9 trials (8 ok, 1 compile_error)" in res._repr_html_()
    out = capsys.readouterr()
    assert "failed trials: 1 of 9" in out.out and "baseline check:" in out.out
    assert "[9/9]" in caplog.text  # the progress lines, as the CLI prints them


@pytest.mark.slow  # a real Ray sweep
def test_results_answer_as_the_cli_does(ray_local, tmp_path, capsys):
    res = sweeper.sweep(tiny_spec("api"), results=tmp_path / "r")
    assert (tmp_path / "r" / "report.html").exists() and res.df["status"].eq("ok").all()
    capsys.readouterr()
    assert run_cli(["recommend", str(tmp_path / "r"), "--json"]) == 0
    assert res.recommend() == json.loads(capsys.readouterr().out)
    loaded = sweeper.load(tmp_path / "r")
    assert loaded.df["trial_id"].tolist() == res.df["trial_id"].tolist()
    assert set(loaded.compare(res)["verdict"]) == {"unchanged"}
    assert res.report(tmp_path / "again.html").stat().st_size > 10_000
    with pytest.raises(sweeper.SweeperError, match="--max-memory-gib must be positive"):
        res.recommend(max_memory_gib=0)
    with pytest.raises(sweeper.SweeperError, match=r"already holds sweep .*pass --resume"):
        sweeper.sweep(tiny_spec("api"), results=tmp_path / "r")
    assert run_cli(["run", _write(tmp_path, tiny_spec("api")), "--results", str(tmp_path / "r")]) == 2
    assert "already holds sweep" in capsys.readouterr().err


def _write(tmp_path, spec) -> str:
    from tests.helpers import write_spec

    return str(write_spec(tmp_path, spec))


@pytest.mark.slow  # one real inductor compile
def test_a_two_layer_llama_by_name_compiles_with_inductor(tmp_path):
    spec = _plumbing("t", [{"name": "hf:llama", "task": "causal-lm", "kwargs": LLAMA_2L}], mode=["default"])
    spec["measure"]["backend"] = "inductor"
    (trial,) = expand(parse_spec(spec))[0]
    row = measure.run({"trial": trial.to_dict(), "device": "cpu"}, tmp_path / "row.json")
    assert row["status"] == "ok", row["error"]
    assert row["accuracy_ok"] and row["compile_s"] > 0 and row["graphs"] >= 1 and row["graph_breaks"] == 0
    assert row["throughput_tokens_s"] == pytest.approx(row["throughput_items_s"] * 16)
