"""Inductor option sets as an axis: keys checked when the spec is read, ids of specs without the axis
unchanged, a mode's own options merged under the set, and a real compiled trial recording what it
applied."""

from __future__ import annotations

import json

import pytest

from sweeper.measure.inductor_options import compile_kwargs, merged, options_row
from sweeper.spec import options
from sweeper.spec.sweep_spec import SpecError, parse_spec
from sweeper.spec.trials import expand
from tests.helpers import IMPORT_PATH, REPO, tiny_spec

_PLAIN = {"name": "x", "models": [{"name": "resnet18-tiny"}, {"name": "bert-tiny"}],
          "axes": {"mode": ["eager", "default", "max-autotune"], "dynamic": [None, False], "batch_size": [4]}}
_PLAIN_IDS = ["24f407c9b06e", "e3363aa3c717", "c720ec4b4f20", "51580cbdd8c6", "71b207acb427", "734c7c0d5723",
              "616ca5847e9e", "d37fe73c1ac7", "03bf66aa4a7e", "a7a044a55802"]
"""The ids (and spec hash) of `_PLAIN` before option sets and paths existed."""


def _spec(sets=None, **axes):
    return parse_spec({"name": "x", "models": [{"name": "resnet18-tiny"}],
                       "axes": {"mode": ["eager", "default"], **({"options": sets} if sets is not None else {}),
                                **axes}})


def test_specs_without_options_keep_their_ids_and_hash():
    spec = parse_spec(_PLAIN)
    assert [t.trial_id for t in expand(spec)[0]] == _PLAIN_IDS
    assert spec.spec_hash() == "1fdc667e8e417e5e"


def test_an_empty_set_keeps_the_plain_id_and_others_get_their_own():
    plain = {t.mode: t.trial_id for t in expand(_spec())[0]}
    trials = expand(_spec({"default": {}, "cdt": {"coordinate_descent_tuning": True}}))[0]
    by_set = {(t.mode, t.option_set): t for t in trials}
    assert set(by_set) == {("eager", None), ("default", "default"), ("default", "cdt")}
    assert by_set["default", "default"].trial_id == plain["default"]
    assert by_set["eager", None].trial_id == plain["eager"]
    assert by_set["default", "cdt"].trial_id != plain["default"]
    assert by_set["default", "cdt"].options == {"coordinate_descent_tuning": True}
    assert "options=cdt" in by_set["default", "cdt"].label


@pytest.mark.parametrize(("sets", "message"), [
    ({"cdt": {"coordinate_descent_tunin": True}}, "axes.options: cdt: unknown inductor option "
     "'coordinate_descent_tunin' (did you mean 'coordinate_descent_tuning'?)"),
    ({"t": {"triton.no_such_knob": 1}}, "axes.options: t: unknown inductor option 'triton.no_such_knob'"),
    ({"a": {}, "b": {}}, "axes.options: b: same options as set 'a'"),
    ({"a b": {}}, "'a b' is not a valid option set name"),
    ({}, "must name at least one option set"),
])
def test_bad_option_sets_are_refused_in_one_line(sets, message):
    with pytest.raises(SpecError) as e:
        _spec(sets)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_nested_and_inherited_keys_are_known():
    keys = options.known_keys()
    assert keys is not None
    assert {"triton.cudagraphs", "cuda.cutlass_max_profiling_configs", "max_autotune_gemm_backends",
            "epilogue_fusion", "freezing", "combo_kernels", "shape_padding"} <= keys


def test_a_mode_s_options_are_merged_under_the_set():
    (trial,) = expand(_spec({"no_cdt": {"coordinate_descent_tuning": False}}, mode=["max-autotune-no-cudagraphs"]))[0]
    assert merged(trial) == {"max_autotune": True, "coordinate_descent_tuning": False}
    assert compile_kwargs(trial) == {"options": {"max_autotune": True, "coordinate_descent_tuning": False}}
    assert json.loads(options_row(trial)["inductor_options_json"]) == merged(trial)
    (plain,) = expand(_spec({"default": {}}, mode=["reduce-overhead"]))[0]
    assert compile_kwargs(plain) == {"mode": "reduce-overhead"} and options_row(plain) == {}


