"""Phase generate for real on the CPU: gpt2-tiny's greedy `generate`, eager and compiled, timed by
the measuring process; its axes, its trial ids, and `recommend --workload RxP+N` over its rows."""

from __future__ import annotations

import json

import pytest
import torch

from sweeper.analysis import generate_workload
from sweeper.analysis.generate_workload import GenerateWorkload, GenerateWorkloadError
from sweeper.measure import process as measure
from sweeper.measure.health import watch_compiles
from sweeper.results.store import write_rows
from sweeper.spec.sweep_spec import parse_spec
from sweeper.spec.trials import expand
from tests.helpers import run_cli, tiny_spec

PROMPT, NEW = 16, 8


def _spec(modes: list[str], backend: str = "aot_eager", caches: tuple[str, ...] = ("static",), **axes) -> dict:
    return tiny_spec(models=[{"name": "gpt2-tiny"}],
                     axes={"mode": modes, "dynamic": [None], "batch_size": [2], "seq_len": [PROMPT],
                           "phase": ["generate"], "new_tokens": [NEW], "cache": list(caches), **axes},
                     measure={"backend": backend, "windows": 5, "min_window_iters": 1, "warmup_iters": 1})


def _run(trial, tmp_path) -> dict:
    row = measure.run({"trial": trial.to_dict(), "device": "cpu"}, tmp_path / f"{trial.trial_id}.json")
    config = {k: getattr(trial, k) for k in ("trial_id", "mode", "dynamic", "batch_size", "seq_len", "phase",
                                             "precision", "task")}
    return {**row, **config, "model": trial.model_name, "backend": trial.measure.backend}


def _rows(tmp_path_factory, spec: dict) -> dict[str, dict]:
    trials, dropped = expand(parse_spec(spec))
    assert not dropped
    tmp = tmp_path_factory.mktemp("generate")
    return {f"{t.mode} {t.cache}": _run(t, tmp) for t in trials}


@pytest.fixture(scope="module")
def plumbing_rows(tmp_path_factory) -> dict[str, dict]:
    """An eager row and a compiled one (aot_eager: dynamo and AOT autograd, no inductor), static cache."""
    return _rows(tmp_path_factory, _spec(["eager", "default"]))


def test_generate_axes_leave_the_other_phases_ids_alone():
    plain = tiny_spec(models=[{"name": "gpt2-tiny"}])
    with_axes = tiny_spec(models=[{"name": "gpt2-tiny"}], axes={**plain["axes"], "new_tokens": [8, 16],
                                                                "cache": ["static", "dynamic"]})
    ids = [t.trial_id for t in expand(parse_spec(plain))[0]]
    assert [t.trial_id for t in expand(parse_spec(with_axes))[0]] == ids
    assert all(t.new_tokens is None and t.cache is None for t in expand(parse_spec(with_axes))[0])


def test_generate_trials_carry_new_tokens_and_cache_in_their_ids_and_labels():
    trials, _ = expand(parse_spec(_spec(["eager", "default"], caches=("static", "dynamic"), new_tokens=[8, 16])))
    assert len({t.trial_id for t in trials}) == len(trials) == 8
    assert {(t.new_tokens, t.cache) for t in trials} == {(n, c) for n in (8, 16) for c in ("static", "dynamic")}
    assert "seq16+8 static generate" in trials[0].label


def test_generate_is_dropped_for_a_model_that_cannot_decode_and_past_its_positions():
    spec = _spec(["eager"], seq_len=[PROMPT, 1020])
    spec["models"] = [{"name": "gpt2-tiny"}, {"name": "bert-tiny"}]
    trials, dropped = expand(parse_spec(spec))
    assert [(t.model_name, t.seq_len) for t in trials] == [("gpt2-tiny", PROMPT)]
    reasons = " | ".join(d.reason for d in dropped)
    assert "needs a causal language model (bert-tiny" in reasons
    assert "prompt 1020 + 8 new tokens exceed gpt2-tiny's 1024 positions" in reasons


def test_a_cuda_graph_mode_with_a_dynamic_cache_is_dropped_with_its_reason():
    """On the GPU it fails mid-decode (the cache's concatenated tensors are CUDA-graph outputs that
    the next replay overwrites): the grid says so instead of spending a trial on it."""
    trials, dropped = expand(parse_spec(_spec(["eager", "default", "reduce-overhead", "max-autotune"], "inductor",
                                              caches=("static", "dynamic"))))
    assert sorted((t.mode, t.cache) for t in trials) == sorted(
        [("eager", "static"), ("eager", "dynamic"), ("default", "static"), ("default", "dynamic"),
         ("reduce-overhead", "static"), ("max-autotune", "static")])
    assert len(dropped) == 2
    assert all("needs cache 'static' in phase generate" in d.reason for d in dropped)


