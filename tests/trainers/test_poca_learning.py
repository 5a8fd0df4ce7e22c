"""MA-POCA learns the built-in cooperative Rendezvous (config/poca/Rendezvous.yaml) on 4 of
5 seeds; independent PPO learners given the group reward as their own reward
(``env_args.shared_reward``) learn less with the same budget and hyperparameters.

The measure is the same for every run: the exported actor (``Rendezvous.onnx``) plays 300
group episodes of a fresh ``Rendezvous(seed=123)``, sampling its actions as in training,
and we count the groups whose members all reached the meeting point. Scripted play
succeeds every time, uniformly random moves about 1 time in 4 (tests/envs/test_rendezvous.py).

Measured (30k steps, the runs of this module's `_train`): POCA 1.0 on seeds 1-5; independent PPO with the shared reward 0.68, 0.61, 0.63
on seeds 1-3. Why PPO falls short: a member that arrives early leaves with reward 0 and
only the last arrivers get the group reward, so each independent learner sees arriving
early as worthless; POCA's early arrivers bootstrap from the centralised critic over the
mates still playing, so their arrival is credited with the group's later success.
Thresholds: POCA >= 0.9 (1.0 measured; room for another machine's float order) on at least
4 of 5 seeds, PPO at least 0.2 below POCA on seed 1 (0.32 measured).
"""
from __future__ import annotations

import os
from typing import Any, Dict, Tuple

import numpy as np
import pytest
import yaml
from trainer_test_utils import CONFIG_DIR

from envs.base_env import ActionTuple
from envs.builtin.rendezvous import Rendezvous, group_ends

SEEDS = (1, 2, 3, 4, 5)
THRESHOLD = 0.9
MARGIN = 0.2


def group_success_rate(model: str, episodes: int = 300, deterministic: bool = False) -> float:
    """Greedy play of ``model`` in a fresh Rendezvous: the share of group episodes that end
    with the group reward (success) rather than failing at the env's step limit."""
    from trainers.export.onnx_policy import OnnxPolicy

    env = Rendezvous(seed=123)
    name = next(iter(env.behavior_specs))
    policy = OnnxPolicy(model, env.behavior_specs[name])
    env.reset()
    ends: Dict[Tuple[int, int], bool] = {}  # (env step, group id) -> success
    step = 0
    while len(ends) < episodes:
        decision, terminal = env.get_steps(name)
        for j in np.flatnonzero(group_ends(terminal)):
            ends[(step, int(terminal.group_id[j]))] = bool(terminal.group_reward[j] > 0)
        info = policy.act(decision.obs, None, deterministic=deterministic)
        env.set_actions(name, ActionTuple(discrete=info.discrete))
        env.step()
        step += 1
    env.close()
    return float(np.mean(list(ends.values())))


def _train(run_cli, tmp_path, trainer_type: str, seed: int, shared_reward: bool = False) -> str:
    with open(os.path.join(CONFIG_DIR, "poca", "Rendezvous.yaml")) as f:
        config: Dict[str, Any] = yaml.safe_load(f)
    config["behaviors"]["Rendezvous"]["trainer_type"] = trainer_type
    if shared_reward:
        config["env_settings"]["env_args"] = {"shared_reward": True}
    run_id = f"{trainer_type}_{seed}"
    path = tmp_path / f"{run_id}.yaml"
    path.write_text(yaml.safe_dump(config))
    code, _, err = run_cli(str(path), f"--run-id={run_id}", f"--seed={seed}")
    assert code == 0, err
    return str(run_cli.results / run_id / "Rendezvous" / "Rendezvous.onnx")


@pytest.mark.slow  # five 30k-step runs: about 3 min on 2 idle cores
def test_poca_learns_rendezvous_on_most_seeds(run_cli, tmp_path):
    success = {seed: group_success_rate(_train(run_cli, tmp_path, "poca", seed)) for seed in SEEDS}
    print(f"group success: poca {success}")
    assert sum(v >= THRESHOLD for v in success.values()) >= 4, success


@pytest.mark.slow  # two 30k-step runs: about 70 s on 2 idle cores
def test_independent_ppo_with_the_shared_reward_learns_less_than_poca(run_cli, tmp_path):
    poca = group_success_rate(_train(run_cli, tmp_path, "poca", 1))
    ppo = group_success_rate(_train(run_cli, tmp_path, "ppo", 1, shared_reward=True))
    print(f"group success: poca {poca:.3f}, independent ppo (shared reward) {ppo:.3f}")
    assert poca >= THRESHOLD, poca
    assert ppo <= poca - MARGIN, (poca, ppo)
