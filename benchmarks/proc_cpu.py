"""CPU time from /proc: how much of the machine a benchmark's processes got, and what else ran.

A shared machine makes a speed figure meaningless unless it says how much CPU the measured
processes actually had; these helpers read that from /proc (Linux only), without forking.
"""

from __future__ import annotations

import os
import time

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def proc_cpu_s(pid: int) -> float:
    """utime + stime of one process, in seconds (0 if it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # fields 14 and 15 of stat(5)


def children(pid: int) -> list[int]:
    kids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid:
            kids.append(int(entry))
    return kids


def is_spawned_worker(pid: int) -> bool:
    """A child started by multiprocessing's spawn (a worker; not the resource tracker)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"spawn_main" in f.read()
    except OSError:
        return False


def machine_busy_s() -> float:
    """CPU seconds the whole machine spent not idle, since boot."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    return (sum(values[:8]) - idle) / CLOCK_TICKS  # guest time is already inside user


def cpu_snapshot(trainer_pid: int, worker_pids: list[int]) -> dict:
    """CPU seconds so far of the workers, their trainer, this process and the machine, with the time."""
    return {
        "workers": sum(proc_cpu_s(p) for p in worker_pids),
        "trainer": proc_cpu_s(trainer_pid),
        "self": time.process_time(),
        "machine": machine_busy_s(),
        "wall": time.monotonic(),
    }
