"""MA-POCA trainer of one behavior (ML-Agents' ``poca/trainer.py``): group trajectories ->
lambda-returns from the centralised critic, advantages against the counterfactual
baseline -> PPO's one-run updates.

Per trajectory of ``T`` steps (`trainers.loop.trajectory`, whose `GroupData` carries the
mates): the extrinsic signal's reward is the agent's own plus the group's reward plus its
mates' own rewards (ML-Agents' POCA sets ``add_groupmate_rewards``); per signal the
lambda-returns ``G^lambda`` of those rewards with the critic's values (the value targets
of both critic and baseline) and the advantages ``G^lambda - baseline``; ``advantages``
is their mean over the signals (ML-Agents; PPO sums them). The bootstrap value is the
critic's over the agent's and its mates' next observations, and is 0 only when the agent's
episode truly ended *and* every mate's had (``all_done``): an agent that finished early
goes on to bootstrap from the group that plays on.

The buffer pads the groupmate fields ``[T, G, ...]`` to its widest group ``G`` (re-padding
what it holds when a wider group arrives, a rare event), so minibatches are plain row
slices; `POCAOptimizer`'s placeholders take any ``G``.

Recurrent: the actor's, the critic's and the baseline's memories go into the buffer with
each step, and each trajectory is padded at its end to whole sequences (recurrent PPO's
padded layout; `pack_sequences` is refused for POCA when the config loads).

The update loop is PPO's (`PPOTrainer.update`): buffer-wide advantage normalisation,
``num_epoch`` shuffled passes, one ``sess.run`` per minibatch, behavioral cloning after.
"""
from __future__ import annotations

from typing import Dict, Hashable, Mapping, Optional, Sequence

import numpy as np

from envs.base_env import BehaviorSpec
from trainers.bc import BCModule
from trainers.buffer import AgentBuffer, get_gae, pad_trajectory_end
from trainers.config import PPOSettings, TrainerSettings
from trainers.fields import (
    ADVANTAGE,
    ADVANTAGES,
    BASELINE_ESTIMATES,
    BASELINE_MEMORY,
    CRITIC_MEMORY,
    ENVIRONMENT_REWARDS,
    GROUP_CONTINUOUS_ACTION,
    GROUP_DISCRETE_ACTION,
    GROUP_PRESENT,
    LOG_PROBS,
    MASKS,
    MEMORY,
    PREV_ACTION,
    RETURNS,
    REWARDS,
    VALUE_ESTIMATES,
    group_obs_key,
    next_obs_key,
    obs_key,
    signal_key,
)
from trainers.loop.trajectory import Trajectory
from trainers.poca.optimizer import POCAOptimizer
from trainers.ppo.trainer import UPDATE_TAGS, PPOTrainer
from trainers.stats import StatsReporter
from trainers.tf.cluster import Chief
from trainers.trainer import Trainer

#: PPO's tags plus the baseline's.
POCA_UPDATE_TAGS = {**UPDATE_TAGS, "baseline_loss": "Losses/Baseline Loss"}


def lambda_returns(rewards: np.ndarray, values: np.ndarray, value_next: float, gamma: float, lambd: float) -> np.ndarray:
    """ML-Agents' ``lambda_return``: ``G_t = r_t + gamma ((1 - lambda) V_{t+1} + lambda G_{t+1})``
    with ``G_T``'s ``V_{T} = G_{T} = value_next``; ``[T]`` float32.

    The same as GAE's advantages plus the values (`get_gae`), computed that way."""
    return (get_gae(rewards, values, value_next, gamma, lambd) + np.asarray(values, np.float32)).astype(np.float32)


