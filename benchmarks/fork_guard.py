"""Does importing what the fork server imports set torch's CUDA fork guard, and who asks?

    python -m benchmarks.fork_guard default-check|nvml-check

Runs the fork server's imports (sweeper/measure/forkserver.py: `preload`) with torch's default
`torch.cuda.is_available()` (a CUDA runtime device count: sets the guard) or the NVML-based one
the server uses (PYTORCH_NVML_BASED_CUDA_CHECK=1), then forks one probe child and prints whether it
would refuse CUDA, the first caller of the runtime device count, and whether CUDA was initialized.
"""

from __future__ import annotations

import os
import sys
import time

check = sys.argv[1] if len(sys.argv) > 1 else "default-check"
if check not in ("default-check", "nvml-check"):
    sys.exit("usage: fork_guard.py default-check|nvml-check")
if check == "nvml-check":
    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
else:
    os.environ.pop("PYTORCH_NVML_BASED_CUDA_CHECK", None)

import torch  # noqa: E402

from sweeper.measure import forkserver  # noqa: E402

watch = forkserver._GuardWatch()
t0 = time.time()
forkserver.preload()
watch.stop()
print(check, "guard set:", forkserver.fork_guard_set(), "first caller:", watch.first,
      "preload %.1f s" % (time.time() - t0), "cuda init:", torch.cuda.is_initialized())
