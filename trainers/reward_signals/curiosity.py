"""Intrinsic curiosity (ICM; Pathak et al., 2017): reward what the agent cannot yet predict.

Networks (variable scope ``<name>/``, trained by their own Adam inside the one update run):

* encoder ``phi``: *raw* observations (as ML-Agents' ICM: never the policy's normaliser,
  whose drift would show up as novelty; ML-Agents 2.0 ``network_settings.normalize: true``
  opts in, see `signal_network`) -> ``[B, encoding_size]`` (the policy's visual encoder
  type, two swish layers; or the signal's own ``network_settings``); the same weights
  encode ``s`` and ``s'``;
* inverse model: ``[phi(s), phi(s')]`` -> the action taken (continuous: squared error in
  environment space, summed over dimensions; discrete: cross-entropy, summed over
  branches). It shapes ``phi`` to keep what the agent controls;
* forward model: ``[phi(s), a]`` -> ``phi(s')``; its error
  ``0.5 * sum_k (pred_k - phi(s')_k)^2`` is both its loss and the curiosity.

Loss = 10 x (0.2 x forward + 0.8 x inverse), masked means over the tower's rows.
Reward = clip(strength x forward error, 0, 1), zero until the first update (an untrained
forward model's error is noise, not novelty). Value targets do not stop at terminal states
(``use_terminal_states = False``): novelty does not end with the episode.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, List, Mapping, Optional, Sequence

import numpy as np

from trainers.fields import CONTINUOUS_ACTION, DISCRETE_ACTION, MASKS, NEXT_OBS, OBS, next_obs_key, obs_key
from trainers.reward_signals._features import action_features, action_placeholders, obs_placeholders, signal_network
from trainers.reward_signals.base import RewardSignal, SignalTower
from trainers.config import CuriositySettings
from trainers.tf import tf
from trainers.tf.encoders import build_body
from trainers.tf.layers import dense, swish
from trainers.tf.session import FastCallable
from trainers.tf.towers import OptimizerGroup, masked_mean

if TYPE_CHECKING:
    from trainers.policy import Policy

#: Hidden units of the forward and inverse models (ML-Agents' value).
MODEL_UNITS = 256
FORWARD_WEIGHT = 0.2
INVERSE_WEIGHT = 0.8
LOSS_SCALE = 10.0


@dataclass(frozen=True)
class ICMTensors:
    """Per-row outputs of one ICM copy.

    Attributes:
        forward_error: ``[B]`` 0.5 x squared error of the predicted next encoding.
        inverse_error: ``[B]`` squared error (continuous) + cross-entropy (discrete).
    """

    forward_error: tf.Tensor
    inverse_error: tf.Tensor


class CuriosityRewardSignal(RewardSignal):
    """The ``curiosity`` reward signal."""

    use_terminal_states = False
    uses_next_obs = True  # s' feeds the forward and inverse models

    def __init__(self, name: str, settings: CuriositySettings, policy: "Policy", seed: int = 0) -> None:
        super().__init__(name, settings, policy, seed)
        self.settings: CuriositySettings = settings
        spec = policy.spec
        self._num_obs = len(spec.observation_specs)
        # Raw observations in the TF era (item 5 of issue 14), as ML-Agents' ICM.
        self._network, self._normalizers = signal_network(
            settings, policy, tf_era_layers=2, tf_era_normalized=False
        )
        with policy.graph.as_default():
            self._optimizer = tf.train.AdamOptimizer(settings.learning_rate, name=f"{name}_adam")
            # An inference copy on its own placeholders, for `evaluate` (shares the weights).
            with tf.name_scope(f"{name}_evaluate"):
                self._obs = obs_placeholders(spec, OBS)
                self._next_obs = obs_placeholders(spec, NEXT_OBS)
                self._actions = action_placeholders(spec.action_spec, "eval")
                icm = self._build(
                    self._obs,
                    self._next_obs,
                    self._actions.get(CONTINUOUS_ACTION),
                    self._actions.get(DISCRETE_ACTION),
                )
                self._reward = tf.clip_by_value(self.strength * icm.forward_error, 0.0, 1.0)
        self._feed_list: List[tf.Tensor] = self._obs + self._next_obs + list(self._actions.values())
        self._evaluate_fn: Optional[FastCallable] = None

    # ------------------------------------------------------------------ graph

    def _build(
        self,
        obs: Sequence[tf.Tensor],
        next_obs: Sequence[tf.Tensor],
        continuous: Optional[tf.Tensor],
        discrete: Optional[tf.Tensor],
    ) -> ICMTensors:
        """Builds (or reuses by name) the ICM on ``obs``/``next_obs`` and the taken actions.

        Args:
            obs, next_obs: ``[B, *shape_i]`` each.
            continuous: ``[B, c]`` the policy's raw continuous actions (or None).
            discrete: ``[B, b]`` int32 (or None).
        """
        spec = self.policy.spec
        action_spec = spec.action_spec
        with tf.variable_scope(self.name, reuse=tf.AUTO_REUSE):
            phi = build_body(obs, spec.observation_specs, self._network, self._normalizers, "encoder")
            phi_next = build_body(next_obs, spec.observation_specs, self._network, self._normalizers, "encoder")
            actions = action_features(action_spec, continuous, discrete, self.policy.to_env)

            with tf.variable_scope("inverse"):
                hidden = dense(tf.concat([phi, phi_next], axis=1), MODEL_UNITS, "hidden", swish)
                inverse_error = tf.zeros_like(phi[:, 0])
                if action_spec.is_continuous:
                    predicted = dense(hidden, action_spec.continuous_size, "continuous")
                    target = actions[:, : action_spec.continuous_size]
                    inverse_error += tf.reduce_sum(tf.square(predicted - target), axis=1)
                if action_spec.is_discrete:
                    assert discrete is not None
                    for i, size in enumerate(action_spec.discrete_branches):
                        logits = dense(hidden, size, f"branch_{i}")
                        inverse_error += tf.nn.sparse_softmax_cross_entropy_with_logits(
                            labels=discrete[:, i], logits=logits
                        )

            with tf.variable_scope("forward"):
                hidden = dense(tf.concat([phi, actions], axis=1), MODEL_UNITS, "hidden", swish)
                predicted_next = dense(hidden, self._network.hidden_units, "next_encoding")
                forward_error = 0.5 * tf.reduce_sum(tf.square(predicted_next - phi_next), axis=1)
        return ICMTensors(forward_error, inverse_error)

    def update_fields(self) -> Sequence[str]:
        return tuple(next_obs_key(i) for i in range(self._num_obs))

    def optimizer_group(self) -> Optional[OptimizerGroup]:
        return OptimizerGroup(self.name, self._optimizer, (self.name + "/",))

    def build_tower(self, shard: Mapping[str, tf.Tensor]) -> Optional[SignalTower]:
        icm = self._build(
            [shard[obs_key(i)] for i in range(self._num_obs)],
            [shard[next_obs_key(i)] for i in range(self._num_obs)],
            shard.get(CONTINUOUS_ACTION),
            shard.get(DISCRETE_ACTION),
        )
        mask = shard[MASKS]
        forward_loss = masked_mean(icm.forward_error, mask)
        inverse_loss = masked_mean(icm.inverse_error, mask)
        loss = LOSS_SCALE * (FORWARD_WEIGHT * forward_loss + INVERSE_WEIGHT * inverse_loss)
        return SignalTower(loss, {"forward_loss": forward_loss, "inverse_loss": inverse_loss, "loss": loss})

    @property
    def stats(self) -> Mapping[str, str]:
        return {
            "Losses/Curiosity Forward Loss": f"{self.name}/forward_loss",
            "Losses/Curiosity Inverse Loss": f"{self.name}/inverse_loss",
        }

    # ---------------------------------------------------------------- running

    def evaluate(self, fields: Mapping[str, np.ndarray], has_updated: bool) -> np.ndarray:
        n = len(fields[obs_key(0)])
        if not has_updated:
            return np.zeros(n, np.float32)
        if self._evaluate_fn is None:
            self._evaluate_fn = FastCallable(self.policy.session, [self._reward], self._feed_list)
        feeds = [fields[obs_key(i)] for i in range(self._num_obs)]
        feeds += [fields[next_obs_key(i)] for i in range(self._num_obs)]
        feeds += [fields[key] for key in self._actions]
        return np.asarray(self._evaluate_fn(*feeds)[0], np.float32)
