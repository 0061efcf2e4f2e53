# Sourced by the studies' run scripts (from the repository root), after they set `out`:
#   resumable_sweep NAME SPEC   runs `sweeper run SPEC` into $out/NAME for at most LIMIT_S seconds
#                               (default 540: one machine lease's command), resuming what an earlier
#                               call left; $out/NAME.done once a call finishes the sweep. Returns
#                               that call's exit code.
resumable_sweep() {
  [ -e "$out/$1.done" ] && { echo "$1 already done"; return; }
  local t0 code
  t0=$(date +%s)
  timeout -s INT "${LIMIT_S:-540}" python3 -m sweeper run "$2" --results "$out/$1" --resume --no-report \
    >>"$out/$1.log" 2>&1
  code=$?
  echo "$1 call exit=$code wall_s=$(( $(date +%s) - t0 ))" | tee -a "$out/walls.txt"
  [ "$code" -eq 0 ] && touch "$out/$1.done"
  return "$code"
}
