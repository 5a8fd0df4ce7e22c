"""Training throughput benchmark: PPO on CartPole-v1 with Stable-Baselines3's PPO defaults.

1 environment, buffer 2048, batch 64, 10 epochs, lr 3e-4 (linear), gamma 0.99, lambda
0.95, clip 0.2, 2x64 tanh network, no entropy bonus, 100k steps (config/ppo/CartPole.yaml).
Prints env steps/s, the split of wall time between env stepping, inference, trajectory
processing and updates, and the final mean reward. Compare with scripts/sb3_reference.py.

    python scripts/benchmark.py [--steps=100000] [--seed=1] [--config=config/ppo/CartPole.yaml]

With ``--signals``: PPO + curiosity + GAIL on the built-in Simple env, and the update time
per buffer with the one-run update beside the upstream-style mode that runs each network's
update in its own ``sess.run``.

    python scripts/benchmark.py --signals [--steps=20480]

With ``--sac``: SAC on Pendulum-v1 with Stable-Baselines3's zoo SAC settings
(config/sac/Pendulum.yaml: 256x256, batch 256, buffer 1e6, 100 steps before learning, one
update per step, 20k steps); compare with ``scripts/sb3_reference.py --sac``. ``--profile``
runs the training loop under cProfile and prints how the per-step path splits between the
inference call, the update call and the rest.

    python scripts/benchmark.py --sac [--steps=20000] [--profile]
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


def run(config: str, steps: int, seed: int, extra: dict | None = None, profile: bool = False) -> dict:
    # Imported before the clock starts (TensorFlow's import is ~5 s), as the SB3 reference
    # imports torch before timing learn().
    import trainers.controller  # noqa: F401
    import trainers.export  # noqa: F401
    from trainers.learn import run_training
    from trainers.settings import load_settings

    with tempfile.TemporaryDirectory(prefix="bench_") as results:
        overrides = {"run_id": "bench", "results_dir": results, "max_steps": steps, "seed": seed}
        overrides.update(extra or {})
        options = load_settings(config, overrides)
        profiler = None
        if profile:
            import cProfile

            profiler = cProfile.Profile()
        start = time.perf_counter()
        if profiler is not None:
            profiler.runcall(run_training, options)
        else:
            run_training(options)
        wall = time.perf_counter() - start
        run_dir = os.path.join(results, "bench")
        with open(os.path.join(run_dir, "run_logs", "timers.json")) as f:
            timers = json.load(f)
        behavior = next(iter(options.behaviors))
        with open(os.path.join(run_dir, behavior, "stats.csv")) as f:
            rewards = [float(r["mean"]) for r in csv.DictReader(f) if r["tag"] == "Environment/Cumulative Reward"]
    return {
        "wall": wall, "timers": timers, "final_reward": rewards[-1] if rewards else float("nan"), "steps": steps,
        "profiler": profiler, "behavior": behavior, "trainer": options.behavior_settings(behavior).trainer_type,
    }


def print_profile(profiler, steps: int) -> None:
    """The per-step path from cProfile: the inference call, the update call (their
    ``sess.run``), and the Python around them; then the top functions by own time."""
    import pstats

    stats = pstats.Stats(profiler)
    wanted = {
        "Policy.act (inference call)": ("policy.py", "act"),
        "FastCallable (every sess.run)": ("session.py", "__call__"),
        "SACTrainer.update (update call)": ("trainer.py", "update"),
        "SACOptimizer.update": ("optimizer.py", "update"),
        "ReplayBuffer.sample": ("replay.py", "sample"),
        "process_trajectory": ("trainer.py", "process_trajectory"),
        "env step (Gymnasium adapter)": ("env_manager.py", "step"),
    }
    rows = {}
    for (path, _, func), (cc, nc, tt, ct, callers) in stats.stats.items():
        for label, (file_end, name) in wanted.items():
            if path.endswith(file_end) and func == name and ct > rows.get(label, (0, 0, 0))[1]:
                rows[label] = (nc, ct, tt)
    total = stats.total_tt
    print(f"  cProfile (adds overhead; total {total:.1f} s, {1e3 * total / steps:.2f} ms per step):")
    for label, (nc, ct, tt) in rows.items():
        print(f"    {label:<34} {ct:7.1f} s cumulative  {nc:7d} calls  {1e6 * ct / max(nc, 1):8.0f} us/call")
    print("  top 12 functions by own time:")
    stats.sort_stats("tottime")
    for (path, line, func), (cc, nc, tt, ct, callers) in sorted(stats.stats.items(), key=lambda kv: -kv[1][2])[:12]:
        print(f"    {tt:7.1f} s  {nc:7d}  {os.path.basename(path)}:{line}({func})")


SIGNALS_CONFIG = {
    "behaviors": {
        "Simple": {
            "trainer_type": "ppo",
            "hyperparameters": {"batch_size": 128, "buffer_size": 2048, "num_epoch": 3, "learning_rate": 3.0e-4},
            "network_settings": {"hidden_units": 128, "num_layers": 2},
            "reward_signals": {
                "extrinsic": {"strength": 1.0, "gamma": 0.99},
                "curiosity": {"strength": 0.02, "gamma": 0.99, "encoding_size": 64},
                "gail": {"strength": 0.01, "gamma": 0.99, "encoding_size": 128, "use_actions": True,
                         "demo_path": os.path.join(ROOT, "config", "demos", "SimpleDiscrete.demo")},
            },
            "time_horizon": 64,
            "summary_freq": 100000,
            "checkpoint_interval": 1000000,
        }
    },
    "env_settings": {"env_path": "builtin:Simple", "env_args": {"continuous": 0, "discrete": 1}},
}


def signals_benchmark(steps: int, seed: int) -> None:
    import yaml

    from trainers.ppo.trainer import PPOTrainer

    folder = tempfile.TemporaryDirectory(prefix="bench_cfg_")
    path = os.path.join(folder.name, "signals.yaml")
    with open(path, "w") as f:
        yaml.safe_dump(SIGNALS_CONFIG, f)
    per_buffer = {}
    for mode, separate in (("one sess.run per minibatch", False), ("one sess.run per network", True)):
        PPOTrainer.separate_signal_updates = separate
        res = run(path, steps, seed)
        # The first update also compiles the update callables: left out.
        durations = sorted(res["timers"]["update_durations"][1:])
        per_buffer[mode] = durations[len(durations) // 2]
        print(
            f"  {mode:<28} update time per buffer (median of {len(durations)}): {per_buffer[mode] * 1000:7.1f} ms"
            f" (min {durations[0] * 1000:.1f})"
        )
    PPOTrainer.separate_signal_updates = False
    folder.cleanup()
    one, sep = per_buffer.values()  # medians
    print(f"  the one-run update takes {100 * (1 - one / sep):.0f} % less time than separate runs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=None, help="default 100000 (20480 with --signals)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--config", default=os.path.join(ROOT, "config", "ppo", "CartPole.yaml"))
    parser.add_argument("--signals", action="store_true", help="PPO + curiosity + GAIL update-time comparison")
    parser.add_argument("--sac", action="store_true", help="SAC on Pendulum-v1 (SB3 zoo settings)")
    parser.add_argument("--profile", action="store_true", help="cProfile the training loop")
    args = parser.parse_args()
    if args.signals:
        steps = args.steps or 20480
        print(f"PPO + curiosity + GAIL on builtin:Simple, {steps} steps")
        signals_benchmark(steps, args.seed)
        return None
    config = args.config
    steps = args.steps or 100_000
    if args.sac:
        config = os.path.join(ROOT, "config", "sac", "Pendulum.yaml") if config == parser.get_default("config") else config
        steps = args.steps or 20_000
    res = run(config, steps, args.seed, profile=args.profile)
    t = res["timers"]
    loop = t["total"]
    print(f"{res['trainer'].upper()} {res['behavior']}, {res['steps']} steps, seed {args.seed}")
    print(f"  wall time after imports (graph build, env start, checkpoints, exports): {res['wall']:.1f} s")
    print(f"  env steps/s: {res['steps'] / res['wall']:.0f} overall, {res['steps'] / loop:.0f} in the training loop")
    for part in ("env", "inference", "trajectories", "update"):
        print(f"  {part:<13} {t[part]:7.1f} s  ({100 * t[part] / loop:4.1f} %)")
    other = loop - sum(t[p] for p in ("env", "inference", "trajectories", "update"))
    print(f"  {'other':<13} {other:7.1f} s  ({100 * other / loop:4.1f} %)")
    print(f"  final mean reward (last summary): {res['final_reward']:.1f}")
    if res["profiler"] is not None:
        print_profile(res["profiler"], res["steps"])


if __name__ == "__main__":
    sys.exit(main())
