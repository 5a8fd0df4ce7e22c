"""Resident memory of a whole training run over time: does it level off?

Runs ``trainer-learn`` as a child process and samples the resident set size of it and of
its children (env workers) from ``/proc`` every ``--every`` seconds, then prints the RSS at
5 s, at each tenth of the run's steps (read from its ``stats.csv`` summaries) and the peak.

    python scripts/benchmark_rss.py config/ppo/CartPole.yaml --max-steps=5000000

Linux only (``/proc``).
"""
from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def rss_kib(pid: int) -> int:
    """VmRSS of ``pid`` and of all its descendants, in KiB (0 for a process that ended)."""
    total = 0
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
                        break
            with open(f"/proc/{p}/task/{p}/children") as f:
                todo.extend(int(c) for c in f.read().split())
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
    return total


def latest_step(run_dir: str) -> int:
    """The newest step any behavior's ``stats.csv`` has a summary for (0 before the first)."""
    from trainers.layout import STATS_FILE

    step = 0
    if not os.path.isdir(run_dir):
        return 0
    for name in os.listdir(run_dir):
        path = os.path.join(run_dir, name, STATS_FILE)  # name: a behavior's folder
        if os.path.isfile(path):
            with open(path, newline="") as f:
                for row in csv.DictReader(f):
                    step = max(step, int(float(row["step"])))
    return step


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config")
    parser.add_argument("--max-steps", type=int, required=True)
    parser.add_argument("--every", type=float, default=2.0, help="seconds between samples")
    parser.add_argument("extra", nargs="*", help="more trainer-learn options (after --)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as results:
        cmd = [sys.executable, "-m", "trainers.learn", args.config, "--run-id=rss", f"--results-dir={results}",
               f"--max-steps={args.max_steps}", *args.extra]
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        samples: List[Tuple[float, int, int]] = []  # (seconds, step, KiB)
        next_check = 0.0
        step = 0
        while proc.poll() is None:
            now = time.perf_counter() - start
            if now >= next_check:  # stats.csv grows: read it every 10 s only
                step = latest_step(os.path.join(results, "rss"))
                next_check = now + 10.0
            samples.append((now, step, rss_kib(proc.pid)))
            time.sleep(args.every)
        err = proc.stderr.read().decode() if proc.stderr else ""
        if proc.returncode != 0:
            print(err, file=sys.stderr)
            return proc.returncode
    wall = time.perf_counter() - start
    print(f"{' '.join(cmd[2:4])} --max-steps={args.max_steps}: {wall:.0f} s, {len(samples)} samples")
    at_5s = next((kib for t, _, kib in samples if t >= 5.0), samples[-1][2])
    print(f"  at 5 s: {at_5s / 1024:.0f} MiB")
    shown: Dict[int, int] = {}
    for t, s, kib in samples:
        tenth = min(10, s * 10 // args.max_steps)
        shown[tenth] = kib  # the last sample in each tenth
    for tenth in sorted(shown):
        print(f"  {tenth * 10:3d} % of steps: {shown[tenth] / 1024:.0f} MiB")
    print(f"  peak: {max(k for _, _, k in samples) / 1024:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
