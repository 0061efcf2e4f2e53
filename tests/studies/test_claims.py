"""The published-claims study: its zoo models, its specs, the per-epoch columns, and the docs
page (docs/claims.md) generated from its rows (checked against a synthetic results fixture until the GPU rows
are committed, and against the committed rows after)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from studies.claims import tables as claims
from sweeper.measure import input_stream
from sweeper.measure import process as measure
from sweeper.measure.epoch import epoch_columns, epoch_items
from sweeper.results.store import write_rows
from sweeper.spec.sweep_spec import load_spec, parse_spec
from sweeper.spec.trials import expand
from tests.helpers import REPO, tiny_spec

SPECS = sorted((REPO / "studies" / "claims").glob("*.yaml"))


def test_vit_tiny_is_vit_ti_16_at_224() -> None:
    from sweeper.zoo.vision import vit_ti_16

    model = vit_ti_16().model
    assert (model.image_size, model.patch_size, model.hidden_dim, model.mlp_dim) == (224, 16, 192, 768)
    assert len(model.encoder.layers) == 12 and model.encoder.layers[0].self_attention.num_heads == 3
    assert 5.6e6 < sum(p.numel() for p in model.parameters()) < 5.8e6  # ViT-Ti/16's 5.7M


def test_lstm_padding_does_not_change_the_logits() -> None:
    from sweeper.zoo.recurrent import lstm_tiny

    bundle = lstm_tiny()
    model = bundle.model.eval()
    short = bundle.make_padded([5, 9], 9, torch.Generator().manual_seed(0))
    long = bundle.make_padded([5, 9], 32, torch.Generator().manual_seed(0))
    long.kwargs["input_ids"][:, :9] = short.kwargs["input_ids"]
    with torch.no_grad():
        torch.testing.assert_close(model(**short.kwargs), model(**long.kwargs))


def _lstm_trials(**overrides):
    spec = tiny_spec(models=[{"name": "lstm-tiny"}], **overrides)
    return {t.mode: t for t in expand(parse_spec(spec))[0]}


def test_dynamo_runs_the_lstm_eager_and_the_row_says_so(tmp_path) -> None:
    """With torch's default dynamo settings the LSTM's forward is not traced at all: dynamo gives
    up on the frame at nn.LSTM and runs it eager. The health columns count it, the notes say it."""
    trial = _lstm_trials(measure={"backend": "eager"})["default"]
    row = measure.run({"trial": trial.to_dict(), "device": "cpu"}, tmp_path / "row.json")
    assert row["status"] == "ok", row["error"]
    assert row["graphs"] == 0 and row["graph_breaks"] == 1
    assert "frame ran eager: Attempted to wrap RNN, GRU, or LSTM" in row["graph_break_reasons"]
    assert row["notes"].startswith("NOTHING COMPILED: dynamo skipped 1 frame(s)")


def test_lstm_token_stream_and_its_epoch(tmp_path) -> None:
    trial = _lstm_trials(workloads={"w": {"lengths": {"kind": "uniform", "min_len": 4, "max_len": 24},
                                          "num_batches": 3}})["eager"]
    stream = input_stream.build_stream(trial, __import__("sweeper.zoo.recurrent", fromlist=["x"]).lstm_tiny(),
                                  torch.device("cpu"))
    assert stream.n_shapes >= 2 and stream.items == 6
    row = measure.run({"trial": trial.to_dict(), "device": "cpu"}, tmp_path / "row.json")
    assert row["status"] == "ok", row["error"]
    assert row["epoch_items"] == 6 and row["epoch_s"] == pytest.approx(6 / row["throughput_items_s"])
    assert row["epoch_s_with_compile"] == row["epoch_s"]  # eager: nothing compiled


def test_epoch_columns_compile_excluded_and_included() -> None:
    trials = {t.mode: t for t in expand(parse_spec(tiny_spec(measure={"epoch_sequences": 1000})))[0]}
    row = {"throughput_items_s": 200.0, "eager_throughput_items_s": 100.0, "compile_s": 7.0}
    assert epoch_columns(trials["default"], row) == {"epoch_items": 1000, "epoch_s": 5.0,
                                                     "epoch_s_with_compile": 12.0, "eager_epoch_s": 10.0}
    assert epoch_columns(trials["default"], {"throughput_items_s": None}) == {}  # failed before timing
    vision = expand(parse_spec(tiny_spec(models=[{"name": "resnet18-tiny"}], measure={"epoch_sequences": 9})))[0][0]
    assert epoch_items(vision) is None  # a sequence count says nothing of an image epoch


def test_the_study_specs() -> None:
    trials = [t for spec in SPECS for t in expand(load_spec(spec))[0]]
    assert len(trials) == 22 and {t.phase for t in trials} == {"train"} and {t.batch_size for t in trials} == {64}
    assert {t.model_name for t in trials} == {"resnet18", "vit_tiny", "lstm", "vit_b_16"}
    assert {t.mode for t in trials} == {"eager", "default", "reduce-overhead", "max-autotune-no-cudagraphs"}
    assert {t.precision for t in trials} == {"fp32", "bf16"}
    assert all(t.measure.gpu_util and not t.measure.warm_compile for t in trials)
    assert all(epoch_items(t) == (25000 if t.model_name == "lstm" else 50000) for t in trials)


def _row(model: str, mode: str, precision: str, speedup: float, **extra) -> dict:
    eager = {"resnet18": 2000.0, "vit_tiny": 1500.0, "lstm": 900.0, "vit_b_16": 700.0}[model]
    n = 25000 if model == "lstm" else 50000
    tput = eager * speedup
    row = {"sweep_id": "s", "trial_id": f"{model}-{mode}-{precision}", "model": model, "mode": mode,
           "precision": precision, "phase": "train", "batch_size": 64, "status": "ok", "device_name": "NVIDIA H200",
           "throughput_items_s": tput, "eager_throughput_items_s": eager, "speedup_vs_eager": speedup,
           "speedup_ci_low": speedup * 0.98, "speedup_ci_high": speedup * 1.02,
           "compile_s": None if mode == "eager" else 30.0, "epoch_items": n, "epoch_s": n / tput,
           "eager_epoch_s": n / eager, "epoch_s_with_compile": n / tput + (0 if mode == "eager" else 30.0),
           "gpu_util_pct": 60 + 20 * (speedup > 1), "eager_gpu_util_pct": 60.0, "gpu_mem_util_pct": 30.0,
           "eager_gpu_mem_util_pct": 25.0, "gpu_power_w": 400.0, "eager_gpu_power_w": 350.0,
           "graphs": 0 if mode == "eager" else 1, "graph_breaks": 0}
    return {**row, **extra}


@pytest.fixture
def results(tmp_path: Path) -> Path:
    """A synthetic stand-in for the study's results directory: two sweeps' files."""
    rows = [_row(m, mode, p, 1.0 if mode == "eager" else s)
            for m, s in (("resnet18", 1.6), ("vit_tiny", 1.3)) for p in ("fp32", "bf16")
            for mode in ("eager", "default", "reduce-overhead")]
    rows.append(_row("lstm", "default", "bf16", 1.01, graph_breaks=1, notes="NOTHING COMPILED: dynamo skipped"))
    rows.append(_row("vit_b_16", "reduce-overhead", "fp32", 1.2))
    failed = dict.fromkeys(["throughput_items_s", "speedup_vs_eager", "epoch_s", "epoch_s_with_compile", "graphs"])
    rows.append(_row("resnet18", "max-autotune-no-cudagraphs", "bf16", 1.0, status="timeout",
                     error="timeout: killed after 900 s", **failed))
    for sweep, part in (("train", rows[:-3]), ("other", rows[-3:])):
        (tmp_path / sweep).mkdir()
        write_rows(tmp_path / sweep / "results.parquet", part)
    return tmp_path


def test_the_section_is_made_from_the_rows_and_a_changed_row_shows(results: Path) -> None:
    body = claims.section(claims.load(results))
    page = claims.replace(f"# x\n{claims.START}\n{claims.PENDING}\n{claims.END}\nrest\n", body)
    assert claims.extract(page) == body and page.endswith("rest\n")
    # the reported interval: at least +-4%
    assert ("| ResNet-18 (ImageNet) | 30.2 -> 11.8 (2.56x) | bf16 | 25 | 25 | default | 15.6 | 45.6 "
            "| 1.60x [1.54-1.66] | 0.62 |") in body
    assert "| eager ms/step | ~85 | 91.4 |" in body  # 64 / 700 items/s
    assert "timeout: killed after 900 s" in body and "NOTHING COMPILED" in body
    df = claims.load(results)
    df.loc[df["trial_id"] == "vit_tiny-default-fp32", "gpu_util_pct"] = 99.0
    assert claims.section(df) != claims.extract(page)


def test_the_sampling_check_is_a_table_of_its_own_figures(results: Path) -> None:
    check = [{"trial": "resnet18 eager bs64 train fp32", "windows": 30, "step_ms_sampled": 13.7402,
              "step_ms_plain": 13.7444, "change_pct": -0.0309, "change_pct_ci": [-0.165, 0.123], "readings": 120,
              "gpu_util_pct": 99.6}]
    check.append({**check[0], "trial": "vit_tiny eager bs64 train bf16", "reading_us_median": 61.2,
                  "bound_pct": 0.0612})
    (results / "util_overhead.json").write_text(json.dumps(check))
    body = claims.section(claims.load(results), claims.load_overhead(results))
    assert "| resnet18 eager bs64 train fp32 | 13.7 | 13.7 | -0.03% [-0.17 to +0.12] | 30 | 120 | 100 | - |" in body
    assert ("| vit_tiny eager bs64 train bf16 | 13.7 | 13.7 | -0.03% [-0.17 to +0.12] | 30 | 120 | 100 "
            "| 61 us, <= 0.06% |") in body
    assert claims.load_overhead(results / "train") is None


def test_the_claims_page_matches_the_committed_rows() -> None:
    page = claims.PAGE.read_text()
    expected = claims.section(claims.load(), claims.load_overhead())
    assert claims.extract(page) == expected, "run: python -m studies.claims.tables --write"


def test_a_speedup_over_a_drifted_baseline_says_so(tmp_path: Path) -> None:
    """The in-trial eager ran 30% slower than the eager trial of its context: the table flags the
    speedup and shows the interval widened to the eager trial's figure, as the report does."""
    slow_eager = 2000.0 / 1.3
    rows = [_row("resnet18", "eager", "fp32", 1.0),
            _row("resnet18", "reduce-overhead", "fp32", 2.6, eager_throughput_items_s=slow_eager,
                 throughput_items_s=slow_eager * 2.6)]
    write_rows(tmp_path / "results.parquet", rows)
    body = claims.section(claims.load(tmp_path))
    line = next(x for x in body.splitlines() if x.startswith("| resnet18 | fp32 | reduce-overhead |"))
    assert "2.60x [2.00-2.70] drifted" in line  # 2.00x: the same compiled throughput over the eager trial
