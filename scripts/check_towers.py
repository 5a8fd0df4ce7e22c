"""Checks that N towers give the same update as 1 tower, and that towers run on their devices.

Builds the full update graph (PPO or SAC + curiosity + GAIL + RND, optionally VAIL) once with one tower
and once with N towers, loads the same weights into both, runs one update on the same
minibatch, and prints the largest difference of every weight and statistic (relative to
the largest value of the same network) and the devices each tower's ops ran on. Exits 1
above the tolerance.

    python scripts/check_towers.py [--trainer=ppo|sac] [--devices=/cpu:0,/cpu:1] [--rows=96] [--vail]
                                   [--memory] [--tolerance=1e-5] [--continuous]

``--memory``: an LSTM actor and critic (memory_size 16, sequence_length 8); the minibatch is
``rows // 8`` whole sequences, some with masked rows and trajectories starting inside them
(``reset``), with random stored memories per row, so towers
must split by sequences (an uneven count when it is not a multiple of the tower count).

``--trainer=sac`` checks SAC's update (twin Q, value, target update, entropy coefficients)
with the same signals; ``--continuous`` uses the continuous Simple demo and spec (SAC's
squashed Gaussian and its fed noise) instead of the discrete one. ``--trainer=sac --memory``:
recurrent SAC (an LSTM in the actor, both Q networks, V and V'), whose sequences start
from their first row's stored ``memory`` / ``critic_memory`` and may begin with masked
(padding) rows, as the replay buffer's do.

On a GPU machine: ``--devices=/gpu:0,/gpu:1`` (the reference tower uses the first device).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections import defaultdict
from typing import Dict, List, Tuple

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEMO = os.path.join(ROOT, "config", "demos", "SimpleDiscrete.demo")
CONTINUOUS_DEMO = os.path.join(ROOT, "config", "demos", "SimpleContinuous.demo")


MEMORY_SIZE = 16
SEQUENCE_LENGTH = 8


def build(
    devices: Tuple[str, ...],
    vail: bool,
    memory: bool = False,
    trainer: str = "ppo",
    continuous: bool = False,
    batch_size: int = 64,
):
    """(spec, trainer) on ``devices``; ``batch_size``: the rows of the minibatches it will be
    fed (a feed-forward PPO update on one tower is built for exactly that many)."""
    from envs.demo import load_demonstration
    from trainers.ppo.trainer import PPOTrainer
    from trainers.sac.trainer import SACTrainer
    from trainers.config import (
        CuriositySettings,
        ExtrinsicSettings,
        GAILSettings,
        MemorySettings,
        NetworkSettings,
        PPOSettings,
        RNDSettings,
        SACSettings,
        TrainerSettings,
    )
    from trainers.stats import StatsReporter

    demo = CONTINUOUS_DEMO if continuous else DEMO
    spec = load_demonstration(demo).behavior_spec
    buffer_size = max(256, batch_size)
    hyper = (
        SACSettings(batch_size=batch_size, buffer_size=buffer_size)
        if trainer == "sac"
        else PPOSettings(batch_size=batch_size, buffer_size=buffer_size)
    )
    settings = TrainerSettings(
        trainer_type=trainer,
        hyperparameters=hyper,
        network_settings=NetworkSettings(
            hidden_units=32,
            num_layers=2,
            memory=MemorySettings(MEMORY_SIZE, SEQUENCE_LENGTH) if memory else None,
        ),
        reward_signals={
            "extrinsic": ExtrinsicSettings(),
            "curiosity": CuriositySettings(strength=0.1, encoding_size=16),
            "gail": GAILSettings(demo_path=demo, encoding_size=32, use_actions=True, use_vail=vail),
            "rnd": RNDSettings(strength=0.01, learning_rate=1e-3, network_settings=NetworkSettings(hidden_units=16)),
        },
    )
    cls = SACTrainer if trainer == "sac" else PPOTrainer
    return spec, cls("Simple", spec, settings, StatsReporter("Simple", []), 0, devices)


def random_minibatch(trainer, rows: int, rng: np.random.Generator) -> Dict[str, np.ndarray]:
    """A value of the right shape and dtype for every update placeholder."""
    spec = trainer.spec
    mb: Dict[str, np.ndarray] = {}
    for key, ph in trainer.optimizer.placeholders.items():
        shape = (rows,) + tuple(int(d) for d in ph.shape[1:])
        if key == "discrete_action":
            mb[key] = np.stack([rng.integers(0, b, rows) for b in spec.action_spec.discrete_branches], 1).astype(np.int32)
        elif key in ("masks", "action_mask"):
            mb[key] = np.ones(shape, np.float32)
        elif key == "reset":
            # Trajectory starts inside packed sequences (the LSTMs restart from the row's memory).
            mb[key] = (rng.uniform(size=shape) < 0.2).astype(np.float32)
        elif key in ("done", "terminal"):
            mb[key] = (rng.uniform(size=shape) < 0.2).astype(np.float32)
        elif key == "prev_action":
            mb[key] = np.stack([rng.integers(0, b, rows) for b in spec.action_spec.discrete_branches], 1).astype(np.int32)
        else:
            mb[key] = rng.normal(size=shape).astype(np.float32)
    length = trainer.policy.sequence_length
    if length > 1:
        # Masked rows (mask 0) at the start of every third sequence (they must weigh
        # nothing in any tower).
        for start in range(0, rows, 3 * length):
            mb["masks"][start : start + rng.integers(1, length)] = 0.0
    return mb


def run_update(trainer, mb, trace: bool):
    from trainers.tf import tf

    feed: Dict = {}
    for signal in trainer.signals.values():
        feed.update(signal.prepare_update(mb, rows_of(mb)))
    opt = trainer.optimizer
    if not trace:
        return opt.update(mb, 1, feed), None
    full = {opt.placeholders[k]: v for k, v in mb.items()}
    full.update(feed)
    full[opt.current_step] = 1
    meta = tf.RunMetadata()
    values = trainer.policy.session.run(
        dict(zip(opt._stat_names, opt._stat_tensors)),
        full,
        options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE),
        run_metadata=meta,
    )
    trainer.policy.session.run(opt._update_op, full)
    return {k: float(v) for k, v in values.items()}, meta


def rows_of(mb: Dict[str, np.ndarray]) -> int:
    return len(mb["masks"])


def tower_devices(meta, graph) -> Dict[str, List[str]]:
    placed = defaultdict(set)
    for dev in meta.step_stats.dev_stats:
        for node in dev.node_stats:
            tower = node.node_name.split("/")[0]
            if not tower.startswith("tower_") or tower == "tower_average":
                continue
            try:
                if graph.get_operation_by_name(node.node_name).type == "ReadVariableOp":
                    continue  # reads happen where the variable lives
            except KeyError:
                pass
            placed[tower].add(dev.device.split("device:")[-1])
    return {k: sorted(v) for k, v in sorted(placed.items())}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", default="/cpu:0,/cpu:1")
    parser.add_argument("--rows", type=int, default=96)
    parser.add_argument("--vail", action="store_true")
    parser.add_argument("--memory", action="store_true", help="LSTM actor and critic, sequences of 8 rows")
    parser.add_argument("--tolerance", type=float, default=1e-5)
    parser.add_argument("--trainer", choices=("ppo", "sac"), default="ppo")
    parser.add_argument("--continuous", action="store_true")
    args = parser.parse_args()
    devices = tuple(d.strip() for d in args.devices.split(","))
    rng = np.random.default_rng(0)

    if args.memory:
        args.rows -= args.rows % SEQUENCE_LENGTH
    _, one = build(devices[:1], args.vail, args.memory, args.trainer, args.continuous, args.rows)
    folder = tempfile.TemporaryDirectory(prefix="check_towers_")
    prefix = one.save(folder.name)
    mb = random_minibatch(one, args.rows, rng)
    variables = one.policy.graph.get_collection("variables")
    stats_one, _ = run_update(one, mb, trace=False)
    weights_one = dict(zip([v.op.name for v in variables], one.policy.session.run(variables)))
    one.close()

    _, many = build(devices, args.vail, args.memory, args.trainer, args.continuous, args.rows)
    many.load(prefix)
    stats_many, meta = run_update(many, mb, trace=True)
    variables = many.policy.graph.get_collection("variables")
    weights_many = dict(zip([v.op.name for v in variables], many.policy.session.run(variables)))
    placement = tower_devices(meta, many.policy.graph)
    many.close()
    folder.cleanup()

    worst = 0.0
    by_network: Dict[str, float] = defaultdict(float)
    worst_variable: Dict[str, str] = {}
    scale: Dict[str, float] = defaultdict(lambda: 1e-12)
    for name, value in weights_one.items():
        net = name.split("/")[0]
        scale[net] = max(scale[net], float(np.max(np.abs(value))) if np.size(value) else 0.0)
    for name, value in weights_one.items():
        net = name.split("/")[0]
        diff = float(np.max(np.abs(np.asarray(value, np.float64) - weights_many[name]))) if np.size(value) else 0.0
        if diff / scale[net] >= by_network[net]:
            by_network[net] = diff / scale[net]
            worst_variable[net] = name
    shape = f"{args.rows // SEQUENCE_LENGTH} sequences of {SEQUENCE_LENGTH}, " if args.memory else ""
    print(f"1 tower on {devices[0]} vs {len(devices)} towers on {', '.join(devices)}; minibatch of {shape}{args.rows} rows")
    print("weights after one update, max |diff| / max |weight| per network:")
    for net, d in sorted(by_network.items()):
        print(f"  {net:<28} {d:.2e}  ({worst_variable.get(net, '')})")
        worst = max(worst, d)
    print("statistics, |diff| / max(|value|, 1e-3):")
    for key in sorted(stats_one):
        d = abs(stats_one[key] - stats_many[key]) / max(abs(stats_one[key]), 1e-3)
        worst = max(worst, d)
        print(f"  {key:<28} {stats_one[key]: .6g} vs {stats_many[key]: .6g}  ({d:.1e})")
    print("devices each tower's ops ran on:")
    for tower, devs in placement.items():
        print(f"  {tower}: {', '.join(devs)}")
    ok_place = all(len(devs) == 1 and devs[0].lower() == devices[int(t.split('_')[1])].lstrip("/").lower()
                   for t, devs in placement.items()) and len(placement) == len(devices)
    ok = worst <= args.tolerance and ok_place
    print(f"worst relative difference {worst:.2e} (tolerance {args.tolerance:.0e}); placement {'ok' if ok_place else 'WRONG'}")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
