"""Reward normalisation by the running standard deviation of the discounted return
(``hyperparameters.normalize_reward``), Stable-Baselines3's ``VecNormalize(norm_reward=True)``.

Per agent, the discounted return ``R_t = gamma R_{t-1} + r_t`` restarts at 0 with each
episode; the running variance of every ``R_t`` seen is kept in the behavior's graph (so it
is saved with checkpoints and restored by ``--resume``), and each reward is scaled by
``1 / sqrt(var + 1e-8)`` and clipped to ``[-10, 10]``. A trajectory's returns are merged
before its rewards are scaled (Stable-Baselines3 merges each vectorised step's returns
before scaling that step's rewards). The statistics start as one pseudo-return with
variance 1 (`trainers.tf.normalizer`); Stable-Baselines3 starts with a weight of 1e-4.
"""
from __future__ import annotations

from typing import Dict, Hashable

import numpy as np

from trainers.tf import tf
from trainers.tf.normalizer import build_normalizer

CLIP_REWARD = 10.0
EPSILON = 1e-8


class RewardScale:
    """Scales one behavior's environment rewards; build it before the graph is finalised."""

    def __init__(self, session: tf.Session, gamma: float) -> None:
        self.session = session
        self.gamma = gamma
        self._stats = build_normalizer(1, "reward_normalization")
        self._variance = self._stats.m2 / self._stats.count
        # The variance once this trajectory's returns are merged: one run per trajectory.
        with tf.control_dependencies([self._stats.update_op]):
            self._updated_variance = tf.identity(self._stats.m2) / tf.identity(self._stats.count)
        # Per agent: the discounted return of its current episode so far.
        self._returns: Dict[Hashable, float] = {}

    def scale(self, agent: Hashable, rewards: np.ndarray, episode_ended: bool) -> np.ndarray:
        """``rewards`` ``[T]`` of one trajectory of ``agent`` -> scaled ``[T]`` float32."""
        ret = self._returns.get(agent, 0.0)
        returns = np.empty(len(rewards), np.float64)
        for t, r in enumerate(rewards):
            ret = ret * self.gamma + float(r)
            returns[t] = ret
        if episode_ended:
            self._returns.pop(agent, None)
        else:
            self._returns[agent] = ret
        if len(returns):
            variance = float(self.session.run(self._updated_variance, {self._stats.update_input: returns[:, None]})[0])
        else:
            variance = float(self.session.run(self._variance)[0])
        scaled = np.asarray(rewards, np.float64) / np.sqrt(variance + EPSILON)
        return np.clip(scaled, -CLIP_REWARD, CLIP_REWARD).astype(np.float32)
