"""Random network distillation (RND; Burda et al., 2018), ML-Agents 2.0's ``rnd`` signal:
reward the observations a trained network cannot yet imitate a fixed random one on.

Networks (variable scope ``<name>/``): a **target** (``<name>/target/``, random weights,
never trained: outside the signal's optimizer group, but saved with checkpoints so a
resumed run compares against the same target) and a **predictor**
(``<name>/predictor/``, trained by its own Adam inside the one update run), both the
signal's `network_settings` body on the observations (as ML-Agents: `NetworkBody` without
memory; ``normalize: true`` reads through the policy's running normalisation, see
`trainers.reward_signals._features.signal_network`).

Per row, ``e = sum_k (predictor_k(s) - target_k(s))^2`` over the ``hidden_units``
outputs; the loss is its masked mean over the tower's rows, the reward ``strength x e``
(ML-Agents' `RNDRewardProvider`: evaluated from the first step, not clipped). Value targets
do not stop at terminal states (``use_terminal_states = False``: ML-Agents' ``_ignore_done``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from trainers.config import NetworkSettings, RNDSettings
from trainers.fields import MASKS, OBS, obs_key
from trainers.reward_signals._features import obs_placeholders, signal_network
from trainers.reward_signals.base import RewardSignal, SignalTower
from trainers.tf import tf
from trainers.tf.encoders import build_body
from trainers.tf.normalizer import Normalizer
from trainers.tf.session import FastCallable
from trainers.tf.towers import OptimizerGroup, masked_mean

if TYPE_CHECKING:
    from trainers.policy import Policy

#: ML-Agents' RNDSettings network when none is given (its NetworkSettings defaults).
DEFAULT_UNITS = 128
DEFAULT_LAYERS = 2


class RNDRewardSignal(RewardSignal):
    """The ``rnd`` reward signal."""

    use_terminal_states = False  # novelty does not end with the episode

    def __init__(self, name: str, settings: RNDSettings, policy: "Policy", seed: int = 0) -> None:
        super().__init__(name, settings, policy, seed)
        self.settings: RNDSettings = settings
        spec = policy.spec
        self._num_obs = len(spec.observation_specs)
        if settings.network_settings is None:
            # ML-Agents: NetworkSettings() (or the deprecated encoding_size as its units), raw
            # observations.
            self._network = NetworkSettings(
                hidden_units=settings.encoding_size or DEFAULT_UNITS,
                num_layers=DEFAULT_LAYERS,
                vis_encode_type=policy.settings.network_settings.vis_encode_type,
                activation="swish",
            )
            self._normalizers: Sequence[Optional[Normalizer]] = [None] * len(policy.normalizers)
        else:
            self._network, self._normalizers = signal_network(settings, policy, tf_era_layers=DEFAULT_LAYERS)
        with policy.graph.as_default():
            self._optimizer = tf.train.AdamOptimizer(settings.learning_rate, name=f"{name}_adam")
            with tf.name_scope(f"{name}_evaluate"):
                self._obs = obs_placeholders(spec, OBS)
                error, self.target_output, self.predictor_output = self._networks(self._obs)
                self._reward = self.strength * error
        self._feed_list: List[tf.Tensor] = list(self._obs)
        self._evaluate_fn: Optional[FastCallable] = None

    def _networks(self, obs: Sequence[tf.Tensor]) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """On ``obs`` ``[B, *shape_i]``: the predictor's squared error ``[B]`` against the
        target, the target's and the predictor's outputs ``[B, hidden_units]`` (builds
        both networks, or reuses them by name)."""
        specs = self.policy.spec.observation_specs
        with tf.variable_scope(self.name, reuse=tf.AUTO_REUSE):
            target = tf.stop_gradient(build_body(obs, specs, self._network, self._normalizers, "target"))
            prediction = build_body(obs, specs, self._network, self._normalizers, "predictor")
        return tf.reduce_sum(tf.square(prediction - target), axis=1), target, prediction

    def optimizer_group(self) -> Optional[OptimizerGroup]:
        # The predictor only: the target keeps its random weights.
        return OptimizerGroup(self.name, self._optimizer, (f"{self.name}/predictor/",))

    def build_tower(self, shard: Mapping[str, tf.Tensor]) -> Optional[SignalTower]:
        error, _, _ = self._networks([shard[obs_key(i)] for i in range(self._num_obs)])
        loss = masked_mean(error, shard[MASKS])
        return SignalTower(loss, {"loss": loss})

    @property
    def stats(self) -> Mapping[str, str]:
        return {"Losses/RND Loss": f"{self.name}/loss"}

    def evaluate(self, fields: Mapping[str, np.ndarray], has_updated: bool) -> np.ndarray:
        if self._evaluate_fn is None:
            self._evaluate_fn = FastCallable(self.policy.session, [self._reward], self._feed_list)
        return np.asarray(self._evaluate_fn(*[fields[obs_key(i)] for i in range(self._num_obs)])[0], np.float32)
