"""Does a setting's reported memory need really fit? Cap the GPU to just above it and to below it.

    python -m benchmarks.memory_fit SPEC --setting resnet50:reduce-overhead:bf16 [...] --out DIR [--gpu 0]

For each chosen setting: one measuring process reports `mem_need_reserved_gib` (what the caching
allocator took over the whole trial) and the steady `peak_mem_gib`; then fresh processes run the
same trial with the allocator capped (`measure.memory_cap_gib`) at need x 1.05 (expected: ok),
need x 0.90 (expected: oom) and the steady peak (what provisioning by the steady figure would give;
CUDA-graph modes hold a private pool it does not show). Then the compiled setting alone, as a
deployment runs it: its `compiled_need_reserved_gib`, capped at 1.05x and 0.90x of that. The
capped runs share the first run's inductor cache (a cold compile needs at least as much memory, so
a cap that fails warm fails cold too)."""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from sweeper.run.isolate import run_process
from sweeper.spec.sweep_spec import load_spec, parse_spec
from sweeper.spec.trials import Trial, expand

REPO = Path(__file__).resolve().parent.parent

CAPS = (("need x 1.05", "need", 1.05), ("need x 0.90", "need", 0.90), ("steady peak", "steady", 1.0))


def _trial(spec_path: str, setting: str, cap_gib: float | None) -> Trial:
    model, mode, precision = setting.split(":")
    data = load_spec(spec_path).model_dump(mode="json")
    data["measure"].update(warm_compile=False, memory_cap_gib=cap_gib)
    trials, _ = expand(parse_spec(data))
    (trial,) = [t for t in trials if (t.model_name, t.mode, t.precision) == (model, mode, precision)]
    return trial


def _run(trial: Trial, work: Path, cache: Path, warm: bool = False) -> dict:
    payload = {"trial": trial.to_dict(), "device": "cuda"}
    return run_process(payload, work, cache, timeout_s=trial.measure.trial_timeout_s, warm=warm)


def compiled_alone(spec_path: str, setting: str, work: Path, cache: Path) -> list[dict]:
    """The compiled setting alone (a warm-compile process: no eager model timed, no accuracy check):
    its reported need, then capped at 1.05x and 0.90x of it."""
    base = _run(_trial(spec_path, setting, None), work, cache, warm=True)
    need = base.get("compiled_need_reserved_gib")
    out = [{"setting": setting, "cap": "compiled alone, none", "cap_gib": None, "status": base["status"],
            "compiled_need_reserved_gib": need, "error": (base.get("error") or "")[:200]}]
    for label, factor in (("compiled alone, need x 1.05", 1.05), ("compiled alone, need x 0.90", 0.90)):
        if base["status"] != "ok" or need is None:
            break
        row = _run(_trial(spec_path, setting, need * factor), work, cache, warm=True)
        out.append({"setting": setting, "cap": label, "cap_gib": round(need * factor, 3), "status": row["status"],
                    "compiled_need_reserved_gib": row.get("compiled_need_reserved_gib"),
                    "error": (row.get("error") or "")[:200]})
        print(json.dumps(out[-1]), flush=True)
    return out


def fit(spec_path: str, setting: str, work: Path) -> list[dict]:
    cache = work / "cache"
    base = _run(_trial(spec_path, setting, None), work, cache)
    out = [{"setting": setting, "cap": "none", "cap_gib": None, "status": base["status"],
            "mem_need_reserved_gib": base.get("mem_need_reserved_gib"), "peak_mem_gib": base.get("peak_mem_gib"),
            "peak_mem_compile_gib": base.get("peak_mem_compile_gib"),
            "device_mem_used_gib": base.get("device_mem_used_gib"),
            "error": (base.get("error") or "")[:200]}]
    if base["status"] != "ok":
        return out
    figures = {"need": base["mem_need_reserved_gib"], "steady": base["peak_mem_gib"]}
    for label, what, factor in CAPS:
        cap = figures[what] * factor
        row = _run(_trial(spec_path, setting, cap), work, cache)
        out.append({"setting": setting, "cap": label, "cap_gib": round(cap, 3), "status": row["status"],
                    "mem_need_reserved_gib": row.get("mem_need_reserved_gib"), "error": (row.get("error") or "")[:200]})
        print(json.dumps(out[-1]), flush=True)
    return out + compiled_alone(spec_path, setting, work, cache)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("spec")
    ap.add_argument("--setting", action="append", required=True, help="model:mode:precision")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    rows = []
    for setting in args.setting:
        with tempfile.TemporaryDirectory(prefix="sweeper-memfit-") as work:
            rows += fit(args.spec, setting, Path(work))
    Path(args.out).mkdir(parents=True, exist_ok=True)
    name = "_".join(s.replace(":", "-") for s in args.setting)
    (Path(args.out) / f"memory_fit_{name}.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
