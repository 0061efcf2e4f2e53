#!/usr/bin/env bash
# The traced GPU sweep, its report (each traced row links its trace) and one trace as tlparse HTML.
set -euo pipefail
cd "$(dirname "$0")/.."
out=experiments/results/h200/trace
sweeper run experiments/trace_h200.yaml --results "$out"
tid=$(python -c "import pandas as pd; d = pd.read_parquet('$out/results.parquet'); \
print(d[d.trace_bytes.notna()].sort_values('trace_bytes').trial_id.iloc[-1])")
sweeper trace "$out" "$tid" -o "$out/trace-$tid"
du -sh "$out/traces" "$out/trace-$tid"
