"""Recurrent PPO on the built-in Memory env with ML-Agents' recurrent test settings
(issue 32 item 2): how many steps each seed needs, one command per variant.

ML-Agents Release 22's ``test_recurrent_ppo`` (``test_simple_rl.py`` at ac576f9f):
``PPO_TORCH_CONFIG`` (1 x 32 units, lr constant, beta and epsilon decaying linearly over
max_steps) evolved to memory_size 16 (sequence_length: the default 64), lr 1e-3, batch 64,
buffer 128, 6000 steps; it passes when the mean return of the last 5 episodes is > 0.9 at
the end. Hybrid actions: ``test_hybrid_recurrent_ppo`` (``test_hybrid.py``): the same with
step_size 0.5, buffer 512, 5000 steps. This script trains that config through
``trainer-learn`` (in this process, one seed after another) and prints per seed:

* ``stays``: the step from which the mean of the last 5 episode returns stays above 0.9
  to the end of the run (``-`` if it is not above 0.9 at the end);
* ``first``: the first step at which that mean is above 0.9;
* the last-5 mean at 1000, 2000, 3000, 4000 steps (those before the end) and at the end
  (ML-Agents' criterion).

    python scripts/diagnose_memory.py [--actions=discrete|continuous|hybrid]
        [--seeds=1,2,3,4,5] [--steps=N] [--set KEY=VALUE ...] [--config=FILE] [--json=FILE]

``--set`` overrides a behavior key by its dotted path (``hyperparameters.pack_sequences=true``,
``network_settings.memory.sequence_length=16``), the value read as YAML. ``--config``
trains that config file's behavior instead (e.g. ``config/ppo/Memory.yaml``; ``--actions``
and ``--steps`` then override its env_args and max_steps only when given). ``--json``
also writes every episode's (step, return) per seed. Figures: README, "Memory (LSTM)".
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import yaml  # noqa: E402

#: env_args per action kind (ML-Agents' action_sizes (continuous, discrete)); hybrid is
#: ML-Agents' test_hybrid_recurrent_ppo (test_hybrid.py): step_size 0.5.
ACTIONS: Dict[str, Dict[str, Any]] = {
    "discrete": {"continuous": 0, "discrete": 1},
    "continuous": {"continuous": 1, "discrete": 0},
    "hybrid": {"continuous": 1, "discrete": 1, "step_size": 0.5},
}
#: ML-Agents' budget per action kind: test_recurrent_ppo 6000 steps; test_hybrid_recurrent_ppo
#: 5000 steps with buffer_size 512.
STEPS = {"discrete": 6000, "continuous": 6000, "hybrid": 5000}
BUFFER_SIZE = {"discrete": 128, "continuous": 128, "hybrid": 512}
THRESHOLD = 0.9
LAST_N = 5


def ml_agents_recurrent_config(actions: str, steps: int) -> Dict[str, Any]:
    """ML-Agents Release 22's recurrent PPO test settings as a trainer-learn config."""
    return {
        "behaviors": {
            "Memory": {
                "trainer_type": "ppo",
                "hyperparameters": {
                    "batch_size": 64, "buffer_size": BUFFER_SIZE[actions], "learning_rate": 1.0e-3,
                    "learning_rate_schedule": "constant", "beta_schedule": "linear",
                    "epsilon_schedule": "linear",
                },
                "network_settings": {
                    "hidden_units": 32, "num_layers": 1, "memory": {"memory_size": 16, "sequence_length": 64},
                },
                "reward_signals": {"extrinsic": {"strength": 1.0, "gamma": 0.99}},
                "max_steps": steps,
                "time_horizon": 64,
                "summary_freq": 500,
                "checkpoint_interval": steps,
            }
        },
        "env_settings": {"env_path": "builtin:Memory", "env_args": dict(ACTIONS[actions])},
    }


def _behavior(config: Dict[str, Any]) -> Dict[str, Any]:
    behaviors = config["behaviors"]
    if len(behaviors) != 1:
        raise SystemExit(f"expected a config with one behavior, got {sorted(behaviors)}")
    return next(iter(behaviors.values()))


def _set(config: Dict[str, Any], dotted: str, value: Any) -> None:
    node = _behavior(config)
    *path, last = dotted.split(".")
    for key in path:
        node = node.setdefault(key, {})
    node[last] = value


