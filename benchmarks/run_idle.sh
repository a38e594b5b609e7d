#!/bin/bash
# Usage: benchmarks/run_idle.sh LOG COMMAND...
# Runs COMMAND (output to LOG) with every other Python process on the machine paused (SIGSTOP),
# then resumes them: speed measurements need an idle machine, and this one is shared.
out=$1; shift
setsid "$@" > "$out" 2>&1 &
bench=$!
sleep 0.5
bpgid=$(ps -o pgid= -p $bench | tr -d ' ')
mypgid=$(ps -o pgid= -p $$ | tr -d " ")
paused=()
while kill -0 $bench 2>/dev/null; do
  for pid in $(pgrep -f "python|a3c-"); do
    pg=$(ps -o pgid= -p $pid 2>/dev/null | tr -d ' ')
    [ -z "$pg" ] && continue
    [ "$pg" = "$bpgid" ] && continue
    [ "$pid" = "$$" ] && continue
    [ "$pg" = "$mypgid" ] && continue
    kill -STOP $pid 2>/dev/null && paused+=($pid)
  done
  sleep 1
done
for pid in "${paused[@]}"; do kill -CONT $pid 2>/dev/null; done
echo "resumed ${#paused[@]} pauses" >> "$out"
