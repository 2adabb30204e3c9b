"""Where this machine's CPU goes while nothing is asked of it: run on the build machine with the sandbox converged and
idle (no test, no client). Every process of the machine (the sandbox's containers share its process table) is sampled
twice, SECONDS apart; the CPU each used in between is summed by kind (Ray's worker processes by their title,
`ray::ServeReplica:...`, the other processes by their program) and printed as a share of one core, with the whole
machine's busy share from /proc/stat. On the 2-core build machine every share the idle sandbox takes is CPU the stages
of CI do not get.

    python3 benchmarks/idle_cpu.py [SECONDS] [TOP]
"""

import os
import sys
import time

TICKS = os.sysconf("SC_CLK_TCK")


def processes():
    """{pid: (CPU ticks used so far, command line)} of every process readable now."""
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat", encoding="utf-8") as stat:
                # The fields after the command's closing parenthesis: utime and stime are the 12th and 13th.
                fields = stat.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                command = cmdline.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:  # gone between the listing and the read
            continue
        found[pid] = (int(fields[11]) + int(fields[12]), command)
    return found


def machine():
    """(busy, total) jiffies of the whole machine."""
    with open("/proc/stat", encoding="utf-8") as stat:
        values = [int(v) for v in stat.readline().split()[1:]]
    idle = values[3] + values[4]  # idle and iowait
    return sum(values) - idle, sum(values)


def kind(command):
    """A process's kind: Ray's title for its workers and agents, the dashboard's module, else the program's name."""
    if not command:
        return "(kernel threads)"
    words = command.split()
    if words[0].startswith("ray::"):
        return words[0]
    for word in words[1:3]:
        if word.endswith(".py"):
            return os.path.basename(word)
    return os.path.basename(words[0])


def main(seconds=30, top=25):
    before, busy_before = processes(), machine()
    time.sleep(seconds)
    after, busy_after = processes(), machine()
    by_kind = {}
    for pid, (ticks, command) in after.items():
        if pid in before:
            name = kind(command)
            count, used = by_kind.get(name, (0, 0))
            by_kind[name] = (count + 1, used + ticks - before[pid][0])
    busy = (busy_after[0] - busy_before[0]) / max(1, busy_after[1] - busy_before[1])
    total = sum(used for _count, used in by_kind.values())
    print(f"{seconds} s, {os.cpu_count()} CPUs: the machine {100 * busy:.0f}% busy; the processes below "
          f"{100 * total / TICKS / seconds:.1f}% of one core")  # fmt: skip
    for name, (count, used) in sorted(by_kind.items(), key=lambda item: -item[1][1])[:top]:
        print(f"{100 * used / TICKS / seconds:6.1f}%  {count:3d}  {name}")


if __name__ == "__main__":
    main(*(int(arg) for arg in sys.argv[1:3]))