def summarize(episodes: Sequence[Tuple[int, float]], end: int) -> Dict[str, Any]:
    """``episodes``: (step at its end, return) in order -> the figures printed per seed."""
    means: List[Tuple[int, float]] = []
    for i in range(LAST_N - 1, len(episodes)):
        window = [r for _, r in episodes[i - LAST_N + 1 : i + 1]]
        means.append((episodes[i][0], sum(window) / LAST_N))
    first = next((s for s, m in means if m > THRESHOLD), None)
    stays: Optional[int] = None
    for s, m in reversed(means):
        if m <= THRESHOLD:
            break
        stays = s
    at = {}
    for step in [s for s in (1000, 2000, 3000, 4000) if s < end] + [end]:
        before = [m for s, m in means if s <= step]
        at[step] = before[-1] if before else float("nan")
    return {"first": first, "stays": stays, "at": at, "final": at[end]}


def run_seed(config: Dict[str, Any], seed: int, folder: str) -> List[Tuple[int, float]]:
    """Trains one seed; -> every episode's (trainer step at its end, return)."""
    from trainers.cli.learn import main
    from trainers.loop.trajectory import EpisodeEnd
    from trainers.trainer import Trainer

    episodes: List[Tuple[int, float]] = []
    original = Trainer.record_episodes

    def record(self: Trainer, ends: Sequence[EpisodeEnd]) -> None:
        episodes.extend((int(self.step), float(e.reward)) for e in ends)
        original(self, ends)

    path = os.path.join(folder, f"memory_{seed}.yaml")
    with open(path, "w") as f:
        yaml.safe_dump(config, f)
    Trainer.record_episodes = record  # type: ignore[method-assign,assignment]
    try:
        code = main([path, f"--run-id=s{seed}", f"--seed={seed}", f"--results-dir={folder}", "--force"])
    finally:
        Trainer.record_episodes = original  # type: ignore[method-assign]
    if code != 0:
        raise SystemExit(f"seed {seed}: trainer-learn exited with {code}")
    return episodes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--actions", choices=sorted(ACTIONS))
    parser.add_argument("--seeds", default="1,2,3,4,5")
    parser.add_argument("--steps", type=int, help="default: ML-Agents' budget (6000; hybrid 5000)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--config", help="train this config file's behavior instead of ML-Agents' test settings")
    parser.add_argument("--json", help="also write every episode's (step, return) per seed here")
    args = parser.parse_args()
    if args.config:
        with open(args.config) as f:
            config = yaml.safe_load(f)
        behavior = _behavior(config)
        folder = os.path.dirname(os.path.abspath(args.config))
        sections = [behavior.get("behavioral_cloning")] + list((behavior.get("reward_signals") or {}).values())
        for section in sections:  # demos relative to the config's folder, as the loader reads them
            if isinstance(section, dict) and section.get("demo_path") and not os.path.isabs(section["demo_path"]):
                section["demo_path"] = os.path.normpath(os.path.join(folder, section["demo_path"]))
        if args.actions:
            config.setdefault("env_settings", {})["env_args"] = dict(ACTIONS[args.actions])
        if args.steps:
            behavior["max_steps"] = args.steps
        steps = int(behavior["max_steps"])
        behavior["checkpoint_interval"] = steps  # one export, at the end
    else:
        args.actions = args.actions or "discrete"
        steps = args.steps or STEPS[args.actions]
        config = ml_agents_recurrent_config(args.actions, steps)
    for item in args.set:
        key, _, value = item.partition("=")
        _set(config, key, yaml.safe_load(value))
    seeds = [int(s) for s in args.seeds.split(",")]
    results: Dict[int, Any] = {}
    source = args.config or f"ML-Agents' recurrent test settings, {args.actions}"
    print(f"{source}, {steps} steps, overrides: {args.set or 'none'}", flush=True)
    with tempfile.TemporaryDirectory() as folder:
        for seed in seeds:
            start = time.perf_counter()
            episodes = run_seed(config, seed, folder)
            s = summarize(episodes, steps)
            results[seed] = {"episodes": episodes, "first": s["first"], "stays": s["stays"], "final": s["final"]}
            at = "  ".join(f"{step}: {m:5.2f}" for step, m in s["at"].items())
            print(
                f"seed {seed}: stays > 0.9 from {s['stays'] or '-':>5}  first {s['first'] or '-':>5}  "
                f"last-5 mean at {at}  ({time.perf_counter() - start:.0f} s)",
                flush=True,
            )
    passed = sum(r["final"] > THRESHOLD for r in results.values())
    within_3000 = sum(r["stays"] is not None and r["stays"] <= 3000 for r in results.values())
    print(f"passed (last-5 mean > 0.9 at {steps}): {passed}/{len(seeds)}; "
          f"stays above 0.9 from <= 3000: {within_3000}/{len(seeds)}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "results": results}, f)


if __name__ == "__main__":
    main()
