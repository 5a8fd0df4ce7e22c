"""Update throughput of the tower graph: 1, 2, 4 towers x batch sizes x network sizes.

Builds the full PPO update graph (actor copy + critic + losses, Adam) with N towers on
virtual CPU devices (or the devices given), runs one-``sess.run`` minibatch updates on a
fixed random minibatch, and prints samples/s (best of ``--rounds`` rounds) and the overhead of N towers vs 1.

    python scripts/benchmark_towers.py [--towers=1,2,4] [--batches=256,1024,4096,8192]
        [--nets=2x128,3x512,visual] [--repeats=5] [--rounds=3] [--device-kind=cpu|gpu]

With ``--cluster=<file>`` (workers already serving) or ``--cluster=loopback`` (starts 2
worker processes on free 127.0.0.1 ports and ends them), it compares the cluster's towers
with as many local virtual devices, and reports the bytes one update moves over gRPC
(measured from the run's step stats: every tensor a task receives from another task), and
the time of the copy of every variable to the chief's server and back that each
``update()`` (not each minibatch) adds.

    python scripts/benchmark_towers.py --cluster=loopback --nets=3x512 --batches=4096,8192
"""
from __future__ import annotations

import argparse
import sys
import time
from typing import Dict, List, Tuple

import numpy as np


def build(net: str, devices: Tuple[str, ...], batch: int, cluster=None):
    """(spec, PPO trainer) for minibatches of ``batch`` rows (a one-tower update is built
    for exactly that many)."""
    from envs.base_env import ActionSpec, BehaviorSpec, ObservationKind, ObservationSpec
    from trainers.ppo.trainer import PPOTrainer
    from trainers.config import NetworkSettings, PPOSettings, TrainerSettings
    from trainers.stats import StatsReporter

    if net == "visual":
        obs = (ObservationSpec((84, 84, 3), "camera", ObservationKind.VISUAL), ObservationSpec((8,), "vector"))
        network = NetworkSettings(hidden_units=256, num_layers=2, vis_encode_type="nature_cnn")
    else:
        layers, units = (int(x) for x in net.split("x"))
        obs = (ObservationSpec((32,), "vector"),)
        network = NetworkSettings(hidden_units=units, num_layers=layers)
    spec = BehaviorSpec(obs, ActionSpec(2, (3,)))
    hyper = PPOSettings(batch_size=batch, buffer_size=max(8192, batch))
    settings = TrainerSettings(hyperparameters=hyper, network_settings=network)
    return spec, PPOTrainer("Bench", spec, settings, StatsReporter("Bench", []), 0, devices, cluster=cluster)


def minibatch(spec, n: int, rng: np.random.Generator) -> Dict[str, np.ndarray]:
    mb = {f"obs_{i}": rng.uniform(0, 1, size=(n,) + o.shape).astype(np.float32) for i, o in enumerate(spec.observation_specs)}
    mb.update(
        continuous_action=rng.normal(size=(n, 2)).astype(np.float32),
        discrete_action=rng.integers(0, 3, size=(n, 1)).astype(np.int32),
        action_mask=np.ones((n, 3), np.float32),
        log_probs=rng.normal(-1, 0.2, size=(n, 3)).astype(np.float32),  # per column: 2 continuous, 1 branch
        advantages=rng.normal(size=n).astype(np.float32),
        masks=np.ones(n, np.float32),
        extrinsic_returns=rng.normal(size=n).astype(np.float32),
        extrinsic_value_estimates=rng.normal(size=n).astype(np.float32),
    )
    return mb


def timed_rate(trainer, mb, batch: int, repeats: int, rounds: int) -> float:
    """Samples/s of one-run minibatch updates, best of ``rounds``."""
    trainer.behavior_graph.begin_update()  # a cluster trainer's weights go to the chief's server
    trainer.optimizer.update(mb, 1, {})  # warm-up: builds the callable, allocates
    best = float("inf")
    for _ in range(rounds):  # best of several rounds: robust to other load
        start = time.perf_counter()
        for _ in range(repeats):
            trainer.optimizer.update(mb, 1, {})
        best = min(best, time.perf_counter() - start)
    return batch * repeats / best


