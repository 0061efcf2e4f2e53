"""A test-only model factory that records, while its model is built inside a measuring process,
what that process is: its identity, CPUs, environment as torch sees it, and dynamo's state."""

from __future__ import annotations

import json
import os
import sys
import time

import torch
from torch import nn


def make_probe(facts_dir: str, features: int = 8, sleep_s: float = 0.0) -> nn.Module:
    from torch._dynamo.utils import counters
    from torch._inductor import config as inductor_config
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    facts = {"pid": os.getpid(), "ppid": os.getppid(), "pgid": os.getpgid(0), "sid": os.getsid(0),
             "cpus": sorted(os.sched_getaffinity(0)), "cache_dir": cache_dir(),
             "triton_cache_dir": os.environ.get("TRITON_CACHE_DIR"),
             "compile_threads": inductor_config.compile_threads, "torch_threads": torch.get_num_threads(),
             "dynamo_counters": {k: dict(v) for k, v in counters.items() if v},
             "cuda_initialized": torch.cuda.is_initialized(),
             "compile_pools": len(getattr(sys.modules.get("torch._inductor.async_compile"), "_pool_set", ())),
             "inductor_imported": "torch._inductor.compile_fx" in sys.modules,
             "forked": "sweeper.measure.forkserver" in sys.modules
             or ("__main__" in sys.modules and getattr(sys.modules["__main__"], "__spec__", None) is not None
             and sys.modules["__main__"].__spec__.name == "sweeper.measure.forkserver")}
    with open(os.path.join(facts_dir, f"{os.getpid()}.json"), "w") as f:
        json.dump(facts, f)
    time.sleep(sleep_s)  # long enough for a test to act on this process while it is measuring
    return nn.Sequential(nn.Linear(features, features), nn.ReLU(), nn.Linear(features, 2))
