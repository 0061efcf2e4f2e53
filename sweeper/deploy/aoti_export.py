"""`sweeper export` of an aoti trial: its AOTInductor package, a module that loads it the way the
sweep measured (CUDA up first, the device named by index, inputs of the shapes it was built for),
the versions it is valid for, and a README."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from sweeper.analysis import frames
from sweeper.results.files import atomic_write_bytes

PACKAGE_NAME = "model.pt2"
MODULE_NAME = "load_package"
_MODULE = '''"""Load the AOTInductor package sweeper measured for @MODEL@ (trial @TRIAL@): @SETTING@."""

from pathlib import Path

import torch
import torch._inductor

PACKAGE = Path(__file__).with_name("@PACKAGE@")
DEVICE_TYPE = @DEVICE_TYPE@


def load_model(device_index: int | None = None):
    """The package, loaded onto the device it was built for. On CUDA the context is made first and the
    device is named by its index: call this in the serving process, and feed it inputs of the shapes,
    dtypes and device the package was built for (versions.json), nothing else."""
    if DEVICE_TYPE == "cuda":
        torch.cuda.init()
        index = torch.cuda.current_device() if device_index is None else device_index
        torch.empty(1, device=f"cuda:{index}")  # the context exists once something is allocated
        return torch._inductor.aoti_load_package(str(PACKAGE), device_index=index)
    return torch._inductor.aoti_load_package(str(PACKAGE))
'''


def _isa_note(row: dict[str, Any]) -> str:
    """The load's CPU check, where measured: paid once per inductor cache directory."""
    isa = row.get("aoti_isa_check_s")
    if frames.is_missing(isa):
        return ""
    return (f" (after {frames.fmt_num(isa)} s of inductor's CPU check, which compiles test programs once per "
            "inductor cache directory: keep TORCHINDUCTOR_CACHE_DIR between starts to skip it)")


def write(package: Path, row: dict[str, Any], out_dir: Path, why: str, built_for: dict[str, Any]) -> list[str]:
    """Write the aoti export of `row` (its package kept at `package`) to `out_dir`; the files' names."""
    data = package.read_bytes()
    module = (_MODULE.replace("@MODEL@", str(row["model"])).replace("@TRIAL@", str(row["trial_id"]))
              .replace("@SETTING@", frames.setting_label(row)).replace("@PACKAGE@", PACKAGE_NAME)
              .replace("@DEVICE_TYPE@", repr(row.get("device_type"))))
    versions = {"built_for": built_for, "trial_id": row["trial_id"],
                "inductor_configs": row.get("inductor_options_json"),
                "package": {"file": PACKAGE_NAME, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()},
                **{k: None if frames.is_missing(row.get(k)) else int(row[k]) for k in ("batch_size", "seq_len")}}
    readme = (f"# {row['model']}: AOTInductor package (trial {row['trial_id']})\n\n{frames.setting_label(row)}: "
              f"{why}.\n\n```python\nfrom {MODULE_NAME} import load_model\nmodel = load_model()\n"
              "out = model(*inputs)  # the shapes and dtypes of the measured batch\n```\n\nMeasured: load "
              f"{frames.fmt_num(row.get('aoti_load_s'))} s{_isa_note(row)}, first call "
              f"{frames.fmt_num(row.get('first_call_s'))} s, "
              f"{frames.fmt_num(row.get('speedup_vs_eager'))}x eager; the package is valid only for "
              "`versions.json`'s torch and device.\n")
    files = {PACKAGE_NAME: data, "versions.json": (json.dumps(versions, indent=2, default=str) + "\n").encode(),
             f"{MODULE_NAME}.py": module.encode(), "README.md": readme.encode()}
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        atomic_write_bytes(out_dir / name, content)
    return sorted(files)
