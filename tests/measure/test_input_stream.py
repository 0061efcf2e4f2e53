"""A trial's input stream on its device: padded batches with masks, outputs unchanged at real
positions, the varying dimension marked dynamic, image streams, and one real stream measured."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from sweeper.measure import input_stream, witness
from sweeper.measure import process as measure
from sweeper.measure.workbench import Workbench
from sweeper.results.schema import normalize_row
from sweeper.results.store import rows_to_table
from sweeper.run.state import make_row
from sweeper.spec import lengths as workloads
from sweeper.spec.sweep_spec import parse_spec
from sweeper.spec.trials import expand
from tests.helpers import stream_spec, tiny_spec


def _stream_trial(**axes):
    spec = stream_spec(axes=axes)
    return next(t for t in expand(parse_spec(spec))[0] if t.mode != "eager")


def test_stream_batches_are_padded_with_masks_and_count_real_tokens() -> None:
    from sweeper.zoo.nlp import bert_tiny

    trial = _stream_trial(bucketing=["multiple:16"])
    stream = input_stream.build_stream(trial, bert_tiny(), torch.device("cpu"))
    lengths = trial.workload.lengths
    assert len(stream.batches) == 6 and stream.items == 12
    assert stream.real_tokens == sum(lengths)
    for sb, chunk in zip(stream.batches, [lengths[i:i + 2] for i in range(0, 12, 2)], strict=True):
        ids, mask = sb.batch.kwargs["input_ids"], sb.batch.kwargs["attention_mask"]
        assert ids.shape[1] % 16 == 0 and ids.shape[1] >= max(chunk)
        assert mask.sum(1).tolist() == chunk and (ids[mask == 0] == 0).all()
    padded = sum(sb.padded_tokens for sb in stream.batches)
    assert stream.pad_waste == pytest.approx(1 - sum(lengths) / padded) == workloads.pad_waste(sum(lengths), padded)
    assert stream.n_shapes == len({sb.batch.kwargs["input_ids"].shape for sb in stream.batches})


@pytest.mark.parametrize("builder", ["bert_tiny", "gpt2_tiny"])
def test_padding_does_not_change_outputs_at_real_positions(builder: str) -> None:
    from sweeper.zoo import nlp

    bundle = getattr(nlp, builder)()
    model = bundle.model.eval()
    short = bundle.make_padded([5, 9], 9, torch.Generator().manual_seed(0))
    long = bundle.make_padded([5, 9], 32, torch.Generator().manual_seed(0))
    long.kwargs["input_ids"][:, :9] = short.kwargs["input_ids"]  # same real tokens, more padding
    with torch.no_grad():
        a = input_stream.real_positions(model(**short.kwargs).logits, short)
        b = input_stream.real_positions(model(**long.kwargs).logits, long)
    torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_mark_dynamic_marks_only_the_varying_dimension() -> None:
    from sweeper.zoo.nlp import bert_tiny

    trial = _stream_trial(mark_dynamic=[True])
    assert trial.mark_dynamic
    stream = input_stream.build_stream(trial, bert_tiny(), torch.device("cpu"))
    assert input_stream.varying_dims(stream) == {"input_ids": [1], "attention_mask": [1]}
    assert all(getattr(sb.batch.kwargs["input_ids"], "_dynamo_dynamic_indices", set()) == {1}
               for sb in stream.batches)


def test_image_stream_partial_batch_and_resolutions() -> None:
    from sweeper.zoo.vision import resnet18_tiny

    spec = tiny_spec(models=[{"name": "resnet18-tiny"}], axes={"batch_size": [4]},
                     workloads={"e": {"images": {"dataset_size": 10, "resolutions": [32, 40]}, "seed": 2}})
    trial = next(t for t in expand(parse_spec(spec))[0] if t.mode == "eager")
    stream = input_stream.build_stream(trial, resnet18_tiny(), torch.device("cpu"))
    shapes = [sb.batch.args[0].shape for sb in stream.batches]
    assert [s[0] for s in shapes] == [4, 4, 2] and {s[2] for s in shapes} <= {32, 40}
    assert stream.pad_waste is None and stream.real_tokens is None


@pytest.mark.slow
def test_stream_without_bucketing_recompiles_and_falls_back_with_bucketing_one_graph(tmp_path: Path) -> None:
    spec = stream_spec(axes={"dynamic": [False], "bucketing": ["none", "list:48"]},
                       measure={"recompile_limit": 2})
    trials = {t.bucketing: t for t in expand(parse_spec(spec))[0] if t.mode != "eager"}
    raw = measure.run({"trial": trials["none"].to_dict(), "device": "cpu"}, tmp_path / "a.json")
    bucketed = measure.run({"trial": trials["list:48"].to_dict(), "device": "cpu"}, tmp_path / "b.json")
    for row in (raw, bucketed):
        assert row["status"] == "ok", row["error"]
        assert row["stream_s"] > 0 and row["eager_stream_s"] > 0 and row["real_tokens_per_s"] > 0
        assert row["eager_real_tokens_per_s"] > 0 and row["stream_batches"] == 6
        assert row["accuracy_ok"] and row["rel_err"] < 1e-4 and row["accuracy_shapes"] == row["stream_shapes"]
        assert row["stream_s"] >= row["stream_compile_s"] > 0 and row["compile_s_per_shape"] > 0
        assert row["workload"] == "w" and row["length_source"] == "uniform[8, 40]"
        assert row["stream_break_even_batches"] >= 0
    assert raw["stream_shapes"] > 2 and bucketed["stream_shapes"] == 1
    assert raw["graphs"] == 2 and raw["recompiles"] >= 2 and raw["fell_back_to_eager"] is True
    assert "FELL BACK TO EAGER" in raw["notes"]
    assert bucketed["graphs"] == 1 and bucketed["recompiles"] == 0 and bucketed["fell_back_to_eager"] is False
    assert bucketed["pad_waste"] > raw["pad_waste"]
    tokens = sum(trials["none"].workload.lengths)
    assert raw["real_tokens_per_s"] == pytest.approx(raw["throughput_items_s"] * tokens / 12)
    row = make_row("s", "s", trials["none"], raw)  # every measured key is a schema column
    assert normalize_row(row)["bucketing"] == "none" and rows_to_table([row]).num_rows == 1


def test_stream_steady_passes_alternate_eager_and_compiled(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(witness, "HOST_FILE", tmp_path / "fast_ms")  # not the host's: other runs lower it
    spec = stream_spec(axes={"dynamic": [True], "bucketing": ["list:48"]})
    (trial,) = [t for t in expand(parse_spec(spec))[0] if t.mode != "eager"]
    steps: list[str] = []
    real_step = Workbench.step

    def spy(wb, module):
        steps.append("eager" if module is wb.model else "compiled")
        return real_step(wb, module)

    monkeypatch.setattr(Workbench, "step", spy)
    monkeypatch.setattr(witness, "probe_ms", lambda: 1.0)  # a host at one speed: no extra passes
    row = measure.run({"trial": trial.to_dict(), "device": "cpu"}, tmp_path / "row.json")
    assert row["status"] == "ok", row["error"]
    n, size = trial.workload.steady_passes, row["stream_batches"]
    assert len(steps) % size == 0
    seen = [steps[i] for i in range(0, len(steps), size)]  # one entry per pass over the stream
    assert all(len(set(steps[i:i + size])) == 1 for i in range(0, len(steps), size))
    # eager first and steady passes (the fallback numbers), the compiled first pass, then turns
    assert seen == ["eager"] * (1 + n) + ["compiled"] + ["eager", "compiled"] * n
    assert row["eager_real_tokens_per_s"] > 0 and row["timed_windows"] == n
    assert row["speedup_vs_eager"] == pytest.approx(row["throughput_items_s"] / row["eager_throughput_items_s"])
