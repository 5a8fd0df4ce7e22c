"""Helpers shared by the trainer tests: specs, small settings, config paths, and runs of
ML-Agents' learning tests seed by seed (every episode's return, the last-5 criterion)."""
from __future__ import annotations

import csv
import os
import time
from typing import Any, Dict, List, Sequence, Tuple, Union

import numpy as np
import yaml

from envs.base_env import ActionSpec, ActionTuple, BehaviorSpec, ObservationKind, ObservationSpec
from trainers.config import NetworkSettings, PPOSettings, TrainerSettings
from trainers.loop.trajectory import AgentProcessor

CONFIG_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "config")


def make_spec(continuous: int = 0, branches: Sequence[int] = (), vector: int = 3, visual=None) -> BehaviorSpec:
    obs = [ObservationSpec((vector,), "vector", ObservationKind.VECTOR)]
    if visual is not None:
        obs.append(ObservationSpec(visual, "camera", ObservationKind.VISUAL))
    return BehaviorSpec(tuple(obs), ActionSpec(continuous, tuple(branches)))


def small_settings(**hyper) -> TrainerSettings:
    hp: Dict[str, Any] = dict(batch_size=16, buffer_size=64, learning_rate=3e-3, num_epoch=2)
    hp.update(hyper)
    return TrainerSettings(
        hyperparameters=PPOSettings(**hp),
        network_settings=NetworkSettings(hidden_units=16, num_layers=1, vis_encode_type="simple"),
        max_steps=1000,
    )


def random_obs(spec: BehaviorSpec, n: int, rng: np.random.Generator) -> List[np.ndarray]:
    return [rng.uniform(-1, 1, size=(n,) + o.shape).astype(np.float32) if o.kind == ObservationKind.VECTOR
            else rng.uniform(0, 1, size=(n,) + o.shape).astype(np.float32) for o in spec.observation_specs]


def rollout(trainer: Any, env: Any, steps: int, name: str = "Memory") -> List[Any]:
    """Drives ``env`` like the controller does with one worker, acting through ``trainer``'s
    policy (PPO or SAC): -> the trajectories the agent processor emitted, in order."""
    processor = AgentProcessor(trainer.spec, trainer.settings.time_horizon)
    env.reset()
    out: List[Any] = []
    for _ in range(steps):
        decision, terminal = env.get_steps(name)
        trajectories, _ = processor.add_terminal(0, terminal)
        trainer.policy.forget_agents([(0, a) for a in terminal.agent_id.tolist()])
        trajectories += processor.add_decision(0, decision)
        out.extend(trajectories)
        keys = [(0, a) for a in decision.agent_id.tolist()]
        obs = [np.array(o) for o in decision.obs]
        info = trainer.policy.act(obs, None, agent_keys=keys)
        masks = np.ones((len(decision), sum(trainer.spec.action_spec.discrete_branches)), np.float32)
        processor.add_actions(
            0, decision, obs, info.raw_continuous, info.discrete,
            masks if trainer.spec.action_spec.is_discrete else None, info.log_probs, info.memory, info.prev_action,
        )
        env.set_actions(name, ActionTuple(info.env_continuous, info.discrete))
        env.step()
    return out


def config_path(name: str) -> str:
    return os.path.join(CONFIG_DIR, "ppo", name)


def crashing_workers_config(source: str, path: str) -> str:
    """``source`` (a Simple config) on 2 ``builtin:_Crash`` workers whose worker 1 exits
    at its step 300, written to ``path``."""
    with open(source) as f:
        cfg = yaml.safe_load(f)
    cfg["env_settings"] = {"env_path": "builtin:_Crash", "num_envs": 2, "seed": 10,
                           "env_args": {"continuous": 0, "discrete": 1, "behavior_names": ["Simple"],
                                        "exit_at_step": 300, "crash_seed": 11}}
    with open(path, "w") as f:
        yaml.safe_dump(cfg, f)
    return str(path)


def _merge(into: Dict[str, Any], overrides: Dict[str, Any]) -> None:
    for key, value in overrides.items():
        if value is None:
            into.pop(key, None)
        elif isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


