"""Recurrent SAC on the built-in Memory env, seed by seed: ML-Agents' pass criterion
(the mean return of the last 5 episodes > 0.9 at the end) and when it is first met.

``--ml-agents`` (the default) trains ML-Agents Release 22's ``test_recurrent_sac``
(``test_simple_rl.py`` at ac576f9f): ``SAC_TORCH_CONFIG`` (1 x 16 units, tau 0.01,
init_entcoef 0.01, buffer 5000, lr constant) evolved to memory_size 16, sequence_length
16, batch 256, lr 3e-4, buffer_init_steps 1000, steps_per_update 2, 4000 steps; discrete
actions on step_size 0.2, continuous on 0.5, as that test. ``--config=FILE`` trains a
config file instead (``config/sac/Memory.yaml``), its env args replaced by ``--actions``'.
Runs go through ``trainer-learn`` in this process, one seed after another:

    python scripts/diagnose_memory_sac.py [--actions=discrete|continuous] [--seeds=1,2,3,4,5]
        [--config=FILE] [--set KEY=VALUE ...] [--no-memory]

``--set`` overrides a behavior key by its dotted path (``hyperparameters.batch_size=128``),
the value read as YAML; ``--no-memory`` drops ``network_settings.memory`` (the control).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import yaml  # noqa: E402

THRESHOLD = 0.9
LAST_N = 5
#: ML-Agents' test_recurrent_sac: action_sizes (0, 1) on step_size 0.2, (1, 0) on 0.5.
ACTIONS = {
    "discrete": {"continuous": 0, "discrete": 1, "step_size": 0.2},
    "continuous": {"continuous": 1, "discrete": 0, "step_size": 0.5},
}


def ml_agents_recurrent_sac_config(actions: str) -> Dict[str, Any]:
    """ML-Agents Release 22's test_recurrent_sac settings as a trainer-learn config."""
    return {
        "behaviors": {
            "Memory": {
                "trainer_type": "sac",
                "hyperparameters": {
                    "batch_size": 256, "buffer_size": 5000, "buffer_init_steps": 1000, "learning_rate": 3.0e-4,
                    "learning_rate_schedule": "constant", "tau": 0.01, "init_entcoef": 0.01,
                    "steps_per_update": 2,
                },
                "network_settings": {
                    "hidden_units": 16, "num_layers": 1, "memory": {"memory_size": 16, "sequence_length": 16},
                },
                "reward_signals": {"extrinsic": {"strength": 1.0, "gamma": 0.99}},
                "max_steps": 4000,
                "time_horizon": 64,
                "summary_freq": 500,
                "checkpoint_interval": 4000,
            }
        },
        "env_settings": {"env_path": "builtin:Memory", "env_args": dict(ACTIONS[actions])},
    }


def last_n_means(episodes: Sequence[Tuple[int, float]]) -> List[Tuple[int, float]]:
    """(step at an episode's end, return) in order -> (step, mean of the last 5 returns)."""
    return [
        (episodes[i][0], sum(r for _, r in episodes[i - LAST_N + 1 : i + 1]) / LAST_N)
        for i in range(LAST_N - 1, len(episodes))
    ]


def run_seed(config: Dict[str, Any], seed: int, folder: str, args: Sequence[str] = ()) -> List[Tuple[int, float]]:
    """Trains one seed through trainer-learn; -> every episode's (trainer step at its end, return)."""
    from trainers.cli.learn import main
    from trainers.loop.trajectory import EpisodeEnd
    from trainers.trainer import Trainer

    episodes: List[Tuple[int, float]] = []
    original = Trainer.record_episodes

    def record(self: Trainer, ends: Sequence[EpisodeEnd]) -> None:
        episodes.extend((int(self.step), float(e.reward)) for e in ends)
        original(self, ends)

    path = os.path.join(folder, f"memory_sac_{seed}.yaml")
    with open(path, "w") as f:
        yaml.safe_dump(config, f)
    # Every episode's return, as ML-Agents' test env records them (the stats file has the
    # summary periods' means only).
    setattr(Trainer, "record_episodes", record)
    try:
        code = main([path, f"--run-id=s{seed}", f"--seed={seed}", f"--results-dir={folder}", "--force", *args])
    finally:
        setattr(Trainer, "record_episodes", original)
    if code != 0:
        raise SystemExit(f"seed {seed}: trainer-learn exited with {code}")
    return episodes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--actions", choices=sorted(ACTIONS), default="discrete")
    parser.add_argument("--seeds", default="1,2,3,4,5")
    parser.add_argument("--config", help="a config file with a Memory behavior (default: ML-Agents' settings)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--no-memory", action="store_true")
    args = parser.parse_args()
    if args.config:
        with open(args.config) as f:
            config = yaml.safe_load(f)
        config["env_settings"]["env_args"] = dict(ACTIONS[args.actions])
        # The copy is written elsewhere: demo paths made absolute from the file's folder.
        folder = os.path.dirname(os.path.abspath(args.config))
        section = config["behaviors"]["Memory"]
        for part in [section.get("behavioral_cloning")] + list((section.get("reward_signals") or {}).values()):
            if isinstance(part, dict) and part.get("demo_path") and not os.path.isabs(part["demo_path"]):
                part["demo_path"] = os.path.normpath(os.path.join(folder, part["demo_path"]))
    else:
        config = ml_agents_recurrent_sac_config(args.actions)
    behavior = config["behaviors"]["Memory"]
    for item in args.set:
        key, _, value = item.partition("=")
        *path, last = key.split(".")
        node = behavior
        for part in path:
            node = node.setdefault(part, {})
        node[last] = yaml.safe_load(value)
    if args.no_memory:
        behavior["network_settings"].pop("memory", None)
    steps = int(behavior["max_steps"])
    seeds = [int(s) for s in args.seeds.split(",")]
    print(f"Memory, {args.actions}, {args.config or 'ML-Agents test_recurrent_sac'}, {steps} steps, "
          f"overrides: {args.set or 'none'}{', no memory' if args.no_memory else ''}", flush=True)
    passed = 0
    with tempfile.TemporaryDirectory() as folder:
        for seed in seeds:
            start = time.perf_counter()
            means = last_n_means(run_seed(config, seed, folder))
            final: Optional[float] = means[-1][1] if means else None
            first = next((s for s, m in means if m > THRESHOLD), None)
            passed += final is not None and final > THRESHOLD
            shown = "nan" if final is None else f"{final:.3f}"
            marks = [(step, [m for s, m in means if s <= step]) for step in range(1000, steps, 1000)]
            at = "  ".join(f"{step}: {before[-1]:5.2f}" for step, before in marks if before)
            print(f"seed {seed}: last-5 mean at the end {shown}  first > 0.9 at step {first or '-'}  "
                  f"(at {at})  ({time.perf_counter() - start:.0f} s)", flush=True)
    print(f"passed (last-5 mean > {THRESHOLD} at {steps}): {passed}/{len(seeds)}")


if __name__ == "__main__":
    main()
