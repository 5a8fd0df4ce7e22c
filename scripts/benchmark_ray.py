"""Ray rollout workers (``env_settings.ray``) against the local env managers, on one machine.

* Slow env: the built-in Simple (discrete) with ``step_delay_ms`` (5 by default), 4 envs:
  the local subprocess manager (``num_envs: 4``) vs 2 Ray workers x 2 envs; and 1 Ray
  worker x 2 envs vs 2 workers x 2 envs (a second worker's gain).
* Fast env (no delay), 1 env: in-process vs 1 Ray worker: Ray's cost per env step
  (``1 / rate_ray - 1 / rate_local``: the call, the transfer of the step and the actions
  taken, the weights shipped).
* The learner's update: the mean ``update_durations`` of the same PPO config (1024-row
  buffer) in the local and in the Ray runs.

Every configuration trains ``--steps`` agent steps with PPO (hidden 64 x 2, 3 epochs, batch
64, buffer 1024); the runs alternate (``--repeats`` rounds, every other round reversed) and
the best steps/s of each is kept (other processes on the machine slow some runs down).
Steps/s is over the training loop only (`Timers.total`: after graphs, env and Ray worker
start-up). One Ray instance (``ray.init``, this machine's CPUs) serves every Ray run.

    python scripts/benchmark_ray.py [--steps=4096] [--delay-ms=5] [--repeats=2]
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from typing import Dict, List, Optional, Tuple

import yaml

# (label, delay ms, ray workers (0: local), envs per worker / num_envs, steps_per_call)
Variant = Tuple[str, float, int, int, int]


def config(delay_ms: float, workers: int, envs: int, steps: int, per_call: int = 1) -> dict:
    env: Dict[str, object] = {
        "env_path": "builtin:Simple",
        "env_args": {"continuous": 0, "discrete": 1, "step_delay_ms": delay_ms},
        "seed": 1,
    }
    if workers:
        env["ray"] = {"num_workers": workers, "envs_per_worker": envs, "steps_per_call": per_call}
    else:
        env["num_envs"] = envs
    return {
        "behaviors": {
            "Simple": {
                "trainer_type": "ppo",
                "hyperparameters": {
                    "batch_size": 64, "buffer_size": 1024, "num_epoch": 3,
                    "learning_rate": 3.0e-4, "learning_rate_schedule": "constant",
                },
                "network_settings": {"hidden_units": 64, "num_layers": 2},
                "max_steps": steps,
                "time_horizon": 64,
                "summary_freq": 10**7,
                "checkpoint_interval": 10**7,
            }
        },
        "env_settings": env,
    }


def run(variant: Variant, steps: int) -> Tuple[float, Dict[str, object]]:
    """Loop agent steps/s and the timers of one training run."""
    from trainers.cli.learn import run_training
    from trainers.config import load_settings
    from trainers.layout import RunLayout

    _, delay_ms, workers, envs, per_call = variant
    with tempfile.TemporaryDirectory(prefix="bench_ray_") as folder:
        path = os.path.join(folder, "config.yaml")
        with open(path, "w") as f:
            yaml.safe_dump(config(delay_ms, workers, envs, steps, per_call), f)
        options = load_settings(path, {"run_id": "bench", "results_dir": folder})
        run_training(options)
        with open(RunLayout(os.path.join(folder, "bench")).timers) as f:
            timers = json.load(f)
    return steps / float(timers["total"]), timers


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--steps", type=int, default=4096)
    parser.add_argument("--delay-ms", type=float, default=5.0)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    import ray

    import trainers.loop.controller  # noqa: F401  (TensorFlow's import stays out of the figures)

    ray.init(num_cpus=max(2, os.cpu_count() or 2), include_dashboard=False, logging_level=logging.WARNING)
    d = args.delay_ms
    variants: List[Variant] = [
        ("local subprocess, 4 envs", d, 0, 4, 1),
        ("Ray 2 workers x 2 envs", d, 2, 2, 1),
        ("Ray 1 worker x 2 envs", d, 1, 2, 1),
        ("local in-process, 1 env, no delay", 0.0, 0, 1, 1),
        ("Ray 1 worker x 1 env, no delay", 0.0, 1, 1, 1),
        ("Ray 2 workers x 2 envs, 8 per call", d, 2, 2, 8),
        ("Ray 1 worker x 1 env, no delay, 8 per call", 0.0, 1, 1, 8),
    ]
    best: Dict[str, float] = {}
    updates: Dict[str, List[float]] = {}
    print(f"builtin:Simple, PPO 64x2, buffer 1024, {args.steps} steps per run, best of {args.repeats} "
          f"(load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs)", flush=True)
    try:
        for r in range(args.repeats):
            for variant in variants if r % 2 == 0 else variants[::-1]:
                rate, timers = run(variant, args.steps)
                label = variant[0]
                best[label] = max(best.get(label, 0.0), rate)
                durations = [float(x) for x in timers["update_durations"]]  # type: ignore[attr-defined]
                updates.setdefault(label, []).extend(durations[1:])  # the first includes warm-up
    finally:
        ray.shutdown()
    for variant in variants:
        label = variant[0]
        u = updates.get(label) or [float("nan")]
        print(f"  {label:<44} {best[label]:7.0f} steps/s   update {1000 * statistics.median(u):6.1f} ms "
              f"(median of {len(u)})")
    local4, ray22, ray12 = (best[v[0]] for v in variants[:3])
    print(f"  step_delay_ms={d:g}: Ray 2x2 / local 4 envs: {ray22 / local4:.2f}x; Ray 2 workers / 1 worker: "
          f"{ray22 / ray12:.2f}x")
    fast_local, fast_ray = best[variants[3][0]], best[variants[4][0]]
    print(f"  Ray's cost per env step on a fast env: {1000 * (1 / fast_ray - 1 / fast_local):.2f} ms "
          f"({fast_ray:.0f} vs {fast_local:.0f} steps/s)")
    chunked, fast_chunked = best[variants[5][0]], best[variants[6][0]]
    print(f"  steps_per_call 8: Ray 2x2 / local 4 envs: {chunked / local4:.2f}x; cost per env step on a fast env "
          f"{1000 * (1 / fast_chunked - 1 / fast_local):.2f} ms")
    local_u: Optional[List[float]] = updates.get(variants[0][0])
    ray_u: Optional[List[float]] = updates.get(variants[1][0])
    if local_u and ray_u:
        print(f"  update per 1024-row buffer: local {1000 * statistics.median(local_u):.1f} ms, "
              f"Ray {1000 * statistics.median(ray_u):.1f} ms (medians)")


if __name__ == "__main__":
    start = time.perf_counter()
    main()
    print(f"  ({time.perf_counter() - start:.0f} s in all)")
    sys.exit(0)