def test_transformers_own_compile_is_seen_by_the_frame_count():
    """The check that verifies the eager baseline would see what transformers compiles by itself."""
    import transformers as tf

    model = tf.GPT2LMHeadModel(tf.GPT2Config(vocab_size=128, n_embd=32, n_layer=1, n_head=2)).eval()
    ids = torch.randint(3, 128, (1, 8))
    cfg = tf.CompileConfig(backend="eager", mode=None)
    cfg._compile_all_devices = True  # what it does on a GPU unasked
    kw = {"max_new_tokens": 3, "do_sample": False, "cache_implementation": "static", "pad_token_id": 0}
    from torch._dynamo.utils import counters

    with watch_compiles():
        model.generate(ids, disable_compile=True, compile_config=cfg, **kw)
        assert counters["frames"]["ok"] == 0
        model.generate(ids, compile_config=cfg, **kw)
        assert counters["frames"]["ok"] >= 1
    torch._dynamo.reset()


def test_eager_generate_row_is_a_verified_uncompiled_baseline(plumbing_rows):
    row = plumbing_rows["eager static"]
    assert row["status"] == "ok", row["error"]
    assert row["eager_disable_compile"] is True and row["eager_compiled_frames"] == 0 and row["graphs"] == 0
    assert (row["new_tokens"], row["cache"], row.get("generate_compile_path")) == (NEW, "static", None)
    assert row["ttft_ms"] > 0 and row["decode_tokens_per_s"] > 0 and row["generate_s"] > row["ttft_ms"] / 1e3
    assert row["decode_token_p50_ms"] <= row["decode_token_p90_ms"] <= row["decode_token_p99_ms"]
    assert row["throughput_tokens_s"] == pytest.approx(row["throughput_items_s"] * NEW)
    assert row["decode_speedup_vs_eager"] == 1.0 and row["tokens_match_rate"] == 1.0
    assert row["timed_windows"] >= 5 and json.loads(row["windows_json"])["eager_s_per_iter"]


def test_compiled_generate_row_goes_through_transformers_compile_config_and_matches_eager(plumbing_rows):
    row = plumbing_rows["default static"]
    assert row["status"] == "ok", row["error"]
    assert row["generate_compile_path"] == "compile_config" and row["graphs"] >= 1
    assert row["eager_compiled_frames"] == 0  # its own eager arm, before the compile
    assert row["tokens_match_rate"] == 1.0 and row["accuracy_ok"] is True
    assert row["compiled_err_vs_fp64"] is not None and row["accuracy_reference"] == "fp64_device"
    assert 0 <= row["compile_s"] <= row["first_call_s"]
    assert row["decode_speedup_ci_low"] <= row["decode_speedup_ci_high"]
    assert row["decode_speedup_vs_eager"] == pytest.approx(row["decode_tokens_per_s"]
                                                           / row["eager_decode_tokens_per_s"])
    assert row["ttft_ms"] > 0 and row["eager_ttft_ms"] > 0 and row["eager_decode_tokens_per_s"] > 0


def test_recommend_generate_workload_from_the_cli(plumbing_rows, tmp_path, capsys):
    path = tmp_path / "results.parquet"
    write_rows(path, list(plumbing_rows.values()))
    assert run_cli(["recommend", str(path), "--workload", f"10x{PROMPT}+{2 * NEW}"]) == 0
    out = capsys.readouterr().out
    assert "workload: 10 requests of 16 prompt tokens and 16 new tokens" in out
    assert "eager cache=static batch 2" in out and "default dynamic=None cache=static batch 2" in out
    assert "decode steps timed over 8 new tokens" in out
    assert run_cli(["recommend", str(path), "--workload", "10x99+8"]) == 2
    assert "prompts measured: 16" in capsys.readouterr().err


