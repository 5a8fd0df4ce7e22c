"""Action distributions: Gaussian (continuous), multi-branch categorical (discrete).

Conventions shared with ML-Agents 2.0: continuous actions are sampled unbounded and the
environment (and the exported model) receives ``clip(a, -3, 3) / 3``; the log-probability
used by PPO is that of the unclipped sample. Discrete masks are 1 = allowed, 0 = masked.

PPO's ``use_sde`` (gSDE, Stable-Baselines3's ``StateDependentNoiseDistribution`` with
``full_std``, no ``expln``, features not learned): the Gaussian's std depends on the state,
``sigma^2 = z^2 @ exp(log_std)^2 + 1e-6`` for the encoding ``z`` ``[B, H]`` (gradient
stopped) and a trainable ``[H, c]`` ``log_std``; the acting sample is
``mean + z @ (eps * exp(log_std))`` for a per-agent ``eps`` ``[H, c]`` fed from outside and
kept over several steps (`trainers.policy.Policy`), so that the noise is a smooth function
of the state. For one step with a fresh ``eps``, that sample is distributed as
``N(mean, sigma^2)`` (less the 1e-6), which is what the export and the update use.

SAC's actor (``squashed=True``) is a tanh-squashed Gaussian with a state-dependent log std
(as ML-Agents' SAC): the raw sample ``u`` is what buffers store, the environment receives
``tanh(u)``, and the log-probability is that of the squashed action,
``log N(u) - sum_i log(1 - tanh(u_i)^2)``, written stably as
``log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u))``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List, Optional, Sequence

from trainers.tf import tf
from trainers.tf.layers import dense

LOG_STD_MIN = -20.0
LOG_STD_MAX = 2.0
CONTINUOUS_CLIP = 3.0


def env_continuous(raw: tf.Tensor, clip: float = CONTINUOUS_CLIP) -> tf.Tensor:
    """``[B, c]`` raw actions -> ``[B, c]`` env actions in [-1, 1]: clip(a, -clip, clip) / clip
    (ML-Agents: 3; PPO's ``action_clip``)."""
    return tf.clip_by_value(raw, -clip, clip) / clip


def squash_log_correction(raw: tf.Tensor) -> tf.Tensor:
    """``[B, c]`` raw ``u`` -> ``[B, c]`` ``log(1 - tanh(u)^2)``, stable for large ``|u|``."""
    return 2.0 * (math.log(2.0) - raw - tf.nn.softplus(-2.0 * raw))


@dataclass(frozen=True)
class Gaussian:
    """Diagonal Gaussian; tanh-squashed when ``squashed`` (SAC).

    Attributes:
        mean: ``[B, c]``.
        log_std: ``[c]`` (a trainable variable, clipped) or ``[B, c]`` (squashed: a head;
            state-dependent noise: from the noise matrix's std).
        sample: ``[B, c]`` raw sample (unclipped, unsquashed).
        squashed: the environment receives ``tanh(raw)`` instead of ``clip(raw, -clip, clip) / clip``.
        clip: see ``squashed`` (PPO's ``action_clip``; ML-Agents' 3).
    """

    mean: tf.Tensor
    log_std: tf.Tensor
    sample: tf.Tensor
    squashed: bool = False
    clip: float = CONTINUOUS_CLIP

    def log_prob_per_dim(self, actions: tf.Tensor) -> tf.Tensor:
        """``[B, c]`` raw actions -> ``[B, c]`` log-density of each dimension (of
        ``tanh(raw)`` when squashed: the change-of-variables term is subtracted)."""
        z = (actions - self.mean) * tf.exp(-self.log_std)
        per_dim = -0.5 * tf.square(z) - self.log_std - 0.5 * math.log(2.0 * math.pi)
        if self.squashed:
            per_dim -= squash_log_correction(actions)
        return per_dim

    def log_prob(self, actions: tf.Tensor) -> tf.Tensor:
        """``[B, c]`` raw actions -> ``[B]`` joint log-probability (the dimensions' sum)."""
        return tf.reduce_sum(self.log_prob_per_dim(actions), axis=1)

    def entropy(self) -> tf.Tensor:
        """``[B]``: the *mean* over dims of 0.5 + 0.5 log(2 pi) + log_std (of the unsquashed
        Gaussian; the squashed entropy has no closed form).

        ML-Agents' convention (TF ``GaussianDistribution``, torch
        ``GaussianDistInstance.entropy``): averaged, not summed, over action dimensions, so
        that ``beta`` weighs the entropy bonus the same whatever the number of dimensions.
        """
        per_dim = 0.5 + 0.5 * math.log(2.0 * math.pi) + self.log_std + tf.zeros_like(self.mean)
        return tf.reduce_mean(per_dim, axis=1)

    def to_env(self, raw: tf.Tensor) -> tf.Tensor:
        """``[B, c]`` raw actions -> ``[B, c]`` what the environment receives, in [-1, 1]."""
        if self.squashed:
            # Clipped as well: onnxruntime's float32 tanh returns 1.0000001 for large inputs,
            # and a runtime may reject an action outside [-1, 1].
            return tf.clip_by_value(tf.tanh(raw), -1.0, 1.0)
        return env_continuous(raw, self.clip)


def build_gaussian(
    encoding: tf.Tensor,
    size: int,
    squashed: bool = False,
    noise: Optional[tf.Tensor] = None,
    log_std_init: float = 0.0,
    *,
    state_dependent: bool = False,
    sde_noise: Optional[tf.Tensor] = None,
    action_clip: float = CONTINUOUS_CLIP,
) -> Gaussian:
    """Gaussian head on ``encoding`` ``[B, H]`` in scope ``continuous``.

    ``squashed`` (SAC): the log std is a second head on the encoding (state-dependent).
    ``noise`` ``[B, size]``: standard-normal noise fed from outside (SAC's towers, so that
    1 and N towers draw the same sample); None: drawn in the graph.
    ``state_dependent`` (PPO's ``use_sde``, see the module docstring): the log std is the
    ``[H, size]`` variable ``sde_log_std``; ``sde_noise`` ``[B, H, size]``: each row's
    standard-normal noise matrix (acting); None: a fresh one per row (the same law).
    ``action_clip``: the env receives ``clip(raw, -action_clip, action_clip) / action_clip``
    (not squashed).
    """
    if state_dependent:
        return _state_dependent_gaussian(encoding, size, log_std_init, sde_noise, action_clip)
    with tf.variable_scope("continuous"):
        mean = dense(encoding, size, "mu", gain=0.01)
        if squashed:
            log_std_raw = dense(encoding, size, "log_std", gain=0.01)
        else:
            init = tf.zeros_initializer() if log_std_init == 0.0 else tf.constant_initializer(log_std_init)
            log_std_raw = tf.get_variable("log_std", [size], encoding.dtype, init)
    log_std = tf.clip_by_value(log_std_raw, LOG_STD_MIN, LOG_STD_MAX)
    if noise is None:
        noise = tf.random.normal(tf.shape(mean), dtype=mean.dtype)
    sample = mean + tf.exp(log_std) * noise
    return Gaussian(mean, log_std, sample, squashed, action_clip)


#: Stable-Baselines3's gSDE epsilon: added to the variance (keeps its log finite).
SDE_VARIANCE_EPSILON = 1e-6


def _state_dependent_gaussian(
    encoding: tf.Tensor, size: int, log_std_init: float, sde_noise: Optional[tf.Tensor], action_clip: float
) -> Gaussian:
    """gSDE: ``[B, H]`` encoding -> Gaussian with ``[B, size]`` log std (module docstring)."""
    hidden = int(encoding.shape[-1])
    with tf.variable_scope("continuous"):
        mean = dense(encoding, size, "mu", gain=0.01)
        sde_log_std = tf.get_variable(
            "sde_log_std", [hidden, size], encoding.dtype, tf.constant_initializer(log_std_init)
        )
    # Not clipped (SB3's exp); the features are not trained through the noise (SB3's
    # learn_features=False): only the mean and the matrix's std learn from it.
    std = tf.exp(sde_log_std)  # [H, c]
    latent = tf.stop_gradient(encoding)  # [B, H]
    variance = tf.matmul(tf.square(latent), tf.square(std)) + SDE_VARIANCE_EPSILON  # [B, c]
    log_std = 0.5 * tf.math.log(variance)
    if sde_noise is None:
        sample = mean + tf.sqrt(variance) * tf.random.normal(tf.shape(mean), dtype=mean.dtype)
    else:
        # z @ (eps * std) per row: [B, H, 1] * [B, H, c] summed over H.
        sample = mean + tf.reduce_sum(tf.expand_dims(latent, 2) * sde_noise * std, axis=1)
    return Gaussian(mean, log_std, sample, clip=action_clip)


@dataclass(frozen=True)
class MultiCategorical:
    """Independent categorical branches with action masks.

    Attributes:
        log_probs: per branch ``[B, branch_size]`` log-softmax of masked logits.
        sample: ``[B, num_branches]`` int32.
        deterministic: ``[B, num_branches]`` int32 argmax.
    """

    log_probs: List[tf.Tensor]
    sample: tf.Tensor
    deterministic: tf.Tensor

    def log_prob_per_dim(self, actions: tf.Tensor) -> tf.Tensor:
        """``[B, num_branches]`` int actions -> ``[B, num_branches]`` log-probability of each
        branch's action."""
        return tf.stack(
            [
                tf.reduce_sum(tf.one_hot(actions[:, i], int(lp.shape[-1]), dtype=lp.dtype) * lp, axis=1)
                for i, lp in enumerate(self.log_probs)
            ],
            axis=1,
        )

    def log_prob(self, actions: tf.Tensor) -> tf.Tensor:
        """``[B, num_branches]`` int actions -> ``[B]`` joint log-probability."""
        total = 0.0
        for i, lp in enumerate(self.log_probs):
            onehot = tf.one_hot(actions[:, i], int(lp.shape[-1]), dtype=lp.dtype)
            total += tf.reduce_sum(onehot * lp, axis=1)
        return total

    def entropy(self) -> tf.Tensor:
        """``[B]``: sum over branches of -sum p log p (masked actions contribute 0)."""
        total = 0.0
        for lp in self.log_probs:
            total += -tf.reduce_sum(tf.exp(lp) * lp, axis=1)
        return total


def build_multi_categorical(
    encoding: tf.Tensor, branches: Sequence[int], action_masks: tf.Tensor
) -> MultiCategorical:
    """Categorical heads on ``encoding`` ``[B, H]``; ``action_masks`` ``[B, sum(branches)]``."""
    log_probs, samples, argmaxes = [], [], []
    offset = 0
    with tf.variable_scope("discrete"):
        for i, size in enumerate(branches):
            logits = dense(encoding, size, f"branch_{i}", gain=0.01)
            mask = action_masks[:, offset : offset + size]
            offset += size
            # A masked action gets a logit of -1e8: probability exactly 0 in float32.
            masked = logits * mask - 1e8 * (1.0 - mask)
            lp = tf.nn.log_softmax(masked, axis=1)
            log_probs.append(lp)
            samples.append(tf.random.categorical(masked, 1, dtype=tf.int32))
            # expand_dims (ONNX Unsqueeze with an axes attribute up to opset 12), not
            # [:, None] (a strided slice that tf2onnx converts only from opset 10).
            argmaxes.append(tf.expand_dims(tf.argmax(masked, axis=1, output_type=tf.int32), 1))
    return MultiCategorical(log_probs, tf.concat(samples, axis=1), tf.concat(argmaxes, axis=1))
