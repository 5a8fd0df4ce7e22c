"""MA-POCA's cost beside PPO's on the cooperative built-in Rendezvous.

    python scripts/benchmark_poca.py [--steps=20000] [--repeats=2] [--config=config/poca/Rendezvous.yaml]

Trains the config (``trainer_type: poca``) and the same config as ``trainer_type: ppo``,
alternating the two ``--repeats`` times, each run in its own ``trainer-learn`` process
for ``--steps`` agent steps (seed 1), and reads each run's ``run_logs/timers.json``:

* steps/s: agent steps over the run's loop time (``total``);
* update per buffer: the median ``update_durations`` after the first (which pays for the
  graph's first run), one update = ``num_epoch`` passes over ``buffer_size`` rows;
* the loop's share in trajectory assembly and processing (``trajectories``: POCA's
  critic and baseline values per trajectory) and in updates.

Prints one line per run and a summary per trainer type (means over the repeats).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from typing import Dict, List

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_once(config: Dict, trainer_type: str, steps: int, folder: str, run_id: str) -> Dict[str, float]:
    """One ``trainer-learn`` run of ``config`` as ``trainer_type``; its timers."""
    config = json.loads(json.dumps(config))
    (name, behavior), = config["behaviors"].items()
    behavior["trainer_type"] = trainer_type
    behavior["max_steps"] = steps
    behavior["summary_freq"] = steps
    behavior["checkpoint_interval"] = steps
    path = os.path.join(folder, f"{run_id}.yaml")
    with open(path, "w") as f:
        yaml.safe_dump(config, f)
    cmd = [sys.executable, "-m", "trainers.learn", path, f"--run-id={run_id}", "--seed=1",
           f"--results-dir={folder}", "--force"]
    subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(folder, run_id, "run_logs", "timers.json")) as f:
        timers = json.load(f)
    updates = timers["update_durations"][1:] or timers["update_durations"]
    return {
        "steps_per_s": steps / timers["total"],
        "update_per_buffer_s": statistics.median(updates) if updates else float("nan"),
        "updates": float(len(timers["update_durations"])),
        "trajectories_s": timers["trajectories"],
        "update_s": timers["update"],
        "total_s": timers["total"],
    }


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--config", default=os.path.join(ROOT, "config", "poca", "Rendezvous.yaml"))
    args = parser.parse_args(argv)
    with open(args.config) as f:
        config = yaml.safe_load(f)
    results: Dict[str, List[Dict[str, float]]] = {"poca": [], "ppo": []}
    with tempfile.TemporaryDirectory() as folder:
        for r in range(args.repeats):
            for trainer_type in ("poca", "ppo"):
                out = run_once(config, trainer_type, args.steps, folder, f"{trainer_type}_{r}")
                results[trainer_type].append(out)
                print(f"{trainer_type} #{r}: " + ", ".join(f"{k} {v:.3f}" for k, v in out.items()), flush=True)
    for trainer_type, runs in results.items():
        mean = {k: statistics.mean(run[k] for run in runs) for k in runs[0]}
        print(f"{trainer_type}: {mean['steps_per_s']:.0f} steps/s, update per buffer {mean['update_per_buffer_s']:.3f} s "
              f"({mean['updates']:.0f} updates), trajectories {mean['trajectories_s']:.1f} s, "
              f"updates {mean['update_s']:.1f} s of {mean['total_s']:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