def test_generate_workload_total_counts_compile_first_token_and_decode(plumbing_rows):
    w = GenerateWorkload.parse("5x16+8")
    assert w == GenerateWorkload(5, 16, 8) and GenerateWorkload.parse("stream-a") is None
    row = plumbing_rows["default static"]
    served = generate_workload.serve(row, w)
    step_s = 2 / row["decode_tokens_per_s"]
    assert served.calls == 3
    assert served.total_s == pytest.approx(row["compile_s"] + 3 * (row["ttft_ms"] / 1e3 + 7 * step_s))
    with pytest.raises(GenerateWorkloadError, match="at least 1"):
        GenerateWorkload.parse("0x16+8")


@pytest.mark.slow
def test_inductor_default_and_reduce_overhead_rows_on_cpu(tmp_path_factory):
    """Inductor on the CPU: both modes run; reduce-overhead's CUDA graphs are skipped off the GPU."""
    rows = _rows(tmp_path_factory, _spec(["default", "reduce-overhead"], backend="inductor"))
    for key, row in rows.items():
        assert row["status"] == "ok", (key, row["error"])
        assert row["tokens_match_rate"] == 1.0 and row["accuracy_ok"] is True, key
        assert row["eager_compiled_frames"] == 0 and row["graphs"] >= 1, key
    assert rows["reduce-overhead static"]["cudagraph_skips"] >= 1


TINY_LLAMA = {"name": "hf:llama", "task": "causal-lm",
              "kwargs": {"vocab_size": 1024, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
                         "num_key_value_heads": 1, "intermediate_size": 128, "max_position_embeddings": 64}}
"""A two-layer Llama by its Hugging Face name (grouped-query attention, rotary positions)."""


@pytest.mark.slow
def test_a_tiny_llama_generates_eager_default_and_reduce_overhead_rows_on_cpu(tmp_path_factory):
    """The any-model path into phase generate: an hf: causal LM decodes through transformers'
    compile_config under inductor, its eager baseline verified uncompiled, the tokens equal."""
    spec = _spec(["eager", "default", "reduce-overhead"], backend="inductor")
    spec["models"] = [TINY_LLAMA]
    rows = _rows(tmp_path_factory, spec)
    assert set(rows) == {"eager static", "default static", "reduce-overhead static"}
    for key, row in rows.items():
        assert row["status"] == "ok", (key, row["error"])
        assert row["eager_compiled_frames"] == 0 and row["eager_disable_compile"] is True, key
        assert row["decode_tokens_per_s"] > 0 and row["ttft_ms"] > 0, key
    for key in ("default static", "reduce-overhead static"):
        row = rows[key]
        assert row["generate_compile_path"] == "compile_config" and row["graphs"] >= 1, key
        assert row["tokens_match_rate"] == 1.0 and row["accuracy_ok"] is True, key
    assert rows["reduce-overhead static"]["cudagraph_skips"] >= 1  # no CUDA graphs off the GPU


@pytest.mark.slow
def test_dynamic_cache_compiles_the_forward_and_matches_eager(tmp_path_factory):
    rows = _rows(tmp_path_factory, _spec(["default"], caches=("dynamic",)))
    row = rows["default dynamic"]
    assert row["status"] == "ok", row["error"]
    assert row["generate_compile_path"] == "forward" and row["graphs"] >= 1
    assert row["tokens_match_rate"] == 1.0 and row["accuracy_ok"] is True


@pytest.mark.slow  # a real Ray sweep
def test_generate_sweep_writes_rows_report_and_recommendation(ray_local, tmp_path, capsys):
    from sweeper.results.store import read_results
    from tests.helpers import write_spec

    spec = _spec(["eager", "default"])
    spec["measure"]["warm_compile"] = True
    out = tmp_path / "out"
    assert run_cli(["run", str(write_spec(tmp_path, spec)), "--results", str(out)]) == 0
    df = read_results([out / "results.parquet"])
    assert (df.status == "ok").all(), df[["mode", "error"]]
    assert set(df.phase) == {"generate"} and set(df.new_tokens) == {NEW} and set(df.cache) == {"static"}
    assert df.ttft_ms.gt(0).all() and df.decode_tokens_per_s.gt(0).all()
    assert df[df["mode"] == "default"].warm_compile_s.notna().all()
    html = (out / "report.html").read_text()
    assert "Decode tokens/s (phase generate)" in html and "Time to first token" in html
    capsys.readouterr()
    assert run_cli(["recommend", str(out), "--workload", f"100x{PROMPT}+{NEW}"]) == 0
    assert "gpt2-tiny · fp32" in capsys.readouterr().out
