"""The README of an export directory: what the setting is, how to use it, what it is valid for,
and what sweeper measured of it."""

from __future__ import annotations

from typing import Any

from sweeper.analysis import frames
from sweeper.analysis.frames import fmt_num


def render(row: dict[str, Any], why: str, versions: dict[str, Any], module: str) -> str:
    """The README's text; `why`: how the setting was chosen."""
    built, m = versions["built_for"], versions["measured"]
    return _intro(row, why, versions, module) + _valid_for(row, built) + _measured(m)


def _intro(row: dict[str, Any], why: str, versions: dict[str, Any], module: str) -> str:
    return f"""# {row['model']}: {frames.setting_label(row)}

`{frames.advice(row)}`: trial `{row['trial_id']}`, {why}.

```python
from {module} import compile_model
model = compile_model(model)   # checks the versions, loads megacache.bin, then compiles as measured
```

## Files

- `{module}.py`: `compile_model(model)`; needs only torch. `compile_model(model, use_artifact=False)`
  compiles cold instead.
- `megacache.bin`: the trial's Mega-Cache artifact (`torch.compiler.save_cache_artifacts()` after its
  cold compile; {versions['artifact']['bytes']:,} bytes, sha256 `{versions['artifact']['sha256'][:16]}...`).
- `versions.json`: what it is valid for, the setting, and what was measured.

"""


def _valid_for(row: dict[str, Any], built: dict[str, Any]) -> str:
    seq = f", sequence length {int(row['seq_len'])}" if not frames.is_missing(row.get("seq_len")) else ""
    autocast = " under `torch.autocast(device, dtype=torch.bfloat16)`" if row.get("precision") == "bf16" else ""
    phase = "inference (`model.eval()`, `torch.no_grad()`)" if row.get("phase") == "infer" else "training"
    n = built.get("torch_threads")
    threads = (f", {n} intra-op thread{'s' if n != 1 else ''} (`torch.set_num_threads({n})`: inductor's CPU "
               "code is built for the count)" if n else "")
    return f"""## Valid for

torch {built['torch_version']}, Triton {built['triton_version'] or '(none)'}, CUDA {built['cuda_version'] or '(none)'},
device {built['device_name']} ({built['device_type']}){threads}. `compile_model` refuses any other in one line
(`ArtifactMismatch`), since compiled kernels are specific to them. The compiled code is reused
only for what was measured: {phase}, batch {int(row['batch_size'])}{seq}, {row.get('precision')}{autocast},
`torch.set_float32_matmul_precision("{row.get('matmul_precision')}")` (set by `compile_model`);
other shapes or dtypes compile as usual.

"""


def _measured(m: dict[str, Any]) -> str:
    return f"""## Measured

| | seconds |
|---|---|
| cold compile (empty cache) | {fmt_num(m['compile_s'])} |
| warm start from this artifact (first call) | {fmt_num(m['warm_megacache_s'])} |
| loading the artifact | {fmt_num(m['megacache_load_s'])} |
| warm start from a filled inductor cache | {fmt_num(m['warm_compile_s'])} |

Dynamo still traces the model on the first call; the artifact saves inductor's code generation,
kernel compilation and autotuning.
"""
