"""Time the first call of an exported setting in a fresh process, from its artifact or cold.

    python -m benchmarks.export_first_call EXPORT_DIR [--cold]

Builds the zoo model the trial measured (seeded, random weights) with the trial's batch size,
sequence length and precision (inference), imports the export's `sweeper_compiled` module,
compiles with its Mega-Cache artifact loaded (or cold, `--cold`), and prints one JSON line:
first_call_s (device synchronized), load_s, inductor's FX graph cache hits and misses, and when the
process started and ended (UTC) with its pid and host, so that runs which overlapped show it. A CPU
export runs with the intra-op thread count it was built for, as its README tells a deployment.
Inductor and Triton get a new, empty cache directory, as on a machine that never compiled it.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import socket
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

_STARTED = datetime.now(UTC).isoformat()
_CACHE = Path(tempfile.mkdtemp(prefix="export-first-call-"))
os.environ.update(TORCHINDUCTOR_CACHE_DIR=str(_CACHE / "inductor"), TRITON_CACHE_DIR=str(_CACHE / "triton"))

import torch  # noqa: E402
from torch._dynamo.utils import counters  # noqa: E402

from sweeper.spec.sections import ModelSpec  # noqa: E402
from sweeper.zoo import sources  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("export_dir", type=Path)
    ap.add_argument("--cold", action="store_true", help="compile without loading the artifact")
    args = ap.parse_args()
    versions = json.loads((args.export_dir / "versions.json").read_text())
    setting = versions["setting"]
    if versions["built_for"].get("torch_threads"):  # a CPU export: as its README says, that many threads
        torch.set_num_threads(versions["built_for"]["torch_threads"])
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)
    bundle = sources.build(ModelSpec(name=setting["model"]))
    model = bundle.model.to(device).eval()
    batch = bundle.make_batch(setting["batch_size"], setting["seq_len"], torch.Generator().manual_seed(0)).to(device)
    found = importlib.util.spec_from_file_location("sweeper_compiled", args.export_dir / "sweeper_compiled.py")
    sweeper_compiled = importlib.util.module_from_spec(found)
    found.loader.exec_module(sweeper_compiled)

    t0 = time.perf_counter()
    model = sweeper_compiled.compile_model(model, use_artifact=not args.cold)
    load_s = time.perf_counter() - t0
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=setting["precision"] == "bf16")
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    with torch.no_grad(), autocast:
        model(*batch.args, **batch.kwargs)
    if device.type == "cuda":
        torch.cuda.synchronize()
    print(json.dumps({"first_call_s": time.perf_counter() - t0, "load_s": load_s, "artifact": not args.cold,
                      "fx_graph_cache_hits": counters["inductor"]["fxgraph_cache_hit"],
                      "fx_graph_cache_misses": counters["inductor"]["fxgraph_cache_miss"],
                      "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
                      "started_at": _STARTED, "ended_at": datetime.now(UTC).isoformat(), "pid": os.getpid(),
                      "host": socket.gethostname()}))


if __name__ == "__main__":
    main()
