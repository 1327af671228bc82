#!/usr/bin/env python3
"""Runs a command and reports the CPU time other threads of the machine took
while it ran (kernel threads included): what competed with the benchmark
for the cores.

usage: others_cpu.py OUT.json EXCLUDE_PID -- COMMAND [ARG...]

The command's own threads are gone by the end, so only threads alive before
and after count; threads of process EXCLUDE_PID (the redis-server under
test) and of this script are left out too. OUT.json gets the command's wall
time and the busiest threads with their CPU milliseconds. The command's
exit status is passed on.
"""

import json
import os
import subprocess
import sys
import time


def snapshot(exclude_pid):
    """Name and time on a CPU (ns, from schedstat) of every thread, keyed by
    (pid, tid). The tick-based times of /proc/…/stat are too coarse."""
    threads = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if pid in (exclude_pid, str(os.getpid())):
            continue
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/comm") as f:
                    name = f.read().strip()
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    ran_ns = int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                continue
            threads[(pid, tid)] = (name, ran_ns)
    return threads


def main():
    args = sys.argv[1:]
    if len(args) < 4 or args[2] != "--":
        sys.exit(__doc__)
    out, exclude_pid, _, *command = args
    before = snapshot(exclude_pid)
    started = time.monotonic()
    status = subprocess.run(command).returncode
    seconds = time.monotonic() - started
    after = snapshot(exclude_pid)
    busiest = []
    for key, (name, ran_ns) in after.items():
        if key in before:
            used = ran_ns - before[key][1]
            if used > 0:
                busiest.append({"thread": name, "cpu_ms": used / 1e6})
    busiest.sort(key=lambda t: -t["cpu_ms"])
    report = {"seconds": seconds, "others_cpu_ms": sum(t["cpu_ms"] for t in busiest), "busiest": busiest[:5]}
    with open(out, "w") as f:
        json.dump(report, f)
    sys.exit(status)


if __name__ == "__main__":
    main()