def derived_config(base: str, path, overrides: Dict[str, Any]) -> str:
    """The config file ``base`` with ``overrides`` merged in (nested mappings merge, other
    values replace, ``None`` deletes the key), written to ``path``. Relative demo paths are
    made absolute from ``base``'s folder, so the copy finds the same demos."""
    with open(base) as f:
        cfg = yaml.safe_load(f)
    _merge(cfg, overrides)
    folder = os.path.dirname(os.path.abspath(base))
    for behavior in (cfg.get("behaviors") or {}).values():
        sections = [behavior.get("behavioral_cloning")] + list((behavior.get("reward_signals") or {}).values())
        for section in sections:
            if isinstance(section, dict) and section.get("demo_path") and not os.path.isabs(section["demo_path"]):
                section["demo_path"] = os.path.normpath(os.path.join(folder, section["demo_path"]))
    with open(path, "w") as f:
        yaml.safe_dump(cfg, f)
    return str(path)


# ------------------------------------------------- ML-Agents' learning tests, seed by seed

#: ML-Agents' ``check_environment_trains`` criterion: the mean of the last 5 episode
#: returns (``default_reward_processor``) is above the test's ``success_threshold``.
LAST_N = 5
#: The seeds the slow ML-Agents learning tests name (ML-Agents runs its own at 1337 only).
ML_AGENTS_TEST_SEEDS = (1, 2, 3, 4, 5)


def train_recording_episodes(config: Union[str, Dict[str, Any]], seed: int, folder: str,
                             args: Sequence[str] = ()) -> List[Tuple[int, float]]:
    """Trains ``config`` (a config file, or a trainer-learn config as a mapping) for one
    seed (run id ``s<seed>`` under ``folder``) through ``trainer-learn`` in this process;
    -> every training episode's (trainer step at its end, return), in order. The stats
    file has each summary period's mean only, while ML-Agents' criterion needs the last 5
    episodes (its test env records every final reward). Asserts the run exited with 0 and
    trained every behavior's whole ``max_steps``."""
    from trainers.cli.learn import main
    from trainers.loop.trajectory import EpisodeEnd
    from trainers.trainer import Trainer

    episodes: List[Tuple[int, float]] = []
    original = Trainer.record_episodes

    def record(self: Trainer, ends: Sequence[EpisodeEnd]) -> None:
        episodes.extend((int(self.step), float(e.reward)) for e in ends)
        original(self, ends)

    if isinstance(config, str):
        path = config
    else:
        path = os.path.join(folder, f"config_s{seed}.yaml")
        with open(path, "w") as f:
            yaml.safe_dump(config, f)
    setattr(Trainer, "record_episodes", record)
    try:
        code = main([path, f"--run-id=s{seed}", f"--seed={seed}", f"--results-dir={folder}", "--force", *args])
    finally:
        setattr(Trainer, "record_episodes", original)
    assert code == 0, f"seed {seed}: trainer-learn exited with {code}"
    with open(path) as f:
        resolved: Dict[str, Any] = yaml.safe_load(f)
    for name, behavior in resolved["behaviors"].items():
        # The run trained its whole budget (the last summary is at max_steps).
        with open(os.path.join(folder, f"s{seed}", name, "stats.csv")) as f:
            steps = [int(r["step"]) for r in csv.DictReader(f) if r["tag"] == "Environment/Cumulative Reward"]
        assert steps and steps[-1] == behavior["max_steps"], (seed, name, steps[-3:])
    return episodes


def last_n_mean(episodes: Sequence[Tuple[int, float]], n: int = LAST_N) -> float:
    """ML-Agents' ``default_reward_processor``: the mean of the last ``n`` returns (nan if
    there are none, which fails every threshold)."""
    returns = [r for _, r in episodes[-n:]]
    return float(np.mean(returns)) if returns else float("nan")


def finals_on_seeds(config: Union[str, Dict[str, Any]], folder: str, threshold: float,
                    seeds: Sequence[int] = ML_AGENTS_TEST_SEEDS, need: int = 4,
                    stop_early: bool = True) -> Dict[int, float]:
    """Runs ``config`` on ``seeds`` one after another -> {seed: last-5 mean at the end}.
    With ``stop_early``, stops once the outcome of "``need`` of them above ``threshold``"
    is decided (enough passed, or too many failed), so a passing test costs ``need`` runs."""
    finals: Dict[int, float] = {}
    for seed in seeds:
        start = time.perf_counter()
        finals[seed] = last_n_mean(train_recording_episodes(config, seed, folder))
        # Shown with pytest -s: the per-seed figures the tests' docstrings quote.
        print(f"seed {seed}: last-{LAST_N} mean {finals[seed]:.3f} ({time.perf_counter() - start:.0f} s)", flush=True)
        passed = sum(v > threshold for v in finals.values())
        if stop_early and (passed >= need or len(finals) - passed > len(seeds) - need):
            break
    return finals
