"""Learning benchmark: PPO on classic Gymnasium tasks, each beside rl-baselines3-zoo's figure.

Every task trains from its ``config/ppo/zoo_<task>.yaml``: our defaults, except the values
that rl-baselines3-zoo itself tunes for that task (``hyperparams/ppo.yml``; each config's
header lists them and what we cannot honour, e.g. gSDE). Printed per task: our return
(mean return of the training episodes of the last summary period, stochastic policy), the
zoo's published PPO return for the same budget (DLR-RM/rl-baselines3-zoo ``benchmark.md``:
deterministic evaluation of one trained agent over ~150k steps, mean +- std), and our
env steps/s (whole run: graph build, env, inference, updates).

    python scripts/benchmark_suite.py [--tasks=CartPole,Acrobot,...] [--max-steps=N] [--seed=1]

``--max-steps`` caps every budget (for a quick look: the zoo column then no longer matches
the budget, and the line says so). LunarLander-v3 needs ``pip install "gymnasium[box2d]"``
(not a project dependency); without it the task is reported as skipped.
"""
from __future__ import annotations

import argparse
import csv
import importlib.util
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


@dataclass(frozen=True)
class Task:
    name: str
    config: str  # under config/ppo/
    zoo_mean: float
    zoo_std: float
    zoo_steps: int
    zoo_env: str  # the env id the zoo's figure is for
    needs: Optional[str] = None  # a module the env needs beyond gymnasium


# rl-baselines3-zoo benchmark.md, rows "ppo" (commit 0088472b8cb622732bdbc4aa3d0d0abde86c67ed).
# The zoo's LunarLander figure is for LunarLander-v2 (Gymnasium 1.x has only v3: same task,
# bug fixes in the physics/reward).
TASKS: List[Task] = [
    Task("CartPole", "zoo_CartPole.yaml", 500.000, 0.000, 100_000, "CartPole-v1"),
    Task("Acrobot", "zoo_Acrobot.yaml", -73.506, 18.201, 1_000_000, "Acrobot-v1"),
    Task("MountainCarContinuous", "zoo_MountainCarContinuous.yaml", 88.343, 2.572, 20_000, "MountainCarContinuous-v0"),
    Task("Pendulum", "zoo_Pendulum.yaml", -172.225, 104.159, 100_000, "Pendulum-v1"),
    Task("LunarLander", "zoo_LunarLander.yaml", 242.119, 31.823, 1_000_000, "LunarLander-v2", needs="Box2D"),
]


def run_task(task: Task, max_steps: Optional[int], seed: int) -> dict:
    """Trains one task in-process; returns our return, steps and timings."""
    from trainers.cli.learn import run_training
    from trainers.config import load_settings
    from trainers.layout import RunLayout

    config = os.path.join(ROOT, "config", "ppo", task.config)
    with tempfile.TemporaryDirectory(prefix="suite_") as results:
        overrides = {"run_id": "suite", "results_dir": results, "seed": seed}
        if max_steps is not None:
            overrides["max_steps"] = max_steps
        options = load_settings(config, overrides)
        behavior = next(iter(options.behaviors))
        steps = options.behaviors[behavior].max_steps
        start = time.perf_counter()
        run_training(options)
        wall = time.perf_counter() - start
        layout = RunLayout(os.path.join(results, "suite"))
        with open(layout.stats_csv(behavior)) as f:
            rows = [r for r in csv.DictReader(f) if r["tag"] == "Environment/Cumulative Reward"]
        with open(layout.timers) as f:
            timers = json.load(f)
    final = rows[-1] if rows else None
    return {
        "steps": steps,
        "wall": wall,
        "loop": timers["total"],
        "return": float(final["mean"]) if final else float("nan"),
        "episodes": int(final["count"]) if final else 0,
        "curve": [(int(r["step"]), float(r["mean"])) for r in rows],
    }


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default=",".join(t.name for t in TASKS), help="comma-separated task names")
    parser.add_argument("--max-steps", type=int, default=None, help="cap on every task's budget")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--curves", action="store_true", help="also print each task's reward curve")
    args = parser.parse_args(argv)
    wanted = [n.strip() for n in args.tasks.split(",") if n.strip()]
    by_name = {t.name.lower(): t for t in TASKS}
    unknown = [n for n in wanted if n.lower() not in by_name]
    if unknown:
        parser.error(f"unknown task(s) {unknown}; choose from {[t.name for t in TASKS]}")
    # TensorFlow is imported before any clock starts.
    import trainers.loop.controller  # noqa: F401

    print(f"{'task':<22} {'steps':>9} {'ours':>9} {'zoo PPO (same budget)':>28} {'steps/s':>8} {'wall s':>7}")
    for name in wanted:
        task = by_name[name.lower()]
        if task.needs and importlib.util.find_spec(task.needs) is None:
            print(f"{task.name:<22} skipped: needs {task.needs} (pip install \"gymnasium[box2d]\")", flush=True)
            continue
        res = run_task(task, args.max_steps, args.seed)
        zoo = f"{task.zoo_mean:.1f} +- {task.zoo_std:.1f} @ {task.zoo_steps // 1000}k"
        note = "" if res["steps"] == task.zoo_steps else f"  (budget {res['steps']} != zoo's {task.zoo_steps})"
        print(
            f"{task.name:<22} {res['steps']:>9} {res['return']:>9.1f} {zoo:>28} "
            f"{res['steps'] / res['wall']:>8.0f} {res['wall']:>7.1f}{note}",
            flush=True,
        )
        if args.curves:
            print("    curve: " + " ".join(f"{s // 1000}k:{r:.0f}" for s, r in res["curve"]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
