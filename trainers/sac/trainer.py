"""SAC trainer of one behavior: trajectories -> replay buffer -> one-run updates every
``steps_per_update`` agent steps.

The controller drives it exactly as PPO (`process_trajectory`, `ready_to_update`,
`update`). After ``buffer_init_steps`` agent steps (and at least ``batch_size`` stored
experiences), ``update`` runs as many SAC updates as the step count asks for (ML-Agents'
rule: while ``(step - buffer_init_steps) / update_steps > steps_per_update``), each **one**
``sess.run`` on ``batch_size`` replayed rows. Rewards of the learned signals (curiosity,
GAIL) are evaluated on each sampled minibatch (they change as those networks learn,
as in ML-Agents); the extrinsic reward is the stored one. Every
``reward_signal_steps_per_update`` steps the signals' networks and BC are updated **in the
same run** as the SAC update (when ``reward_signal_steps_per_update`` is smaller than
``steps_per_update`` they still update at most once per SAC run).

``save_replay_buffer: true`` writes the buffer next to the checkpoints
(``<Behavior>/replay_buffer.npz``, atomically, with the step it belongs to) at every
checkpoint; ``--resume`` restores it.

Recurrent SAC (``network_settings.memory``, ML-Agents' semantics): each trajectory is stored
with the actor memory every step acted from (``memory``), the critic memory every step
started from (``critic_memory``, the value network's own LSTM carried per agent across its
trajectories) and, with discrete actions, the previous actions; the replay left-pads it to
whole sequences of ``sequence_length`` rows. An update samples ``max(1, batch_size //
sequence_length)`` whole sequences (ML-Agents' count), whose first rows give the LSTMs'
initial memories (`trainers.sac.optimizer`).
"""
from __future__ import annotations

import os
from collections import defaultdict
from typing import Dict, Optional, Sequence

import numpy as np

from envs.base_env import BehaviorSpec
from trainers.bc import BCModule
from trainers.exceptions import CheckpointError
from trainers.layout import REPLAY_BUFFER_FILE
from trainers.fields import (
    CRITIC_MEMORY,
    MEMORY,
    PREV_ACTION,
    REWARDS,
    SAC_NOISE,
    TERMINAL,
    next_obs_key,
    obs_key,
    signal_key,
)
from trainers.optimizer import prepare_signal_feeds
from trainers.sac.optimizer import SACOptimizer
from trainers.sac.replay import ReplayBuffer
from trainers.config import SACSettings, TrainerSettings
from trainers.stats import StatsReporter
from trainers.trainer import Trainer
from trainers.loop.trajectory import Trajectory

REPLAY_FILE = REPLAY_BUFFER_FILE  # the file's name is trainers.layout's; kept here for importers

# Update statistics -> the TensorBoard tags ML-Agents users read.
UPDATE_TAGS = {
    "policy_loss": "Losses/Policy Loss",
    "value_loss": "Losses/Value Loss",
    "q1_loss": "Losses/Q1 Loss",
    "q2_loss": "Losses/Q2 Loss",
    "entropy_loss": "Losses/Entropy Loss",
    "entropy_coef": "Policy/Entropy Coeff",
    "entropy": "Policy/Entropy",
    "learning_rate": "Policy/Learning Rate",
    "q1_estimate": "Policy/Q1 Estimate",
}