class POCATrainer(PPOTrainer):
    """Trains one behavior's groups with MA-POCA (feed-forward or recurrent networks)."""

    def __init__(  # noqa: PPOTrainer.__init__ would build PPO's optimizer: Trainer's only
        self,
        behavior_name: str,
        spec: BehaviorSpec,
        settings: TrainerSettings,
        stats: StatsReporter,
        seed: int,
        devices: Sequence[str] = ("/cpu:0",),
        cpu_only: bool = False,
        cluster: Optional[Chief] = None,
    ) -> None:
        if cluster is not None:  # refused when the config loads (TRAINER_KINDS)
            raise ValueError("poca runs on local devices only")
        Trainer.__init__(self, behavior_name, spec, settings, stats, seed, devices, cpu_only)
        hp = settings.hyperparameters
        assert isinstance(hp, PPOSettings)
        self.hyperparameters: PPOSettings = hp
        self.optimizer: POCAOptimizer = POCAOptimizer(self.policy, settings, self.signals, devices)
        self.bc: Optional[BCModule] = None
        if settings.behavioral_cloning is not None:
            self.bc = BCModule(self.policy, settings.behavioral_cloning, hp.learning_rate, hp.batch_size, hp.num_epoch, seed)
        self.reward_scale = None  # normalize_reward is refused for POCA
        self._finish_graph()
        self.buffer = AgentBuffer()
        self.has_updated = False
        self._width = 0  # groupmate slots of the buffer's group fields
        # Per agent: the group reward summed over its episode (Environment/Group Cumulative Reward).
        self._group_returns: Dict[Hashable, float] = {}

    # -------------------------------------------------------------- experience

    def _widen(self, fields: Dict[str, np.ndarray]) -> None:
        """Pads the trajectory's and the buffer's groupmate fields to a common width."""
        width = int(fields[GROUP_PRESENT].shape[1])
        keys = [k for k in fields if k == GROUP_PRESENT or k.startswith(("group_obs_", "group_continuous", "group_discrete"))]
        if width > self._width and self.buffer.num_experiences:
            for key in keys:
                old = self.buffer[key]
                pad = np.zeros((old.shape[0], width - self._width) + old.shape[2:], old.dtype)
                self.buffer[key] = np.concatenate([old, pad], axis=1)
        if width < self._width:
            for key in keys:
                value = fields[key]
                pad = np.zeros((value.shape[0], self._width - width) + value.shape[2:], value.dtype)
                fields[key] = np.concatenate([value, pad], axis=1)
        self._width = max(self._width, width)

    def process_trajectory(self, traj: Trajectory) -> None:
        """Normalizer update, critic values and baselines, per-signal rewards, lambda-returns
        and advantages; appends the rows (with their groupmates) to the buffer."""
        hp = self.hyperparameters
        spec = self.spec
        group = traj.group
        n = len(traj)
        if self.policy.normalize:
            self.policy.update_normalization(traj.obs)
        members = 1
        if group is not None:
            members += max(int(group.present.sum(axis=1).max(initial=0)), len(group.next_obs[0]))
        self.optimizer.observe_group_size(members)
        values, baselines, memories = self.optimizer.trajectory_group_values(
            traj.obs, traj.next_obs, group, traj.agent, traj.done
        )
        fields = self.step_fields(traj)
        fields.update({obs_key(i): o for i, o in enumerate(traj.obs)})
        fields[LOG_PROBS] = traj.log_probs
        fields[MASKS] = np.ones(n, np.float32)
        a = spec.action_spec
        width = 0 if group is None else group.num_mates
        for i, o in enumerate(spec.observation_specs):
            fields[group_obs_key(i)] = group.obs[i] if group is not None else np.zeros((n, 0) + tuple(o.shape), np.float32)
        if a.is_continuous:
            fields[GROUP_CONTINUOUS_ACTION] = (
                group.continuous_action if group is not None else np.zeros((n, 0, a.continuous_size), np.float32)
            )
        if a.is_discrete:
            fields[GROUP_DISCRETE_ACTION] = (
                group.discrete_action if group is not None else np.zeros((n, 0, a.discrete_size), np.int32)
            )
        fields[GROUP_PRESENT] = group.present if group is not None else np.zeros((n, width), np.float32)
        if self.optimizer.needs_next_obs:
            for i, (ob, nxt) in enumerate(zip(traj.obs, traj.next_obs)):
                fields[next_obs_key(i)] = np.concatenate([ob[1:], nxt], axis=0)
        # The extrinsic reward reads the agent's, its group's and its mates' rewards.
        rewarded: Mapping[str, np.ndarray] = fields
        if group is not None:
            rewarded = {**fields, ENVIRONMENT_REWARDS: traj.rewards + group.group_reward + group.mate_rewards}
        all_done = group is None or group.all_done
        terminal_state = traj.done and not traj.interrupted and all_done
        advantages = []
        reward_sums: Dict[str, float] = {}
        for name, signal in self.signals.items():
            rewards = signal.evaluate(rewarded, self.has_updated)
            v = values[name][:-1]
            v_next = 0.0 if terminal_state and signal.use_terminal_states else float(values[name][-1])
            returns = lambda_returns(rewards, v, v_next, signal.gamma, hp.lambd)
            adv = returns - baselines[name]
            fields[signal_key(name, REWARDS)] = rewards
            fields[signal_key(name, VALUE_ESTIMATES)] = v
            fields[signal_key(name, BASELINE_ESTIMATES)] = baselines[name]
            fields[signal_key(name, RETURNS)] = returns
            fields[signal_key(name, ADVANTAGE)] = adv
            advantages.append(adv)
            reward_sums[name] = float(rewards.sum())
            self.stats.add_stat(f"Policy/{signal.value_tag} Value Estimate", float(v.mean()))
            self.stats.add_stat(f"Policy/{signal.value_tag} Baseline Estimate", float(baselines[name].mean()))
        fields[ADVANTAGES] = np.mean(advantages, axis=0).astype(np.float32)  # ML-Agents: the mean
        if memories is not None:
            assert traj.memory is not None  # a recurrent policy's trajectories carry it
            fields[MEMORY] = traj.memory
            if traj.prev_action is not None:
                fields[PREV_ACTION] = traj.prev_action
            fields[CRITIC_MEMORY], fields[BASELINE_MEMORY] = memories
            # Recurrent PPO's padded layout (ML-Agents'): the trajectory fills whole
            # sequences, its last one padded (masks 0, groupmates absent), and
            # buffer_size counts the padding.
            fields = pad_trajectory_end(fields, self.policy.sequence_length)
        self._widen(fields)
        self.buffer.add_fields(fields)
        self.add_signal_returns(traj, reward_sums)
        self._record_group_return(traj)

    def _record_group_return(self, traj: Trajectory) -> None:
        """ML-Agents' ``Environment/Group Cumulative Reward``: the group reward an agent
        received over its episode, reported when the whole group's episode ended (an agent
        that finished before its mates is not reported)."""
        if traj.group is None:
            return
        total = self._group_returns.get(traj.agent, 0.0) + float(traj.group.group_reward.sum())
        if not traj.done:
            self._group_returns[traj.agent] = total
            return
        self._group_returns.pop(traj.agent, None)
        if traj.group.all_done:
            self.stats.add_stat("Environment/Group Cumulative Reward", total)

    # ----------------------------------------------------------------- update

    def update(self) -> Dict[str, float]:
        """PPO's update over the POCA graph; the buffer's groupmate width restarts at 0."""
        averaged = super().update()
        self._width = 0
        return averaged

    def report_update(self, averaged: Mapping[str, float], tags: Mapping[str, str]) -> None:
        super().report_update(averaged, POCA_UPDATE_TAGS)

    def load(self, prefix: str, reset_step: bool = False) -> None:
        super().load(prefix, reset_step)
        self.optimizer.forget_group_size()
