#!/bin/bash
# Usage: benchmarks/run_idle.sh LOG COMMAND...
# Runs COMMAND (output to LOG) with every other Python process on the machine paused (SIGSTOP),
# then resumes them: speed measurements need an idle machine, and this one is shared.
# The watch loop itself must cost next to nothing (it runs during the measurement): it reads
# /proc instead of forking ps, stops each process once, and looks for new ones every 3 s.
out=$1; shift
setsid "$@" > "$out" 2>&1 &
bench=$!
sleep 0.5
pgid_of() { local stat; read -r stat < "/proc/$1/stat" 2>/dev/null || return 1; stat=${stat##*) }; set -- $stat; echo "$3"; }
bpgid=$(pgid_of $bench)
mypgid=$(pgid_of $$)
declare -A paused=()
while kill -0 $bench 2>/dev/null; do
  for pid in $(pgrep -f "python|a3c-"); do
    [ -n "${paused[$pid]}" ] && continue
    pg=$(pgid_of $pid) || continue
    [ "$pg" = "$bpgid" ] || [ "$pg" = "$mypgid" ] || [ "$pid" = "$$" ] && continue
    kill -STOP $pid 2>/dev/null && paused[$pid]=1
  done
  sleep 3
done
for pid in "${!paused[@]}"; do kill -CONT $pid 2>/dev/null; done
echo "resumed ${#paused[@]} paused processes" >> "$out"
