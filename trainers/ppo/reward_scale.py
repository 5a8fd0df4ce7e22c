"""Reward normalisation by the running standard deviation of the discounted return
(``hyperparameters.normalize_reward``), Stable-Baselines3's ``VecNormalize(norm_reward=True)``.

Per agent, the discounted return ``R_t = gamma R_{t-1} + r_t`` restarts at 0 with each
episode; the running variance of every ``R_t`` seen is kept in the behavior's graph (so it
is saved with checkpoints and restored by ``--resume``), and each reward is scaled by
``1 / sqrt(var + 1e-8)`` and clipped to ``[-10, 10]``.

When: at the env step, as Stable-Baselines3 (`scale_step`, called by the trajectory
assembly, `trainers.loop.trajectory.StepRewardScale`): each env step's returns are merged,
then that step's rewards are scaled by the variance of every return up to and including
it. Scaling a whole trajectory later by the variance after its last step (`scale`, what
this module did before, kept for trajectories built without the assembly's scaling) is
not the same early in training: at the first steps the returns seen barely spread, so SB3
scales the first rewards up (to the clip) and the following ones down as the spread grows.
That transient shapes the first value estimates (the states of the first steps, low energy
on Acrobot, look worst) and is most of why SB3's PPO leaves -500 on Acrobot-v1 within its
first updates: without reward normalisation SB3 stays at -500 too (README, "Benchmarks").
The statistics start as one pseudo-return with variance 1 (`trainers.tf.normalizer`);
Stable-Baselines3 starts with a weight of 1e-4 (which does not change its Acrobot figures).

Where: the live statistics are three numpy floats (count, mean, M2) merged in Python, read
from the graph's variables at the first use (after any restore) and written back before
each checkpoint (`flush`). The merge runs at every env step, where a ``sess.run`` (100-200
us here) would be the largest cost after inference; the variables are only its saved copy.
"""
from __future__ import annotations

from typing import Dict, Hashable, Optional, Tuple

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
        # The saved copy of the statistics (checkpoints, --resume); its update op is unused.
        self._stats = build_normalizer(1, "reward_normalization")
        # The live statistics (count, mean, M2) of every return merged; None until the first
        # use, which reads them from the graph (a restore has happened by then).
        self._host: Optional[Tuple[float, float, float]] = None
        # Per agent: the discounted return of its current episode so far (`scale` only;
        # with `scale_step` the trajectory assembly keeps it).
        self._returns: Dict[Hashable, float] = {}

    def _merge(self, returns: np.ndarray) -> float:
        """Merges ``returns`` ``[n]`` into the statistics (Chan et al.'s parallel update, as
        `trainers.tf.normalizer` does in the graph) -> the variance after the merge."""
        if self._host is None:
            count, mean, m2 = self.session.run([self._stats.count, self._stats.mean, self._stats.m2])
            self._host = (float(count), float(mean[0]), float(m2[0]))
        count, mean, m2 = self._host
        if len(returns):
            x = np.asarray(returns, np.float64)
            n_b = float(len(x))
            mean_b = float(x.mean())
            m2_b = float(((x - mean_b) ** 2).sum())
            new_count = count + n_b
            delta = mean_b - mean
            mean = mean + delta * n_b / new_count
            m2 = m2 + m2_b + delta * delta * count * n_b / new_count
            count = new_count
            self._host = (count, mean, m2)
        return m2 / count

    def variance(self) -> float:
        """The variance of every return merged so far (the live statistics)."""
        return self._merge(np.empty(0))

    def flush(self) -> None:
        """Writes the live statistics into the graph's variables (before a checkpoint);
        no new ops: ``Variable.load`` feeds the variables' initializers."""
        if self._host is None:
            return  # nothing merged since the graph's values were read or restored
        count, mean, m2 = self._host
        self._stats.count.load(count, self.session)
        self._stats.mean.load(np.array([mean]), self.session)
        self._stats.m2.load(np.array([m2]), self.session)

    def reload(self) -> None:
        """Forgets the live statistics: the next use reads the graph's (after a restore)."""
        self._host = None

    def scale_step(self, rewards: np.ndarray, returns: np.ndarray) -> np.ndarray:
        """One env step: ``returns`` ``[n]`` (each agent's discounted return, this step's
        reward included) are merged, then ``rewards`` ``[n]`` are scaled by the variance
        after the merge -> ``[n]`` float32, clipped to +-10. No ``sess.run``."""
        variance = self._merge(returns)
        scaled = np.asarray(rewards, np.float64) / np.sqrt(variance + EPSILON)
        return np.clip(scaled, -CLIP_REWARD, CLIP_REWARD).astype(np.float32)

    def scale(self, agent: Hashable, rewards: np.ndarray, episode_ended: bool) -> np.ndarray:
        """``rewards`` ``[T]`` of one trajectory of ``agent`` -> scaled ``[T]`` float32, all
        by the variance after the whole trajectory's returns are merged (a trajectory
        without ``scaled_rewards``: built outside `trainers.loop.trajectory`)."""
        ret = self._returns.get(agent, 0.0)
        returns = np.empty(len(rewards), np.float64)
        for t, r in enumerate(rewards):
            ret = ret * self.gamma + float(r)
            returns[t] = ret
        if episode_ended:
            self._returns.pop(agent, None)
        else:
            self._returns[agent] = ret
        variance = self._merge(returns)
        scaled = np.asarray(rewards, np.float64) / np.sqrt(variance + EPSILON)
        return np.clip(scaled, -CLIP_REWARD, CLIP_REWARD).astype(np.float32)
