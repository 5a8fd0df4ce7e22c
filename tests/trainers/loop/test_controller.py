"""The controller against a fake trainer: what it hands a `Trainer` and when, without
TensorFlow. The env is the built-in `Chain` (deterministic: no slip), which an actor that
always moves right finishes in ``length - 1`` steps with reward 1."""
from __future__ import annotations

import json
import os
from typing import Dict, Hashable, List, Optional, Sequence

import numpy as np
import pytest

from envs.base_env import BehaviorSpec
from envs.managers import make_env_manager
from trainers.config import TrainerSettings
from trainers.layout import RunLayout
from trainers.loop.controller import TrainerController
from trainers.loop.status import TrainingStatus
from trainers.loop.trajectory import EpisodeEnd, Trajectory
from trainers.policy import ActionInfo, Actor
from trainers.stats import StatsReporter

LENGTH = 5  # 4 right moves per episode
RIGHT = 1


class AlwaysRight:
    """An `Actor` that moves every agent right."""

    use_recurrent = False

    def __init__(self) -> None:
        self.calls = 0
        self.forgotten: List[Hashable] = []

    def act(
        self,
        obs: Sequence[np.ndarray],
        action_masks: Optional[np.ndarray] = None,
        deterministic: bool = False,
        agent_keys: Optional[Sequence[Hashable]] = None,
    ) -> ActionInfo:
        self.calls += 1
        n = obs[0].shape[0]
        empty = np.zeros((n, 0), np.float32)
        return ActionInfo(empty, empty, np.full((n, 1), RIGHT, np.int32), np.zeros(n, np.float32))

    def forget_agents(self, keys: Sequence[Hashable]) -> None:
        self.forgotten.extend(keys)

    def sync_acting_weights(self) -> None:
        pass

    def close(self) -> None:
        pass


class FakeTrainer:
    """What the controller calls on a `trainers.trainer.Trainer`, recording every call."""

    def __init__(self, spec: BehaviorSpec, settings: TrainerSettings, updates_every: int = 2) -> None:
        self.spec = spec
        self.settings = settings
        self.step = 0
        self.episodes = 0
        self.actor: Actor = AlwaysRight()
        self.trajectories: List[Trajectory] = []
        self.pending = 0
        self.updates_every = updates_every
        self.updates: List[int] = []  # the step of each update
        self.saved: List[int] = []
        self.episode_ends: List[EpisodeEnd] = []
        self.step_reward_scale = None  # rewards reach the trajectories unscaled

    def process_trajectory(self, traj: Trajectory) -> None:
        self.trajectories.append(traj)
        self.pending += 1

    @property
    def ready_to_update(self) -> bool:
        return self.pending >= self.updates_every

    @property
    def experiences(self) -> int:
        return self.pending

    def update(self) -> Dict[str, float]:
        self.updates.append(self.step)
        self.pending = 0
        return {}

    @property
    def may_update(self) -> bool:
        return self.step <= self.settings.max_steps

    @property
    def is_training_done(self) -> bool:
        return self.step >= self.settings.max_steps

    def record_episodes(self, episodes: Sequence[EpisodeEnd]) -> None:
        self.episodes += len(episodes)
        self.episode_ends.extend(episodes)

    def save(self, directory: str) -> str:
        os.makedirs(directory, exist_ok=True)
        prefix = os.path.join(directory, f"checkpoint-{self.step}")
        open(prefix + ".index", "w").close()
        self.saved.append(self.step)
        return prefix

    @staticmethod
    def delete_checkpoint(prefix: str) -> None:
        os.remove(prefix + ".index")

    def close(self) -> None:
        pass


def _run(tmp_path, num_envs: int = 1, **settings) -> FakeTrainer:
    options = dict(max_steps=24, time_horizon=3, summary_freq=1000, checkpoint_interval=10, keep_checkpoints=2)
    options.update(settings)
    env = make_env_manager("builtin:Chain", {"length": LENGTH}, num_envs, 1, seed=0)
    try:
        (name,) = env.behavior_specs
        trainer = FakeTrainer(env.behavior_specs[name], TrainerSettings(**options))
        run_dir = str(tmp_path / "run")
        controller = TrainerController(
            env,
            {name: trainer},  # type: ignore[dict-item]  (a duck-typed Trainer)
            {name: StatsReporter(name, [])},
            run_dir,
            TrainingStatus(),
        )
        controller.run()
    finally:
        env.close()
    trainer.run_dir = run_dir  # type: ignore[attr-defined]
    return trainer