def grpc_bytes(trainer, mb) -> Tuple[int, int]:
    """Bytes one update run receives across tasks: (chief -> workers, workers -> chief).

    From a FULL_TRACE run's step stats: every ``RecvTensor`` (a tensor one task fetched
    from another over gRPC) with its size, on the receiving task.
    """
    from trainers.tf import tf

    opt = trainer.optimizer
    feed = {opt.placeholders[k]: v for k, v in mb.items()}
    feed[opt.current_step] = 1
    meta = tf.RunMetadata()
    options = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)
    trainer.policy.update_session.run(opt._update_op, feed, options=options, run_metadata=meta)
    down = up = 0
    for dev in meta.step_stats.dev_stats:
        size = sum(
            o.tensor_description.allocation_description.requested_bytes
            for node in dev.node_stats
            if node.node_name == "RecvTensor"
            for o in node.output
        )
        if "/job:worker/" in dev.device:
            down += size
        else:
            up += size
    return down, up


def cluster_main(args) -> int:
    """--cluster: N loopback/remote worker towers vs N local virtual devices."""
    import contextlib
    import os
    import tempfile

    from trainers.config import load_cluster_file
    from trainers.tf.cluster import Chief

    stack = contextlib.ExitStack()
    path = args.cluster
    with stack:
        if path == "loopback":
            sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "trainers"))
            from cluster_utils import loopback_workers, write_cluster_file

            folder = stack.enter_context(tempfile.TemporaryDirectory())
            path = os.path.join(folder, "cluster.yaml")
            write_cluster_file(path, 2)
            stack.enter_context(loopback_workers(path, 2))
        chief = Chief(load_cluster_file(path))
        n = len(chief.tower_devices)
        rng = np.random.default_rng(0)
        print(f"cluster: {n} towers: {', '.join(chief.tower_devices)}")
        print(f"{'net':<8} {'batch':>6} {f'{n} local devices':>18} {f'{n} cluster towers':>18} {'overhead':>9}"
              f" {'MB chief->workers':>18} {'MB workers->chief':>18} {'push+pull ms':>13}")
        for net in args.nets.split(","):
            for batch in (int(b) for b in args.batches.split(",")):
                spec, local = build(net, tuple(f"/cpu:{i}" for i in range(n)), batch)
                mb = minibatch(spec, batch, rng)
                rate_local = timed_rate(local, mb, batch, args.repeats, args.rounds)
                local.close()
                spec, remote = build(net, (), batch, cluster=chief)
                rate_cluster = timed_rate(remote, mb, batch, args.repeats, args.rounds)
                down, up = grpc_bytes(remote, mb)
                sync = float("inf")  # once per update(): weights to the chief's server and back
                for _ in range(3):
                    start = time.perf_counter()
                    remote.behavior_graph.begin_update()
                    remote.behavior_graph.end_update()
                    sync = min(sync, time.perf_counter() - start)
                remote.close()
                print(
                    f"{net:<8} {batch:>6} {rate_local:>16.0f}/s {rate_cluster:>16.0f}/s {100 * (rate_local / rate_cluster - 1):+8.1f}%"
                    f" {down / 1e6:>18.2f} {up / 1e6:>18.2f} {1e3 * sync:>13.1f}",
                    flush=True,
                )
        chief.end_workers()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--towers", default="1,2,4")
    parser.add_argument("--batches", default="256,1024,4096,8192")
    parser.add_argument("--visual-batches", default="256,1024")
    parser.add_argument("--nets", default="2x128,3x512,visual")
    parser.add_argument("--repeats", type=int, default=5, help="updates per timed round")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds; the best is kept")
    parser.add_argument("--device-kind", default="cpu", choices=("cpu", "gpu"))
    parser.add_argument("--cluster", default=None, help="a cluster file, or 'loopback' (2 local worker processes)")
    args = parser.parse_args()
    if args.cluster:
        return cluster_main(args)
    towers = [int(t) for t in args.towers.split(",")]
    rng = np.random.default_rng(0)
    print(f"{'net':<8} {'batch':>6} " + " ".join(f"{f'{t} tower(s)':>14}" for t in towers) + "   overhead vs 1")
    for net in args.nets.split(","):
        batches = args.visual_batches if net == "visual" else args.batches
        for batch in (int(b) for b in batches.split(",")):
            rates: List[float] = []
            for n in towers:
                devices = tuple(f"/{args.device_kind}:{i}" for i in range(n))
                spec, trainer = build(net, devices, batch)
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
