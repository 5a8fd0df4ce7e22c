"""PPO trainer of one behavior: trajectories -> GAE per reward stream -> one-run updates.

Holds the policy (graph + session), the optimizer, the reward signals and the update
buffer; the controller feeds it trajectories and asks it to update when the buffer is full.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Dict, Optional, Sequence

import numpy as np

from envs.base_env import BehaviorSpec
from trainers.bc import BCModule
from trainers.buffer import AgentBuffer, get_gae, normalized, pad_trajectory_end
from trainers.fields import (
    ADVANTAGE,
    ADVANTAGES,
    CRITIC_MEMORY,
    ENVIRONMENT_REWARDS,
    LOG_PROBS,
    MASKS,
    MEMORY,
    PREV_ACTION,
    RESET,
    RETURNS,
    REWARDS,
    VALUE_ESTIMATES,
    next_obs_key,
    obs_key,
    signal_key,
)
from trainers.ppo.optimizer import PPOOptimizer
from trainers.ppo.reward_scale import RewardScale
from trainers.tf.cluster import Chief
from trainers.optimizer import prepare_signal_feeds
from trainers.config import PPOSettings, TrainerSettings
from trainers.stats import StatsReporter
from trainers.trainer import Trainer
from trainers.loop.trajectory import Trajectory

# Update statistics -> the TensorBoard tags ML-Agents users read.
UPDATE_TAGS = {
    "policy_loss": "Losses/Policy Loss",
    "value_loss": "Losses/Value Loss",
    "entropy": "Policy/Entropy",
    "learning_rate": "Policy/Learning Rate",
    "beta": "Policy/Beta",
    "epsilon": "Policy/Epsilon",
    "approx_kl": "Policy/Approx KL",
    "clip_fraction": "Policy/Clip Fraction",
}


class PPOTrainer(Trainer):
    """Trains one behavior with PPO."""

    #: Benchmark switch (scripts/benchmark.py --signals): update each network in its own
    #: ``sess.run`` as upstream ML-Agents did, instead of the one run per minibatch.
    separate_signal_updates = False

    def __init__(
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
        """``cluster``: a ``trainers.tf.cluster.Chief``; its towers replace ``devices``."""
        if cluster is not None:
            devices = cluster.tower_devices
        super().__init__(behavior_name, spec, settings, stats, seed, devices, cpu_only)
        hp = settings.hyperparameters
        assert isinstance(hp, PPOSettings)
        self.hyperparameters: PPOSettings = hp
        self.optimizer = PPOOptimizer(self.policy, settings, self.signals, devices)
        # Behavioral cloning: built now, in the policy graph, before the graph is finalised.
        self.bc: Optional[BCModule] = None
        if settings.behavioral_cloning is not None:
            self.bc = BCModule(
                self.policy, settings.behavioral_cloning, hp.learning_rate, hp.batch_size, hp.num_epoch, seed
            )
        self.reward_scale: Optional[RewardScale] = None
        if hp.normalize_reward:  # the extrinsic signal is there (checked at load)
            with self.policy.graph.as_default():
                self.reward_scale = RewardScale(self.policy.session, self.signals["extrinsic"].gamma)
        self._finish_graph(cluster)
        self.buffer = AgentBuffer()
        self.has_updated = False  # set after the first update run returns

    # -------------------------------------------------------------- experience

    @property
    def step_reward_scale(self) -> Optional[RewardScale]:
        """``normalize_reward``: the scaling the trajectory assembly applies at each env step."""
        return self.reward_scale

    def save(self, directory: str) -> str:
        if self.reward_scale is not None:  # its live statistics are host-side between checkpoints
            self.reward_scale.flush()
        return super().save(directory)

    def save_as(self, prefix: str) -> None:
        if self.reward_scale is not None:
            self.reward_scale.flush()
        super().save_as(prefix)

    def load(self, prefix: str, reset_step: bool = False) -> None:
        super().load(prefix, reset_step)
        if self.reward_scale is not None:  # the restored statistics, not the ones before
            self.reward_scale.reload()

    def process_trajectory(self, traj: Trajectory) -> None:
        """Normalizer update, value estimates, per-signal rewards, GAE; appends to buffer."""
        hp = self.hyperparameters
        if self.policy.normalize:
            self.policy.update_normalization(traj.obs)
        obs_all = [np.concatenate([o, n], axis=0) for o, n in zip(traj.obs, traj.next_obs)]
        n = len(traj)
        recurrent = self.policy.use_recurrent
        prev_all = None
        if recurrent and traj.prev_action is not None:
            # The bootstrap observation's previous action is the trajectory's last action.
            prev_all = np.concatenate([traj.prev_action, traj.discrete_action[-1:]], axis=0)
        values, critic_memory = self.optimizer.trajectory_values(
            obs_all, traj.agent, traj.done, traj.memory, prev_all
        )
        fields = self.step_fields(traj)
        if traj.scaled_rewards is not None:  # scaled at the env step (`step_reward_scale`)
            fields[ENVIRONMENT_REWARDS] = traj.scaled_rewards
        elif self.reward_scale is not None:  # what the extrinsic signal reads
            fields[ENVIRONMENT_REWARDS] = self.reward_scale.scale(traj.agent, traj.rewards, traj.done)
        fields.update({obs_key(i): o for i, o in enumerate(traj.obs)})
        fields[LOG_PROBS] = traj.log_probs
        fields[MASKS] = np.ones(n, np.float32)
        # Only when a reward signal reads them (curiosity): PPO's own losses never do.
        if self.optimizer.needs_next_obs:
            for i, (o, nxt) in enumerate(zip(traj.obs, traj.next_obs)):
                fields[next_obs_key(i)] = np.concatenate([o[1:], nxt], axis=0)
        total_adv = np.zeros(n, np.float32)
        reward_sums: Dict[str, float] = {}
        for name, signal in self.signals.items():
            rewards = signal.evaluate(fields, self.has_updated)
            v = values[name][:-1]
            terminal = traj.done and not traj.interrupted and signal.use_terminal_states
            v_next = 0.0 if terminal else float(values[name][-1])
            adv = get_gae(rewards, v, v_next, signal.gamma, hp.lambd)
            fields[signal_key(name, REWARDS)] = rewards
            fields[signal_key(name, VALUE_ESTIMATES)] = v
            fields[signal_key(name, RETURNS)] = adv + v  # lambda-returns: the value targets
            fields[signal_key(name, ADVANTAGE)] = adv
            total_adv += adv
            reward_sums[name] = float(rewards.sum())
            self.stats.add_stat(f"Policy/{signal.value_tag} Value Estimate", float(v.mean()))
        fields[ADVANTAGES] = total_adv
        if recurrent:
            assert traj.memory is not None  # a recurrent policy's trajectories carry it
            fields[MEMORY] = traj.memory
            if traj.prev_action is not None:
                fields[PREV_ACTION] = traj.prev_action
            if critic_memory is not None:
                fields[CRITIC_MEMORY] = critic_memory
            if hp.pack_sequences:
                # Packed (trainers/buffer.py): the update restarts the LSTMs from the
                # stored memories here.
                fields[RESET] = np.zeros(n, np.float32)
                fields[RESET][0] = 1.0
            else:
                # ML-Agents' layout: the trajectory fills whole sequences, its last one
                # padded (masks 0), and buffer_size counts the padding.
                fields = pad_trajectory_end(fields, self.policy.sequence_length)
        self.buffer.add_fields(fields)
        self.add_signal_returns(traj, reward_sums)

    # ----------------------------------------------------------------- update

    @property
    def experiences(self) -> int:
        return self.buffer.num_experiences

    @property
    def ready_to_update(self) -> bool:
        """ML-Agents' rule: update once the buffer holds *more* than ``buffer_size`` rows
        (the whole buffer is then used, in ``rows // batch_size`` minibatches per epoch);
        with ``update_when_full``, once it holds ``buffer_size`` (Stable-Baselines3)."""
        hp = self.hyperparameters
        if hp.update_when_full:
            return self.buffer.num_experiences >= hp.buffer_size
        return self.buffer.num_experiences > hp.buffer_size

    def update(self) -> Dict[str, float]:
        """``num_epoch`` shuffled passes, **one** ``sess.run`` per minibatch; clears the buffer.

        Returns the update statistics averaged over every minibatch.
        """
        hp = self.hyperparameters
        # Recurrent, packed: the trajectories' last sequence is padded (masks 0) to whole
        # sequences (trainers/buffer.py); padded, every sequence is whole already.
        self.buffer.pad_to_sequences(self.policy.sequence_length)
        if hp.advantage_normalization == "buffer":
            # Normalised over the whole update buffer (docs/ML-AGENTS-FACTS.md#2-algorithm-facts-tf-era).
            # Padded sequences: over every row, the padding's zeros included, as ML-Agents
            # (`_update_policy`): with episodes shorter than a sequence this scales the real
            # advantages up against the entropy bonus, and learns Memory in fewer steps
            # (README, "Memory (LSTM)"). Packed: over the real rows (mask 1).
            valid = self.buffer[MASKS] > 0
            if self.policy.use_recurrent and not hp.pack_sequences:
                valid = np.ones_like(valid)
            self.buffer[ADVANTAGES] = normalized(self.buffer[ADVANTAGES], valid, 1e-10)
        per_minibatch = hp.advantage_normalization == "minibatch"
        keys = list(self.optimizer.placeholders)
        totals: Dict[str, float] = defaultdict(float)
        count = 0
        self.behavior_graph.begin_update()  # on a cluster: the weights go there
        for _ in range(hp.num_epoch):
            for minibatch in self.buffer.minibatches(hp.batch_size, self.rng, self.policy.sequence_length, keys):
                if per_minibatch:  # Stable-Baselines3's normalize_advantage (its epsilon, 1e-8, torch's unbiased std)
                    adv = normalized(minibatch[ADVANTAGES], minibatch[MASKS] > 0, 1e-8, ddof=1)
                    minibatch = {**minibatch, ADVANTAGES: adv}
                feed = prepare_signal_feeds(list(self.signals.values()), minibatch, len(minibatch[MASKS]))
                run_update = self.optimizer.update_separately if self.separate_signal_updates else self.optimizer.update
                for name, value in run_update(minibatch, self.step, feed).items():
                    totals[name] += value
                count += 1
        self.behavior_graph.end_update()  # ... and come back
        self.buffer.clear()
        self.has_updated = True
        self.policy.resample_exploration()  # use_sde: new noise for the new weights
        averaged = {k: v / max(count, 1) for k, v in totals.items()}
        if self.bc is not None:
            # A separate pass after the PPO epochs, with its own runs
            # (docs/ML-AGENTS-FACTS.md#2-algorithm-facts-tf-era).
            averaged["pretraining_loss"] = self.bc.update(self.step)
        self.report_update(averaged, UPDATE_TAGS)
        return averaged