def test_trajectories_are_cut_at_the_time_horizon_and_at_episode_ends(tmp_path):
    trainer = _run(tmp_path)
    lengths = [len(t) for t in trainer.trajectories]
    # Episodes of 4 steps, cut every 3: 3 then 1 (the episode's end).
    assert lengths[:4] == [3, 1, 3, 1]
    assert [t.done for t in trainer.trajectories[:4]] == [False, True, False, True]
    # Every step handed over is a step counted, and every episode was right-only.
    assert sum(lengths) == trainer.step >= trainer.settings.max_steps
    assert trainer.actor.calls == trainer.step  # type: ignore[attr-defined]  (one agent)
    assert all((t.discrete_action == RIGHT).all() for t in trainer.trajectories)
    ends = trainer.episode_ends
    assert len(ends) == trainer.episodes == trainer.step // (LENGTH - 1)
    assert all(e.length == LENGTH - 1 and e.reward == pytest.approx(1.0) for e in ends)
    # The reward arrives on the episode's last step only.
    last = [t for t in trainer.trajectories if t.done][0]
    assert last.rewards[-1] == pytest.approx(1.0)


def test_updates_run_when_the_trainer_is_ready_and_stop_after_max_steps(tmp_path):
    trainer = _run(tmp_path)
    assert trainer.updates, "no update ran"
    # ready_to_update after every second trajectory (the fake's rule), never past max_steps.
    assert len(trainer.updates) == len(trainer.trajectories) // 2
    assert all(step <= trainer.settings.max_steps for step in trainer.updates)


def test_checkpoints_every_interval_and_at_the_end_with_the_status(tmp_path):
    trainer = _run(tmp_path)
    interval = trainer.settings.checkpoint_interval
    # One checkpoint each time the step passes a multiple of the interval, then the final.
    assert [s // interval for s in trainer.saved[:-1]] == [1, 2]
    assert trainer.saved[-1] == trainer.step
    layout = RunLayout(trainer.run_dir)  # type: ignore[attr-defined]
    with open(layout.training_status) as f:
        status = json.load(f)["behaviors"]["Chain"]
    assert status["step"] == trainer.step and status["episodes"] == trainer.episodes
    # keep_checkpoints=2: the oldest checkpoint file is gone, the status lists the two kept.
    kept = [c["steps"] for c in status["checkpoints"]]
    assert kept == trainer.saved[-2:]
    assert not os.path.exists(layout.checkpoint_prefix("Chain", trainer.saved[0]) + ".index")
    assert status["behavior_spec"]["action_spec"] == {"continuous_size": 0, "discrete_branches": [2]}


def test_several_workers_act_in_one_call_per_step(tmp_path):
    trainer = _run(tmp_path, num_envs=2, max_steps=16)
    actor = trainer.actor
    assert isinstance(actor, AlwaysRight)
    # Two workers in lockstep: one inference call per env step for both agents (a Chain
    # agent asks for a decision on every step: an ended episode restarts in the same step).
    assert trainer.step == 2 * actor.calls
    assert [len(t) for t in trainer.trajectories[:4]] == [3, 3, 1, 1]  # both workers' agents
    assert len(trainer.episode_ends) == trainer.step // (LENGTH - 1)


def test_in_this_thread_the_steps_actions_come_after_its_update(tmp_path, monkeypatch):
    """Stepping in this thread, an update that a step's trajectories start comes before
    that step's inference call (Stable-Baselines3's order): every update is followed by an
    inference at the same step count, never preceded by one."""
    events: List[tuple] = []
    holder: Dict[str, FakeTrainer] = {}
    original_act, original_update = AlwaysRight.act, FakeTrainer.update

    def act(self, obs, action_masks=None, deterministic=False, agent_keys=None):
        events.append(("act", holder["t"].step if "t" in holder else 0))
        return original_act(self, obs, action_masks, deterministic, agent_keys)

    def update(self):
        holder["t"] = self
        events.append(("update", self.step))
        return original_update(self)

    monkeypatch.setattr(AlwaysRight, "act", act)
    monkeypatch.setattr(FakeTrainer, "update", update)
    trainer = _run(tmp_path)
    assert trainer.updates
    for i, (kind, step) in enumerate(events):
        if kind == "update" and i + 1 < len(events):
            assert events[i + 1] == ("act", step), events[i - 1 : i + 2]
            assert events[i - 1] != ("act", step), events[i - 1 : i + 2]
