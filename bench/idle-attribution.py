#!/usr/bin/env python3
"""Where does a CPU's idle time come from? Reads `perf script` output of sched:sched_switch
events recorded on every CPU with call graphs, and charges each idle period (a CPU switching
to the idle task until it next switches away) to the thread that went to sleep just before,
keyed by its name, its state and the top of its kernel and user stacks.

Used for bench/RESULTS.md (2026-11-23): the engine's idle core time at c=2. Linux, root:

    mount -t tracefs nodev /sys/kernel/tracing   # where it is not mounted yet
    npx tsx bench/engine-scaling.ts --hold 2 40 &
    sleep 25   # model loads, warm-up
    perf record -a -e sched:sched_switch -g -o /tmp/sched.data -- sleep 8
    perf script -i /tmp/sched.data -F comm,tid,cpu,time,event,trace,ip,sym,dso \\
      | python3 bench/idle-attribution.py

Standard library only. Prints the idle time as cores (idle CPU-seconds over the recorded span)
and the 20 largest causes.
"""
import collections
import re
import sys

HEADER = re.compile(
    r"^\s*(.+?)\s+(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+sched:sched_switch:\s+prev_comm=(.*?) prev_pid=(\d+) "
    r"prev_prio=\d+ prev_state=(\S+) ==> next_comm=(.*?) next_pid=(\d+)"
)
# Scheduler plumbing that every sleeping stack shares; the frames below it say why.
PLUMBING = {"__schedule", "schedule", "entry_SYSCALL_64_after_hwframe", "do_syscall_64"}


def switches(lines):
    """Yields one dict per sched_switch event with its stack frames (innermost first)."""
    current = None
    for line in lines:
        m = HEADER.match(line)
        if m:
            if current:
                yield current
            current = {
                "cpu": int(m.group(3)),
                "t": float(m.group(4)),
                "prev": m.group(5),
                "state": m.group(7),
                "next_pid": int(m.group(9)),
                "frames": [],
            }
        elif current is not None and line.strip():
            parts = line.strip().split(None, 1)
            if len(parts) == 2:
                current["frames"].append(parts[1])
    if current:
        yield current


def cause(event):
    kernel = [f.split(" (")[0] for f in event["frames"] if "kallsyms" in f]
    kernel = [f for f in kernel if f not in PLUMBING][:3]
    user = [f.split(" (")[0] for f in event["frames"] if "kallsyms" not in f][:2]
    return (event["prev"], event["state"], " < ".join(kernel), " < ".join(user))


def main():
    idle = collections.Counter()
    count = collections.Counter()
    last = {}
    first_t = last_t = None
    for ev in switches(sys.stdin):
        first_t = ev["t"] if first_t is None else first_t
        last_t = ev["t"]
        before = last.get(ev["cpu"])
        if before is not None and before["next_pid"] == 0:
            idle[before["cause"]] += ev["t"] - before["t"]
            count[before["cause"]] += 1
        if ev["next_pid"] == 0:
            ev["cause"] = cause(ev)
        last[ev["cpu"]] = ev
    if first_t is None or last_t <= first_t:
        sys.exit("no sched_switch events with call graphs on stdin")
    span = last_t - first_t
    total = sum(idle.values())
    print(f"span {span:.2f} s, idle {total:.2f} CPU-s = {total / span:.3f} cores")
    print("| idle (cores) | periods | mean period (ms) | thread that slept | state | kernel frames | user frames |")
    print("|---|---|---|---|---|---|---|")
    for key, seconds in idle.most_common(20):
        print(f"| {seconds / span:.4f} | {count[key]} | {1000 * seconds / count[key]:.2f} | {key[0]} | {key[1]} | {key[2]} | {key[3][:120]} |")


if __name__ == "__main__":
    main()