class SACTrainer(Trainer):
    """Trains one behavior with soft actor-critic."""

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
        super().__init__(behavior_name, spec, settings, stats, seed, devices, cpu_only)
        hp = settings.hyperparameters
        assert isinstance(hp, SACSettings)
        self.hyperparameters: SACSettings = hp
        self.optimizer = SACOptimizer(self.policy, settings, self.signals, devices)
        self.bc: Optional[BCModule] = None
        if settings.behavioral_cloning is not None:
            # One BC minibatch joins the update run, after the SAC applies.
            self.bc = BCModule(
                self.policy, settings.behavioral_cloning, hp.learning_rate, hp.batch_size, 1, seed,
                after=[self.optimizer.sac_op],
            )
        self._finish_graph()
        self.optimizer.init_targets()
        self.replay = ReplayBuffer(
            hp.buffer_size, self.policy.sequence_length, where=f"behaviors.{behavior_name}.hyperparameters.buffer_size"
        )
        # Sequences per update: ML-Agents' max(1, batch_size // sequence_length).
        self.sequences_per_update = max(1, hp.batch_size // self.policy.sequence_length)
        self._learned_signals = [s for s in self.signals.values() if s.optimizer_group() is not None]
        self.update_steps = 1  # SAC updates so far + 1 (ML-Agents' counter)
        self.reward_signal_update_steps = 1
        self.has_updated = False

    # -------------------------------------------------------------- experience

    def trajectory_fields(self, traj: Trajectory) -> Dict[str, np.ndarray]:
        """The replay fields of a trajectory, ``[T, ...]`` each."""
        n = len(traj)
        fields = self.step_fields(traj)
        for i, (o, nxt) in enumerate(zip(traj.obs, traj.next_obs)):
            fields[obs_key(i)] = o
            fields[next_obs_key(i)] = np.concatenate([o[1:], nxt], axis=0)
        # Q targets stop only at true terminal states (not at time limits).
        fields[TERMINAL] = np.zeros(n, np.float32)
        fields[TERMINAL][-1] = float(traj.done and not traj.interrupted)
        return fields

    def process_trajectory(self, traj: Trajectory) -> None:
        """Normalizer update, reward and value statistics; appends to the replay buffer."""
        if self.policy.normalize:
            self.policy.update_normalization(traj.obs)
        fields = self.trajectory_fields(traj)
        values, critic_memory = self.optimizer.trajectory_values(traj.obs, traj.agent, traj.done)
        if self.policy.use_recurrent:
            assert traj.memory is not None  # a recurrent policy's trajectories carry it
            fields[MEMORY] = traj.memory
            assert critic_memory is not None
            fields[CRITIC_MEMORY] = critic_memory
            if PREV_ACTION in self.optimizer.placeholders:
                assert traj.prev_action is not None
                fields[PREV_ACTION] = traj.prev_action
        reward_sums: Dict[str, float] = {}
        for name, signal in self.signals.items():
            reward_sums[name] = float(signal.evaluate(fields, self.has_updated).sum())
            self.stats.add_stat(f"Policy/{signal.value_tag} Value Estimate", float(values[name].mean()))
        self.replay.add(fields)
        self.add_signal_returns(traj, reward_sums)

    # ----------------------------------------------------------------- update

    def _due(self, counter: int, steps_per_update: float) -> bool:
        return (self.step - self.hyperparameters.buffer_init_steps) / counter > steps_per_update

    @property
    def experiences(self) -> int:
        return self.replay.num_experiences

    @property
    def ready_to_update(self) -> bool:
        hp = self.hyperparameters
        return (
            self.step >= hp.buffer_init_steps
            and self.replay.num_experiences >= hp.batch_size
            and self._due(self.update_steps, hp.steps_per_update)
        )

    def update(self) -> Dict[str, float]:
        """The SAC updates the step count asks for, one ``sess.run`` each; returns the
        statistics averaged over them (also added to the stats reporter)."""
        hp = self.hyperparameters
        rs_steps = hp.resolved_reward_signal_steps_per_update
        totals: Dict[str, float] = defaultdict(float)
        counts: Dict[str, int] = defaultdict(int)
        rows = self.sequences_per_update * self.policy.sequence_length
        while self._due(self.update_steps, hp.steps_per_update):
            batch = self.replay.sample(self.sequences_per_update, self.rng)
            if self.spec.action_spec.is_continuous:
                batch[SAC_NOISE] = self.rng.standard_normal(
                    (rows, self.spec.action_spec.continuous_size), dtype=np.float32
                )
            for name, signal in self.signals.items():
                batch[signal_key(name, REWARDS)] = signal.evaluate(batch, self.has_updated)
            with_signals = bool(self._learned_signals or self.bc is not None) and self._due(
                self.reward_signal_update_steps, rs_steps
            )
            if with_signals:
                feed = prepare_signal_feeds(list(self.signals.values()), batch, rows)
                if self.bc is not None:
                    out = self.optimizer.update(
                        batch, self.step, feed, True, [self.bc.train_op], [self.bc.loss],
                        self.bc.feed_list, self.bc.sample_feeds(self.step),
                    )
                    out["pretraining_loss"] = out.pop("extra/0")
                else:
                    out = self.optimizer.update(batch, self.step, feed, True)
                self.reward_signal_update_steps += 1
            else:
                out = self.optimizer.update(batch, self.step, with_signals=False)
            self.update_steps += 1
            for k, v in out.items():
                totals[k] += v
                counts[k] += 1
        self.has_updated = True
        averaged = {k: v / counts[k] for k, v in totals.items()}
        self.report_update(averaged, UPDATE_TAGS)
        return averaged

    # ------------------------------------------------------------- checkpoints

    def replay_path(self, directory: str) -> str:
        return os.path.join(directory, REPLAY_FILE)

    def save(self, directory: str) -> str:
        """The checkpoint, then (``save_replay_buffer``) the replay buffer, atomically."""
        prefix = super().save(directory)
        if self.hyperparameters.save_replay_buffer:
            self.replay.save(self.replay_path(directory), self.step)
        return prefix

    def load(self, prefix: str, reset_step: bool = False) -> None:
        """Restores the checkpoint; on resume (not ``reset_step``) also the replay buffer
        when ``save_replay_buffer`` and the file exist. The update counters follow the step
        (no burst of catch-up updates after a resume)."""
        super().load(prefix, reset_step)
        hp = self.hyperparameters
        done = max(0, self.step - hp.buffer_init_steps)
        self.update_steps = int(done / hp.steps_per_update) + 1
        self.reward_signal_update_steps = int(done / hp.resolved_reward_signal_steps_per_update) + 1
        self.has_updated = self.step > hp.buffer_init_steps
        path = self.replay_path(os.path.dirname(prefix))
        if reset_step or not hp.save_replay_buffer or not os.path.isfile(path):
            return
        try:
            saved_step = self.replay.load(path)
        except (OSError, ValueError, KeyError) as exc:
            raise CheckpointError(f"{path}: cannot restore the replay buffer ({exc})") from None
        if saved_step != self.step:
            # The buffer is written after the checkpoint: a crash in between leaves the
            # previous checkpoint's buffer, which is still valid experience.
            print(
                f"[WARNING] {self.behavior_name}: replay buffer from step {saved_step}, checkpoint at step "
                f"{self.step}; continuing with it",
                flush=True,
            )
