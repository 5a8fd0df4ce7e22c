"""PPO and SAC ignore group rewards: the controller says so once per behavior (ML-Agents'
``RLTrainer._warn_if_group_reward``), driven by the real controller on `builtin:Rendezvous`
(whose group reward only a multi-agent trainer uses), with the duck-typed trainer of
``test_controller.py`` (no TensorFlow)."""
from __future__ import annotations

from typing import Any, List

import numpy as np
import pytest

from envs.base_env import ActionTuple
from envs.managers import make_env_manager
from test_controller import FakeTrainer  # the same directory's duck-typed Trainer
from trainers.config import TrainerSettings
from trainers.loop.controller import TrainerController
from trainers.loop.status import TrainingStatus
from trainers.stats import StatsReporter

WARNING = "an agent received a group reward, but trainer_type {} is not a multi-agent trainer and ignores it"


def _run(tmp_path: Any, env_id: str, env_args: Any, trainer_type: str, training: bool = True) -> None:
    # Rendezvous with the fake trainer's "always action 1" (stay): no group meets, so the
    # actor below walks right instead (action 2); 4 agents in groups of 2 on 3 cells meet
    # often within 400 agent steps (env seed 0).
    env = make_env_manager(env_id, env_args, 1, 1, seed=0)
    try:
        (name,) = env.behavior_specs
        settings = TrainerSettings(
            trainer_type=trainer_type,  # type: ignore[arg-type]
            max_steps=400, time_horizon=8, summary_freq=10_000, checkpoint_interval=10_000,
        )
        trainer = FakeTrainer(env.behavior_specs[name], settings)
        if env_id == "builtin:Rendezvous":
            act = trainer.actor.act

            def walk_right(obs: Any, *args: Any, **kwargs: Any) -> Any:
                info = act(obs, *args, **kwargs)
                info.discrete[:] = 2
                return info

            trainer.actor.act = walk_right  # type: ignore[method-assign]
        controller = TrainerController(
            env, {name: trainer}, {name: StatsReporter(name, [])}, str(tmp_path / "run"),  # type: ignore[dict-item]
            TrainingStatus(), training=training,
        )
        controller.run()
    finally:
        env.close()


@pytest.mark.parametrize("trainer_type", ["ppo", "sac"])
def test_single_agent_trainer_is_warned_once_that_group_rewards_are_ignored(tmp_path, capsys, trainer_type) -> None:
    _run(tmp_path, "builtin:Rendezvous", {"num_agents": 4, "group_size": 2, "length": 3}, trainer_type)
    lines: List[str] = [line for line in capsys.readouterr().out.splitlines() if "group reward" in line]
    assert lines == [f"[WARNING] Rendezvous: {WARNING.format(trainer_type)}; use trainer_type: poca for best results."]


def test_no_warning_without_group_rewards_when_not_training_or_for_poca(tmp_path, capsys) -> None:
    _run(tmp_path, "builtin:Chain", {"length": 5}, "ppo")  # group 0, group reward 0
    _run(tmp_path / "inference", "builtin:Rendezvous", {"num_agents": 4, "group_size": 2, "length": 3}, "ppo",
         training=False)
    _run(tmp_path / "poca", "builtin:Rendezvous", {"num_agents": 4, "group_size": 2, "length": 3}, "poca")
    assert "group reward" not in capsys.readouterr().out


def test_rendezvous_sends_group_rewards_to_the_walk_right_actor() -> None:
    # What the warning test relies on: walking right, groups meet and get their reward.
    from envs.builtin.rendezvous import Rendezvous

    env = Rendezvous(num_agents=4, group_size=2, length=3, seed=0)
    env.reset()
    total = 0.0
    for _ in range(20):
        n = len(env.get_steps("Rendezvous")[0])
        env.set_actions("Rendezvous", ActionTuple(discrete=np.full((n, 1), 2)))
        env.step()
        total += float(env.get_steps("Rendezvous")[1].group_reward.sum())
    assert total > 0
