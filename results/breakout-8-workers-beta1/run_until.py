"""Run train.py from a tree until the global step passes a target, then SIGINT it (clean stop)."""
import os, re, signal, subprocess, sys
tree, name, target = sys.argv[1], sys.argv[2], int(float(sys.argv[3]))
extra = sys.argv[4:]
log = open(f"/work/runs36/{name}.log", "w")
cmd = ["nice", "-n", "8", "/work/main/.venv/bin/python", f"{tree}/train.py", "--env-id", "ALE/Breakout-v5", "--max-steps", "10000000",
       "--no-evaluator", "--runs-dir", "/work/runs36", "--exp-name", name, "--checkpoint-interval", "120", "--log-interval", "10", *extra]
p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
sent = False
for line in p.stdout:
    log.write(line); log.flush()
    m = re.match(r"step ([\d,]+)/", line)
    if m and not sent and int(m.group(1).replace(",", "")) >= target:
        p.send_signal(signal.SIGINT); sent = True
p.wait()
print(name, "exit", p.returncode, flush=True)
