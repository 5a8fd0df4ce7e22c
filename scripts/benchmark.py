"""Training throughput benchmark: PPO on CartPole-v1 with Stable-Baselines3's PPO defaults.

1 environment, buffer 2048, batch 64, 10 epochs, lr 3e-4 (linear), gamma 0.99, lambda
0.95, clip 0.2, 2x64 tanh network, no entropy bonus, 100k steps (config/ppo/CartPole.yaml).
Prints env steps/s, the split of wall time between env stepping, inference, trajectory
processing and updates, and the final mean reward. Compare with scripts/sb3_reference.py.

    python scripts/benchmark.py [--steps=100000] [--seed=1] [--config=config/ppo/CartPole.yaml]
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(config: str, steps: int, seed: int, extra: dict | None = None) -> dict:
    from trainers.learn import run_training
    from trainers.settings import load_settings

    results = tempfile.mkdtemp(prefix="bench_")
    overrides = {"run_id": "bench", "results_dir": results, "max_steps": steps, "seed": seed}
    overrides.update(extra or {})
    options = load_settings(config, overrides)
    start = time.perf_counter()
    run_training(options)
    wall = time.perf_counter() - start
    run_dir = os.path.join(results, "bench")
    with open(os.path.join(run_dir, "run_logs", "timers.json")) as f:
        timers = json.load(f)
    behavior = next(iter(options.behaviors))
    with open(os.path.join(run_dir, behavior, "stats.csv")) as f:
        rewards = [float(r["mean"]) for r in csv.DictReader(f) if r["tag"] == "Environment/Cumulative Reward"]
    return {"wall": wall, "timers": timers, "final_reward": rewards[-1] if rewards else float("nan"), "steps": steps}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--config", default=os.path.join(ROOT, "config", "ppo", "CartPole.yaml"))
    args = parser.parse_args()
    res = run(args.config, args.steps, args.seed)
    t = res["timers"]
    loop = t["total"]
    print(f"PPO CartPole-v1, {res['steps']} steps, seed {args.seed}")
    print(f"  wall time (incl. graph build): {res['wall']:.1f} s; training loop: {loop:.1f} s")
    print(f"  env steps/s (training loop): {res['steps'] / loop:.0f}")
    for part in ("env", "inference", "trajectories", "update"):
        print(f"  {part:<13} {t[part]:7.1f} s  ({100 * t[part] / loop:4.1f} %)")
    other = loop - sum(t[p] for p in ("env", "inference", "trajectories", "update"))
    print(f"  {'other':<13} {other:7.1f} s  ({100 * other / loop:4.1f} %)")
    print(f"  final mean reward (last summary): {res['final_reward']:.1f}")


if __name__ == "__main__":
    sys.exit(main())
