"""`Trainer`: what the training loop drives, and what every trainer of one behavior shares
(PPO and SAC): the behavior's graph, policy and reward signals, episode statistics,
checkpoints (save, restore, prune) and shutdown.

A subclass builds its optimizer and modules into the policy's graph (`BehaviorGraph`),
then calls `Trainer._finish_graph`.
"""
from __future__ import annotations

import glob
import os
from abc import ABC, abstractmethod
from collections import defaultdict
from typing import Dict, Hashable, Mapping, Optional, Sequence

import numpy as np

from envs.base_env import BehaviorSpec
from trainers.fields import ACTION_MASK, CONTINUOUS_ACTION, DISCRETE_ACTION, DONE, ENVIRONMENT_REWARDS
from trainers.ghost_actor import GhostActor
from trainers.layout import checkpoint_name
from trainers.graph import BehaviorGraph
from trainers.policy import Actor, Policy
from trainers.reward_signals.base import RewardSignal
from trainers.reward_signals.factory import create_reward_signals
from trainers.config import TrainerSettings
from trainers.stats import StatsReporter
from trainers.tf.cluster import Chief
from trainers.loop.trajectory import EpisodeEnd, StepRewardScale, Trajectory


class Trainer(ABC):
    """Base of `PPOTrainer` and `SACTrainer`: the policy and reward signals, checkpoints,
    episode stats, shutdown. Subclasses add their optimizer, then call `_finish_graph`.

    What the controller calls: `process_trajectory` for each trajectory an agent finishes
    or cuts, then, while `may_update`, `update` when `ready_to_update`; `step` counts the
    agent steps it has been given; `actor` acts; with ``self_play``, `ghost` plays the
    snapshots (`trainers.loop.self_play`)."""

    #: The self-play ghost (`trainers.ghost_actor`); None without ``self_play``.
    ghost: Optional[GhostActor] = None

    def __init__(
        self,
        behavior_name: str,
        spec: BehaviorSpec,
        settings: TrainerSettings,
        stats: StatsReporter,
        seed: int,
        devices: Sequence[str] = ("/cpu:0",),
        cpu_only: bool = False,
    ) -> None:
        self.behavior_name = behavior_name
        self.spec = spec
        self.settings = settings
        self.stats = stats
        self.step = 0
        self.episodes = 0  # finished episodes, over resumes (training_status.json)
        self.rng = np.random.default_rng(seed)
        self.behavior_graph = BehaviorGraph(settings, spec, seed, devices, cpu_only)
        self.policy: Policy = Policy(behavior_name, spec, settings, self.behavior_graph)
        #: What the controller acts through: the policy, or a loaded model (`use_actor`).
        self.actor: Actor = self.policy
        self.signals: Dict[str, RewardSignal] = create_reward_signals(settings.reward_signals, self.policy, seed)
        # Per agent: each signal's reward summed over the current episode.
        self._signal_returns: Dict[Hashable, Dict[str, float]] = defaultdict(lambda: defaultdict(float))

    def _finish_graph(self, cluster: Optional[Chief] = None) -> None:
        """Saver and initializer of every variable, then finalises the graph and runs init.

        ``cluster``: the run's cluster chief; update runs then go to its server. With
        ``self_play`` the ghost copy of the actor is built first, after everything else, so
        that every other op keeps its random seed (the initial weights are those of the same
        behavior without self-play)."""
        if self.settings.self_play is not None:
            self.ghost = GhostActor(self.policy)
        self.behavior_graph.finalize(cluster)

    @abstractmethod
    def process_trajectory(self, traj: Trajectory) -> None:
        """Takes a trajectory of ``T`` steps into the trainer's buffer (its values, returns
        and advantages computed, or its rows added to a replay buffer)."""

    @property
    @abstractmethod
    def ready_to_update(self) -> bool:
        """Whether the buffer holds what the next `update` needs."""

    @property
    @abstractmethod
    def experiences(self) -> int:
        """Rows in the trainer's buffer (PPO's update buffer, SAC's replay buffer)."""

    @abstractmethod
    def update(self) -> Dict[str, float]:
        """Updates the policy, the critic and every reward signal (one ``sess.run`` per
        minibatch); returns the update's statistics averaged over its minibatches."""

    @property
    def step_reward_scale(self) -> Optional[StepRewardScale]:
        """What scales the rewards at each env step as they arrive, for the controller's
        `AgentProcessor` (PPO's ``normalize_reward``); None: rewards stay as they are."""
        return None

    def use_actor(self, actor: Actor) -> None:
        """Acts through ``actor`` (``--inference --model``: an exported model) from now on."""
        self.actor = actor

    def step_fields(self, traj: Trajectory) -> Dict[str, np.ndarray]:
        """The buffer fields every trainer stores for a trajectory of ``T`` steps: the
        actions (``continuous_action`` ``[T, c]``, ``discrete_action`` ``[T, b]`` with
        ``action_mask`` ``[T, sum(branches)]``, all ones when the env gave none), the
        ``environment_rewards`` ``[T]`` and ``done`` ``[T]`` (1 on the last step of an
        ended episode)."""
        n = len(traj)
        fields: Dict[str, np.ndarray] = {}
        if traj.continuous_action.shape[1]:
            fields[CONTINUOUS_ACTION] = traj.continuous_action
        if traj.discrete_action.shape[1]:
            fields[DISCRETE_ACTION] = traj.discrete_action
            fields[ACTION_MASK] = (
                traj.action_mask
                if traj.action_mask is not None
                else np.ones((n, sum(self.spec.action_spec.discrete_branches)), np.float32)
            )
        fields[ENVIRONMENT_REWARDS] = traj.rewards
        fields[DONE] = np.zeros(n, np.float32)
        fields[DONE][-1] = float(traj.done)
        return fields

    def add_signal_returns(self, traj: Trajectory, sums: Mapping[str, float]) -> None:
        """Adds a trajectory's reward sum per signal to its agent's episode totals; when the
        episode ended, reports them (``Policy/<Signal> Reward``) and forgets the agent."""
        totals = self._signal_returns[traj.agent]
        for name, value in sums.items():
            totals[name] += value
        if traj.done:
            for name, signal in self.signals.items():
                self.stats.add_stat(f"Policy/{signal.value_tag} Reward", totals[name])
            del self._signal_returns[traj.agent]

    def report_update(self, averaged: Mapping[str, float], tags: Mapping[str, str]) -> None:
        """Adds an update's averaged statistics under their TensorBoard tags (``tags``:
        stat name -> tag; the policy loss as its absolute value, as ML-Agents reports it),
        BC's ``pretraining_loss`` and every reward signal's own tags."""
        for name, value in averaged.items():
            tag = tags.get(name)
            if tag is not None:
                self.stats.add_stat(tag, abs(value) if name == "policy_loss" else value)
        if "pretraining_loss" in averaged:
            self.stats.add_stat("Losses/Pretraining Loss", averaged["pretraining_loss"])
        for signal in self.signals.values():
            for tag, update_name in signal.stats.items():
                if update_name in averaged:
                    self.stats.add_stat(tag, averaged[update_name])

    def record_episodes(self, episodes: Sequence[EpisodeEnd]) -> None:
        self.episodes += len(episodes)
        for ep in episodes:
            self.stats.add_stat("Environment/Cumulative Reward", ep.reward)
            self.stats.add_stat("Environment/Episode Length", float(ep.length))

    # ------------------------------------------------------------- checkpoints

    def checkpoint_prefix(self, directory: str, step: int) -> str:
        return os.path.join(directory, checkpoint_name(step))

    def save(self, directory: str) -> str:
        """Writes ``<directory>/checkpoint-<step>``; returns the prefix."""
        os.makedirs(directory, exist_ok=True)
        self.behavior_graph.set_step(self.step)
        prefix = self.checkpoint_prefix(directory, self.step)
        self.behavior_graph.save(prefix)
        return prefix

    def save_as(self, prefix: str) -> None:
        """Writes the checkpoint to ``prefix`` outside the numbered ones (the best
        evaluation's ``checkpoint-best``): TensorFlow's list of checkpoints and SAC's replay
        buffer are left as they are."""
        os.makedirs(os.path.dirname(prefix) or ".", exist_ok=True)
        self.behavior_graph.set_step(self.step)
        self.behavior_graph.save(prefix, write_state=False)

    def load(self, prefix: str, reset_step: bool = False) -> None:
        """Restores weights, optimizer state, normalizer and (unless ``reset_step``) the step."""
        self.behavior_graph.restore(prefix)
        if reset_step:
            self.behavior_graph.set_step(0)
            self.step = 0
        else:
            self.step = self.behavior_graph.get_step()

    @staticmethod
    def delete_checkpoint(prefix: str) -> None:
        for path in glob.glob(prefix + ".*"):
            os.remove(path)

    def close(self) -> None:
        if self.actor is not self.policy:
            self.actor.close()
        self.behavior_graph.close()

    @property
    def is_training_done(self) -> bool:
        return self.step >= self.settings.max_steps

    @property
    def may_update(self) -> bool:
        """ML-Agents' ``should_still_train``: updates run while ``step <= max_steps``, so a
        buffer that fills exactly at ``max_steps`` is still learned from before the run ends
        (``is_training_done`` ends the loop at ``step >= max_steps``)."""
        return self.step <= self.settings.max_steps