def test_options_need_the_inductor_backend():
    spec = parse_spec(tiny_spec(axes={"options": {"default": {}, "noepi": {"epilogue_fusion": False}}}))
    trials, dropped = expand(spec)
    assert {t.option_set for t in trials} == {None, "default"}
    assert any("inductor options need the inductor backend" in d.reason for d in dropped)


@pytest.mark.slow
def test_a_compiled_trial_applies_and_records_its_merged_options():
    """One real inductor compile: a tiny linear model under reduce-overhead (CUDA graphs do nothing on
    the CPU) with epilogue fusion off; the row says exactly what torch.compile got."""
    from sweeper.run import isolate

    spec = parse_spec(tiny_spec(
        models=[{"name": "lin", "factory": "faulty_models:make_ok", "input": {"kind": "tensor", "shape": [8]}}],
        axes={"mode": ["reduce-overhead"], "batch_size": [4], "options": {"noepi": {"epilogue_fusion": False}}},
        measure={"backend": "inductor"}))
    (trial,) = expand(spec)[0]
    row = isolate.run_trial({"trial": trial.to_dict(), "device": "cpu", "process_start": "subprocess",
                             "import_path": list(IMPORT_PATH)}, max_retries=0)
    assert row["status"] == "ok", row["error"]
    assert json.loads(row["inductor_options_json"]) == {"triton.cudagraphs": True, "epilogue_fusion": False}
    assert row["graphs"] >= 1 and row["compile_s"] > 0


def test_a_search_tells_option_sets_apart():
    """Optuna proposes settings by their parameters: settings that differ only in their option set
    are different settings, each proposed once."""
    from sweeper.run import search

    spec = parse_spec({"name": "x", "models": [{"name": "resnet18-tiny"}],
                       "axes": {"mode": ["eager", "default"], "batch_size": [1, 2],
                                "options": {"default": {}, "cdt": {"coordinate_descent_tuning": True},
                                            "ne": {"epilogue_fusion": False}}},
                       "search": {"algorithm": "optuna", "max_trials": 6}})
    trials = expand(spec)[0]
    searcher = search.make_search(spec.search, {t.trial_id: search.params_of(t.to_dict()) for t in trials}, {})
    proposed = []
    for i in range(len(trials)):
        got = searcher.suggest(f"t{i}")
        proposed.append(got["trial_id"])
        searcher.on_trial_complete(f"t{i}", {"throughput_items_s": 1.0 + i, "compile_s": 1.0, "peak_mem_gib": 1.0,
                                             "status_code": 0.0})
    assert sorted(proposed) == sorted(t.trial_id for t in trials)


def test_where_inductor_s_config_cannot_be_read_the_keys_pass_and_validate_says_so(tmp_path):
    """A `torch` without inductor's config module first on the path: nothing to check the keys against."""
    import subprocess
    import sys

    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("")
    code = ("from sweeper.spec.options import options_check_note; from sweeper.spec.sweep_spec import parse_spec; "
            "parse_spec({'name': 'x', 'models': [{'name': 'resnet18-tiny'}], "
            "'axes': {'options': {'a': {'no_such_knob': 1}}}}); print(options_check_note(True))")
    out = subprocess.run([sys.executable, "-c", code], env={"PYTHONPATH": f"{tmp_path}:{REPO}"}, capture_output=True,
                         text=True, timeout=120, check=True)
    assert out.stdout.strip() == ("axes.options: keys not checked (torch's inductor config is not importable "
                                  "here); the measuring process refuses an unknown one")
    assert options.options_check_note(True) is None  # here it is


def test_the_measuring_process_refuses_a_key_its_torch_lacks(tmp_path):
    """A trial made elsewhere (a spec read where torch is older or absent) with a key this torch lacks:
    a compile_error row naming the key, not torch's list of every option."""
    import dataclasses

    from sweeper.measure import process

    (trial,) = [t for t in expand(_spec({"cdt": {"coordinate_descent_tuning": True}}))[0] if t.mode != "eager"]
    trial = dataclasses.replace(trial, options={"no_such_knob": 1})
    row = process.run({"trial": trial.to_dict(), "device": "cpu"}, tmp_path / "row.json")
    assert row["status"] == "compile_error"
    assert row["error"].startswith("option set cdt: unknown inductor option 'no_such_knob'") and len(row["error"]) < 200
