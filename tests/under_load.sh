#!/usr/bin/env bash
# Run pytest N times in a row with one CPU-burning process per core beside it (pytest --cpu-hogs
# cores), stopping at the first failing run: a test that passes here does not depend on the
# machine being idle. Usage: tests/under_load.sh N [pytest arguments...]
#   tests/under_load.sh 10 tests/cli/test_cli_surprises.py::test_ctrl_c_prints_the_resume_command_and_exits_130
set -euo pipefail
runs="$1"
shift
for i in $(seq 1 "$runs"); do
  start=$(date +%s)
  python -m pytest --cpu-hogs cores -q "$@"
  echo "under_load: run $i of $runs passed in $(( $(date +%s) - start )) s"
done
