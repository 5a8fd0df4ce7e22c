"""Update throughput of the tower graph: 1, 2, 4 towers x batch sizes x network sizes.

Builds the full PPO update graph (actor copy + critic + losses, Adam) with N towers on
virtual CPU devices (or the devices given), runs one-``sess.run`` minibatch updates on a
fixed random minibatch, and prints samples/s (best of ``--rounds`` rounds) and the overhead of N towers vs 1.

    python scripts/benchmark_towers.py [--towers=1,2,4] [--batches=256,1024,4096,8192]
        [--nets=2x128,3x512,visual] [--repeats=5] [--rounds=3] [--device-kind=cpu|gpu]
"""
from __future__ import annotations

import argparse
import sys
import time
from typing import Dict, List, Tuple

import numpy as np


def build(net: str, devices: Tuple[str, ...]):
    from envs.base_env import ActionSpec, BehaviorSpec, ObservationKind, ObservationSpec
    from trainers.ppo.trainer import PPOTrainer
    from trainers.settings import NetworkSettings, PPOSettings, TrainerSettings
    from trainers.stats import StatsReporter

    if net == "visual":
        obs = (ObservationSpec((84, 84, 3), "camera", ObservationKind.VISUAL), ObservationSpec((8,), "vector"))
        network = NetworkSettings(hidden_units=256, num_layers=2, vis_encode_type="nature_cnn")
    else:
        layers, units = (int(x) for x in net.split("x"))
        obs = (ObservationSpec((32,), "vector"),)
        network = NetworkSettings(hidden_units=units, num_layers=layers)
    spec = BehaviorSpec(obs, ActionSpec(2, (3,)))
    settings = TrainerSettings(hyperparameters=PPOSettings(batch_size=256, buffer_size=8192), network_settings=network)
    return spec, PPOTrainer("Bench", spec, settings, StatsReporter("Bench", []), 0, devices)


def minibatch(spec, n: int, rng: np.random.Generator) -> Dict[str, np.ndarray]:
    mb = {f"obs_{i}": rng.uniform(0, 1, size=(n,) + o.shape).astype(np.float32) for i, o in enumerate(spec.observation_specs)}
    mb.update(
        continuous_action=rng.normal(size=(n, 2)).astype(np.float32),
        discrete_action=rng.integers(0, 3, size=(n, 1)).astype(np.int32),
        action_mask=np.ones((n, 3), np.float32),
        log_probs=rng.normal(-3, 0.2, size=n).astype(np.float32),
        advantages=rng.normal(size=n).astype(np.float32),
        masks=np.ones(n, np.float32),
        extrinsic_returns=rng.normal(size=n).astype(np.float32),
        extrinsic_value_estimates=rng.normal(size=n).astype(np.float32),
    )
    return mb


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--towers", default="1,2,4")
    parser.add_argument("--batches", default="256,1024,4096,8192")
    parser.add_argument("--visual-batches", default="256,1024")
    parser.add_argument("--nets", default="2x128,3x512,visual")
    parser.add_argument("--repeats", type=int, default=5, help="updates per timed round")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds; the best is kept")
    parser.add_argument("--device-kind", default="cpu", choices=("cpu", "gpu"))
    args = parser.parse_args()
    towers = [int(t) for t in args.towers.split(",")]
    rng = np.random.default_rng(0)
    print(f"{'net':<8} {'batch':>6} " + " ".join(f"{f'{t} tower(s)':>14}" for t in towers) + "   overhead vs 1")
    for net in args.nets.split(","):
        batches = args.visual_batches if net == "visual" else args.batches
        for batch in (int(b) for b in batches.split(",")):
            rates: List[float] = []
            for n in towers:
                devices = tuple(f"/{args.device_kind}:{i}" for i in range(n))
                spec, trainer = build(net, devices)
                mb = minibatch(spec, batch, rng)
                trainer.optimizer.update(mb, 1, {})  # warm-up: builds the callable, allocates
                best = float("inf")
                for _ in range(args.rounds):  # best of several rounds: robust to other load
                    start = time.perf_counter()
                    for _ in range(args.repeats):
                        trainer.optimizer.update(mb, 1, {})
                    best = min(best, time.perf_counter() - start)
                rates.append(batch * args.repeats / best)
                trainer.close()
            overhead = " ".join(f"{100 * (rates[0] / r - 1):+5.1f}%" for r in rates[1:])
            print(f"{net:<8} {batch:>6} " + " ".join(f"{r:>12.0f}/s" for r in rates) + f"   {overhead}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
