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
"""
from __future__ import annotations

from typing import Dict, Hashable, Optional

import numpy as np

from trainers.tf import tf
from trainers.tf.normalizer import build_normalizer
from trainers.tf.session import CALLER_THREAD, FastCallable

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
        # Per agent: the discounted return of its current episode so far (`scale` only;
        # with `scale_step` the trajectory assembly keeps it).
        self._returns: Dict[Hashable, float] = {}
        # `scale_step` runs at every env step: a compiled callable, made at its first call
        # (the graph is final by then). A plain sess.run cost ~1.5 ms per step under load.
        self._step_run: Optional[FastCallable] = None

    def scale_step(self, rewards: np.ndarray, returns: np.ndarray) -> np.ndarray:
        """One env step: ``returns`` ``[n]`` (each agent's discounted return, this step's
        reward included) are merged, then ``rewards`` ``[n]`` are scaled by the variance
        after the merge -> ``[n]`` float32, clipped to +-10. One ``sess.run``."""
        if self._step_run is None:
            self._step_run = FastCallable(
                self.session, [self._updated_variance], [self._stats.update_input], pool=CALLER_THREAD
            )
        variance = float(self._step_run(np.asarray(returns, np.float32)[:, None])[0][0])
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
        if len(returns):
            variance = float(self.session.run(self._updated_variance, {self._stats.update_input: returns[:, None]})[0])
        else:
            variance = float(self.session.run(self._variance)[0])
        scaled = np.asarray(rewards, np.float64) / np.sqrt(variance + EPSILON)
        return np.clip(scaled, -CLIP_REWARD, CLIP_REWARD).astype(np.float32)
