"""Input streams: length sources, bucketing, stream batches and masks, trial expansion, one real
stream measured in-process, the report's stream block and old result files."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from sweeper.measure import input_stream, witness
from sweeper.measure import process as measure
from sweeper.measure.workbench import Workbench
from sweeper.report import page as report
from sweeper.results.schema import COLUMN_NAMES, normalize_row
from sweeper.results.store import read_results, rows_to_table
from sweeper.run.state import make_row
from sweeper.spec import bucketing
from sweeper.spec import lengths as workloads
from sweeper.spec.bucketing import pad_length, parse
from sweeper.spec.sweep_spec import SpecError, parse_spec
from sweeper.spec.trials import expand
from sweeper.spec.workload import FileLengths, ImagesSpec, TextLengths, WorkloadSpec
from tests.helpers import REPO, run_cli, tiny_spec


def lengths_spec(**kw) -> object:
    return WorkloadSpec(lengths=kw).lengths


# ---------------------------------------------------------------- length sources

def test_fixed_uniform_normal_lognormal_are_seeded_and_clipped() -> None:
    assert workloads.draw_lengths(lengths_spec(kind="fixed", length=7), 5, seed=0) == [7] * 5
    uni = lengths_spec(kind="uniform", min_len=10, max_len=20)
    a = workloads.draw_lengths(uni, 500, seed=1)
    assert a == workloads.draw_lengths(uni, 500, seed=1)
    assert a != workloads.draw_lengths(uni, 500, seed=2)
    assert min(a) == 10 and max(a) == 20  # both ends inclusive
    normal = workloads.draw_lengths(lengths_spec(kind="normal", mean=50, std=40, min_len=30, max_len=60), 2000, 0)
    assert min(normal) == 30 and max(normal) == 60 and all(isinstance(x, int) for x in normal)
    ln = lengths_spec(kind="lognormal", mu=math.log(180), sigma=0.6, min_len=16, max_len=512)
    drawn = workloads.draw_lengths(ln, 4000, seed=0)
    assert min(drawn) >= 16 and max(drawn) == 512
    assert abs(np.median(drawn) - 180) < 10


def test_length_file_one_per_line_with_comments_sampled_or_replayed(tmp_path: Path) -> None:
    f = tmp_path / "lengths.txt"
    f.write_text("# header\n5\n\n900\n7\n")
    assert list(workloads.read_length_file(f)) == [5, 900, 7]
    replay = FileLengths(kind="file", path=str(f), order="replay", max_len=100)
    assert workloads.draw_lengths(replay, 7, seed=3) == [5, 100, 7, 5, 100, 7, 5]  # cycles, truncated
    sampled = workloads.draw_lengths(FileLengths(kind="file", path=str(f)), 50, seed=3)
    assert set(sampled) <= {5, 900, 7} and sampled == workloads.draw_lengths(
        FileLengths(kind="file", path=str(f)), 50, seed=3)
    f.write_text("5\n3.5\n")
    with pytest.raises(workloads.WorkloadError, match=r"entry 2 is 3\.5"):
        workloads.read_length_file(f)
    f.write_text("5\nabc\n")
    with pytest.raises(workloads.WorkloadError, match="'abc' is not a length"):
        workloads.read_length_file(f)


def test_length_columns_from_csv_and_parquet(tmp_path: Path) -> None:
    csv = tmp_path / "t.csv"
    csv.write_text("id,n_tokens\n1,12\n2,30\n")
    assert list(workloads.read_length_file(csv, "n_tokens")) == [12, 30]
    with pytest.raises(workloads.WorkloadError, match="columns: id, n_tokens"):
        workloads.read_length_file(csv, "len")
    with pytest.raises(workloads.WorkloadError, match="say which with 'column'"):
        workloads.read_length_file(csv)
    pqf = tmp_path / "t.parquet"
    pq.write_table(pa.table({"len": [3, 4, 5]}), pqf)
    assert list(workloads.read_length_file(pqf)) == [3, 4, 5]  # the only column
    pq.write_table(pa.table({"len": [3, None]}), pqf)
    with pytest.raises(workloads.WorkloadError, match="entry 2 is None"):
        workloads.read_length_file(pqf, "len")


def test_text_lengths_by_whitespace_and_by_a_local_tokenizer(tmp_path: Path) -> None:
    text = tmp_path / "corpus.txt"
    text.write_text("the cat sat\n\n  the cat sat on the mat  \nmat\n")
    assert list(workloads.text_lengths(text)) == [3, 6, 1]
    from transformers import BertTokenizer

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat"]))
    tok_dir = tmp_path / "tok"
    BertTokenizer(vocab_file=str(vocab)).save_pretrained(tok_dir)
    src = TextLengths(kind="text", path=str(text), tokenizer=str(tok_dir), order="replay")
    assert workloads.draw_lengths(src, 3, seed=0) == [5, 8, 3]  # words + [CLS] and [SEP]
    assert "tokenizer" in workloads.describe(src)
    with pytest.raises(workloads.WorkloadError, match="cannot load"):
        workloads.text_lengths(text, str(tmp_path))


def test_descriptions_name_the_parameters() -> None:
    ln = lengths_spec(kind="lognormal", mu=5.193, sigma=0.6, min_len=16, max_len=512)
    assert workloads.describe(ln) == "lognormal(mu=5.193, sigma=0.6; median 180) clipped to [16, 512]"
    assert workloads.describe(lengths_spec(kind="uniform", min_len=1, max_len=9)) == "uniform[1, 9]"


# ---------------------------------------------------------------- bucketing

@pytest.mark.parametrize(("text", "n", "expected"), [
    ("none", 37, 37), ("multiple:64", 1, 64), ("multiple:64", 64, 64), ("multiple:64", 65, 128),
    ("pow2", 1, 1), ("pow2", 17, 32), ("pow2", 512, 512), ("list:64,128,256", 100, 128),
    ("list:64,128,256", 256, 256), ("list:64,128,256", 300, 512), ("list:64,128,256", 600, 768),
])
def test_pad_length_per_policy(text: str, n: int, expected: int) -> None:
    assert pad_length(n, parse(text)) == expected


def test_cap_never_pads_past_the_model_but_never_truncates() -> None:
    assert pad_length(400, parse("pow2"), cap=512) == 512
    assert pad_length(500, parse("multiple:96"), cap=512) == 512  # 576 would overflow the positions
    assert pad_length(300, parse("list:64"), cap=256) == 300  # longer than the cap: its own length


def test_quantile_buckets_from_batch_maxima_with_repeated_values() -> None:
    maxima = [512] * 10 + [100, 200]
    assert bucketing.quantile_buckets(maxima, 4) == (512,)  # repeated quantiles merge
    assert bucketing.quantile_buckets([10, 20, 30, 40], 4) == (10, 20, 30, 40)
    assert bucketing.quantile_buckets([10, 20, 30, 40], 2) == (20, 40)
    assert bucketing.quantile_buckets([10, 10, 10], 8) == (10,)
    assert bucketing.plan([10, 15, 30, 40], "quantile:2") == [15, 15, 40, 40]  # buckets are observed maxima
    assert bucketing.plan([7], "quantile:3") == [7]


@pytest.mark.parametrize(("text", "message"), [
    ("multiple:0", "positive integer"), ("multiple", "write multiple:N"), ("list:", "bucket lengths"),
    ("list:128,64", "strictly increasing"), ("list:64,64", "strictly increasing"), ("quantile:x", "K must be"),
    ("pow2:2", "takes no argument"), ("buckets", "unknown bucketing"),
])
def test_bad_policies_are_refused(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse(text)


def test_token_plan_and_padding_waste() -> None:
    plan = workloads.token_plan([3, 5, 8, 2, 9, 9], 2, "multiple:4")
    assert plan == [([3, 5], 8), ([8, 2], 8), ([9, 9], 12)]
    real, computed = sum(sum(c) for c, _ in plan), sum(len(c) * pad for c, pad in plan)
    assert (real, computed) == (36, 56) and workloads.pad_waste(real, computed) == pytest.approx(1 - 36 / 56)
    assert workloads.pad_waste(8, 8) == 0.0  # [4, 4] padded to 4: no padding
    assert workloads.pad_waste(0, 0) is None and workloads.pad_waste(None, 64) is None  # empty; images


def test_image_epoch_has_a_partial_last_batch_and_seeded_resolutions() -> None:
    assert workloads.image_plan(ImagesSpec(dataset_size=10), 4, seed=0) == [[4, None], [4, None], [2, None]]
    plan = workloads.image_plan(ImagesSpec(dataset_size=100, resolutions=[32, 48]), 8, seed=5)
    assert [n for n, _ in plan] == [8] * 12 + [4]
    assert {s for _, s in plan} == {32, 48}
    assert plan == workloads.image_plan(ImagesSpec(dataset_size=100, resolutions=[32, 48]), 8, seed=5)


# ---------------------------------------------------------------- spec and trials

def stream_spec(**overrides) -> dict:
    spec = tiny_spec(workloads={"w": {"lengths": {"kind": "uniform", "min_len": 8, "max_len": 40},
                                      "num_batches": 6, "seed": 1, "steady_passes": 2}})
    spec["axes"] = {**spec["axes"], "batch_size": [2]}
    for key, value in overrides.items():
        spec[key] = {**spec.get(key, {}), **value} if isinstance(value, dict) else value
    return spec


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


# ---------------------------------------------------------------- streams on the device

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


# ---------------------------------------------------------------- one real stream, in-process

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


# ---------------------------------------------------------------- rows, report

def stream_rows() -> list[dict]:
    base = {"sweep_id": "s1", "sweep_name": "s", "model": "bert-base", "task": "nlp", "backend": "inductor",
            "batch_size": 8, "phase": "infer", "precision": "bf16", "device_name": "H200", "status": "ok",
            "workload": "lognormal180", "length_source": "lognormal(mu=5.193, sigma=0.6)", "stream_batches": 64,
            "accuracy_ok": True, "peak_mem_gib": 1.0, "eager_peak_mem_gib": 1.0}
    waste = {"none": 0.49, "pow2": 0.58, "multiple:64": 0.52}
    out = []
    for policy, w in waste.items():
        out.append({**base, "mode": "eager", "bucketing": policy, "pad_waste": w, "stream_s": 2.0 + w,
                    "eager_stream_s": 2.0 + w, "real_tokens_per_s": 5e4, "throughput_items_s": 500.0, "graphs": 0})
        for dyn, s, graphs in ((None, 9.0, 2), (True, 7.0, 1), (False, 30.0 if policy == "none" else 6.0, 8)):
            out.append({**base, "mode": "default", "dynamic": dyn, "bucketing": policy, "pad_waste": w,
                        "stream_s": s + w, "eager_stream_s": 2.0 + w, "real_tokens_per_s": 9e4 - graphs,
                        "throughput_items_s": 900.0, "graphs": graphs, "recompiles": graphs - 1,
                        "stream_compile_s": s + w - 0.6,
                        "compile_s_per_shape": 1.0, "stream_break_even_batches": 12.0,
                        "fell_back_to_eager": dyn is False and policy == "none"})
    out.append({**base, "mode": "default", "dynamic": True, "bucketing": "pow2", "mark_dynamic": False,
                "status": "inaccurate", "stream_s": 1.0, "accuracy_ok": False, "eager_stream_s": 2.5})
    for i, r in enumerate(out):
        r["trial_id"] = f"t{i}"
    return out


def test_report_stream_block_recommends_and_flags_fallback() -> None:
    from sweeper.analysis import frames as rows
    from sweeper.analysis.recommend import Limits, recommend_context

    df = pd.DataFrame(stream_rows())
    one_pass = recommend_context(rows.prepare(df), Limits(iterations=64)).best
    assert (one_pass.mode, one_pass.setting) == ("eager", "eager, batch 8")  # one pass: compiles never pay back
    html = report.build_html(df)
    assert "Input stream lognormal180" in html and "<b>One stream of 64 batches</b>, every compile paid" in html
    assert "eager, batch 8" in html.split("One stream of 64 batches")[1].split("</p>")[0]
    assert "FELL BACK TO EAGER: 1 setting</b>" in html
    assert "pow2 \\u00b7 pad 58%" in html  # a bar label, in the figure JSON


def test_stream_settings_that_fell_back_are_never_recommended() -> None:
    from sweeper.analysis import frames as rows
    from sweeper.analysis.recommend import recommend_context

    data = [{**r, "throughput_items_s": 5000.0} if r.get("fell_back_to_eager") else r for r in stream_rows()]
    rec = recommend_context(rows.prepare(pd.DataFrame(data)))
    assert rec.best.throughput_items_s == 900.0  # the faster row fell back to eager
    assert any(e.kind == "recompile limit" for e in rec.excluded)


@pytest.mark.slow
def test_stream_block_renders_in_a_browser(tmp_path: Path, run_chromium) -> None:
    import html
    import json
    import re

    path = report.write_report(pd.DataFrame(stream_rows()), tmp_path / "report.html")
    out = run_chromium("--dump-dom", path.as_uri())
    check = json.loads(html.unescape(re.search(r'<pre id="sweeper-selfcheck">(.*?)</pre>', out.stdout, re.S).group(1)))
    assert check["ok"] is True and check["errors"] == [], check
    stream_plots = [p for p in check["plots"] if "stream" in p["title"] or "graphs compiled" in p["title"]]
    assert len(stream_plots) == 2 and all(p["rendered"] == p["expected"] == 12 for p in stream_plots)


def test_old_result_files_without_stream_columns_still_read(tmp_path: Path) -> None:
    old = pa.table({"sweep_id": ["s"], "trial_id": ["t"], "status": ["ok"], "model": ["m"]})
    pq.write_table(old, tmp_path / "old.parquet")
    df = read_results([tmp_path])
    assert set(COLUMN_NAMES) <= set(df.columns)
    assert df["bucketing"].isna().all() and df["fell_back_to_eager"].isna().all()
    assert "Input stream" not in report.build_html(df)
