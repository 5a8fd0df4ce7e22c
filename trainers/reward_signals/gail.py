"""GAIL (Ho & Ermon, 2016) and VAIL (Peng et al., 2018): reward looking like the expert.

A discriminator ``D(s)`` (``D(s, a, done)`` with ``use_actions: true``, as ML-Agents: the
episode-end flag goes in only beside the actions; alone it would let D tell policy from
expert by where episodes end) in variable scope ``<name>/`` learns to tell expert rows
(from a `.demo` file) from the policy's rows; the policy is rewarded
``-log(1 - D + 1e-7) x strength``, large where its rows look like the expert's.

**Era: ML-Agents' TF trainer (release_1), our lineage.** The reward is zero until the
first update (an untrained D's score is noise), and value targets do not stop at a true
terminal state (``use_terminal_states = False``: the last value is bootstrapped even when
the episode ended, since the imitation reward does not end with the episode). Late torch
releases dropped the gate and zero the value at terminal states.

**Update** (in the trainer's one ``sess.run`` per minibatch, as its own optimizer group):
for a policy minibatch of ``B`` rows, `prepare_update` samples ``B`` expert rows (the
batches must be the same size: the towers split both by the same row counts). ML-Agents
cut the policy minibatch to the demo length instead; our trainer fixes the minibatch
size, so when the demo has fewer than ``B`` rows the expert rows are drawn *with*
replacement (else without). The loss, masked means over the tower's policy rows::

    L = -mean log D(expert) - mean log(1 - D(policy))             (from logits, stable)
        + 10 x mean_rows (||grad_x D(x_interp)|| - 1)^2            (gradient penalty)
        [+ beta x (KL - 0.5)]                                        (VAIL)

with ``x_interp = u x expert + (1 - u) x policy`` row by row, ``u ~ U(0, 1)`` per row, over
every input of D (observations, and with ``use_actions`` actions and done).

**VAIL** (``use_vail: true``) puts a stochastic bottleneck before the output:
``z ~ N(mu(h), sigma^2)`` with ``z`` of size 128 and a learned state-independent sigma;
``KL = mean_rows KL_policy + mean_rows KL_expert`` with ``KL_x = KL(N(mu(x), sigma^2) ||
N(0, I))``: the *sum* of the two sides, as ML-Agents' ``kl_loss``. The non-trainable
variable ``gail_beta`` (initially 1) is updated in the same run, after the discriminator's
apply: ``beta <- max(1e-7, beta + 0.0005 x (KL - 0.5))`` with the tower-averaged KL, so
the bottleneck carries about 0.5 nats. Training samples ``z``;
rewards use ``z = mu`` (and so does the gradient penalty).

Actions (``use_actions: true``) are compared in environment space (see `_features`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, List, Mapping, Optional, Sequence

import numpy as np

from trainers.expert import load_expert_data
from trainers.fields import ACTIONS, CONTINUOUS_ACTION, DISCRETE_ACTION, DONE, MASKS, OBS, obs_key
from trainers.reward_signals._features import (
    action_features,
    action_placeholders,
    obs_placeholders,
    signal_network,
)
from trainers.reward_signals.base import FeedDict, RewardSignal, SignalTower
from trainers.config import GAILSettings
from trainers.tf import tf
from trainers.tf.encoders import build_body
from trainers.tf.layers import dense, swish
from trainers.tf.session import FastCallable
from trainers.tf.towers import OptimizerGroup, masked_mean

if TYPE_CHECKING:
    from trainers.policy import Policy

GRADIENT_PENALTY_WEIGHT = 10.0
REWARD_EPSILON = 1e-7
#: VAIL's beta never falls below this (ML-Agents' ``make_beta``): a beta of exactly 0
#: would switch the bottleneck's KL term off for good.
BETA_FLOOR = 1e-7
Z_SIZE = 128
VAIL_ALPHA = 0.0005
TARGET_MUTUAL_INFORMATION = 0.5
BETA_VARIABLE = "gail_beta"


@dataclass(frozen=True)
class DiscriminatorTensors:
    """One discriminator copy.

    Attributes:
        logit: ``[B]``; ``D = sigmoid(logit)`` is the probability that a row is the expert's.
        estimate: ``[B]`` D.
        kl: ``[B]`` KL of the bottleneck to N(0, I) (VAIL), else None.
    """

    logit: tf.Tensor
    estimate: tf.Tensor
    kl: Optional[tf.Tensor]


class GAILRewardSignal(RewardSignal):
    """The ``gail`` reward signal (VAIL with ``use_vail``)."""

    use_terminal_states = False  # TF release_1 (module docstring)

    def __init__(self, name: str, settings: GAILSettings, policy: "Policy", seed: int = 0) -> None:
        super().__init__(name, settings, policy, seed)
        self.settings: GAILSettings = settings
        spec = policy.spec
        self._action_spec = spec.action_spec
        self._num_obs = len(spec.observation_specs)
        self.expert = load_expert_data(settings.demo_path, policy.behavior_name, spec)
        # The only state prepare_update touches: draws of the expert rows.
        self._rng = np.random.default_rng(seed)
        # The discriminator has num_layers hidden layers in all: num_layers - 1 on the
        # observations, then one on [encoding, actions, done].
        self._network, self._normalizers = signal_network(settings, policy, tf_era_layers=2)
        with policy.graph.as_default():
            self._optimizer = tf.train.AdamOptimizer(settings.learning_rate, name=f"{name}_adam")
            self.beta: Optional[tf.Variable] = None
            if settings.use_vail:
                self.beta = tf.get_variable(
                    BETA_VARIABLE, [], tf.float32, tf.constant_initializer(1.0), trainable=False
                )
            with tf.name_scope(f"{name}_expert"):
                self._expert_obs = obs_placeholders(spec, OBS)
                self._expert_actions = (
                    action_placeholders(spec.action_spec, "expert") if settings.use_actions else {}
                )
                self._expert_done: Optional[tf.Tensor] = (
                    tf.placeholder(tf.float32, [None], name=DONE) if settings.use_actions else None
                )
            # The update's randomness is fed, drawn in prepare_update from the signal's own
            # generator: row i of the minibatch gets the same interpolation weight and the
            # same bottleneck noise whichever tower it lands on, so 1 and N towers give the
            # same update (scripts/check_towers.py), and runs are reproducible.
            with tf.name_scope(f"{name}_noise"):
                self._mix = tf.placeholder(tf.float32, [None], name="penalty_mix")
                self._z_noise: Dict[str, tf.Tensor] = {}
                if settings.use_vail:
                    self._z_noise = {
                        side: tf.placeholder(tf.float32, [None, Z_SIZE], name=f"z_noise_{side}")
                        for side in ("policy", "expert")
                    }
            with tf.name_scope(f"{name}_evaluate"):
                self._obs = obs_placeholders(spec, OBS)
                self._actions = action_placeholders(spec.action_spec, "eval") if settings.use_actions else {}
                self._done = tf.placeholder(tf.float32, [None], name=DONE) if settings.use_actions else None
                features = self._policy_features(self._actions, self._done)
                d = self._discriminate(self._obs, features, z_noise=None)
                self._reward = -tf.log(1.0 - d.estimate + REWARD_EPSILON) * self.strength
        done_key = [DONE] if settings.use_actions else []
        self._feed_keys: List[str] = [obs_key(i) for i in range(self._num_obs)] + list(self._actions) + done_key
        self._feed_list: List[tf.Tensor] = (
            self._obs + list(self._actions.values()) + ([self._done] if self._done is not None else [])
        )
        self._evaluate_fn: Optional[FastCallable] = None

    # ------------------------------------------------------------------ graph

    def _features(
        self, actions: Mapping[str, tf.Tensor], done: Optional[tf.Tensor], raw_continuous: bool
    ) -> Optional[tf.Tensor]:
        """``[B, F + 1]``: action features then ``done``, or None without ``use_actions``."""
        if not self.settings.use_actions:
            return None
        assert done is not None
        act = action_features(
            self._action_spec, actions.get(CONTINUOUS_ACTION), actions.get(DISCRETE_ACTION),
            self.policy.to_env if raw_continuous else None,
        )
        return tf.concat([act, done[:, None]], axis=1)

    def _policy_features(self, actions: Mapping[str, tf.Tensor], done: Optional[tf.Tensor]) -> Optional[tf.Tensor]:
        return self._features(actions, done, raw_continuous=True)

    def _expert_features(self, actions: Mapping[str, tf.Tensor], done: Optional[tf.Tensor]) -> Optional[tf.Tensor]:
        return self._features(actions, done, raw_continuous=False)

    def _discriminate(
        self,
        obs: Sequence[tf.Tensor],
        features: Optional[tf.Tensor],
        z_noise: Optional[tf.Tensor],
    ) -> DiscriminatorTensors:
        """Builds (or reuses by name) D on ``obs`` ``[B, *shape_i]`` and, with
        ``use_actions``, ``features`` ``[B, F + 1]`` (actions then done; else None). With
        VAIL, ``z`` is ``mean + sigma * z_noise`` (``[B, Z_SIZE]`` standard normal), or the
        mean when ``z_noise`` is None (rewards, gradient penalty)."""
        spec = self.policy.spec
        units = self._network.hidden_units
        with tf.variable_scope(self.name, reuse=tf.AUTO_REUSE):
            encoded = build_body(
                obs, spec.observation_specs, self._network, self._normalizers, "encoder",
                num_layers=self._network.num_layers - 1,
            )
            joined = encoded if features is None else tf.concat([encoded, features], axis=1)
            hidden = dense(joined, units, "hidden", swish)
            kl = None
            if self.settings.use_vail:
                # Small initial means: the bottleneck starts near the prior (KL ~ 0).
                z_mean = dense(hidden, Z_SIZE, "z_mean", gain=0.01)
                z_log_sigma = tf.get_variable("z_log_sigma", [Z_SIZE], tf.float32, tf.zeros_initializer())
                sigma = tf.exp(z_log_sigma)
                # KL(N(mu, sigma^2) || N(0, 1)) summed over the Z_SIZE dimensions.
                kl = 0.5 * tf.reduce_sum(
                    tf.square(z_mean) + tf.square(sigma) - 1.0 - 2.0 * z_log_sigma, axis=1
                )
                hidden = z_mean + sigma * z_noise if z_noise is not None else z_mean
            logit = dense(hidden, 1, "estimate", gain=1.0)[:, 0]
        return DiscriminatorTensors(logit, tf.nn.sigmoid(logit), kl)

    def update_fields(self) -> Sequence[str]:
        return (DONE,) if self.settings.use_actions else ()

    def batch_placeholders(self) -> Mapping[str, tf.Tensor]:
        out: Dict[str, tf.Tensor] = {
            f"{self.name}_expert_obs_{i}": ph for i, ph in enumerate(self._expert_obs)
        }
        out.update({f"{self.name}_expert_{k}": ph for k, ph in self._expert_actions.items()})
        if self._expert_done is not None:
            out[f"{self.name}_expert_done"] = self._expert_done
        out[f"{self.name}_penalty_mix"] = self._mix
        out.update({f"{self.name}_z_noise_{side}": ph for side, ph in self._z_noise.items()})
        return out

    def optimizer_group(self) -> Optional[OptimizerGroup]:
        return OptimizerGroup(self.name, self._optimizer, (self.name + "/",))

    def build_tower(self, shard: Mapping[str, tf.Tensor]) -> Optional[SignalTower]:
        mask = shard[MASKS]
        policy_obs = [shard[obs_key(i)] for i in range(self._num_obs)]
        expert_obs = [shard[f"{self.name}_expert_obs_{i}"] for i in range(self._num_obs)]
        policy_act = self._policy_features(
            {k: shard[k] for k in ACTIONS if k in shard}, shard.get(DONE)
        )
        expert_act = self._expert_features(
            {k: shard[f"{self.name}_expert_{k}"] for k in self._expert_actions},
            shard.get(f"{self.name}_expert_done"),
        )
        noise = {side: shard[f"{self.name}_z_noise_{side}"] for side in self._z_noise}
        pol = self._discriminate(policy_obs, policy_act, noise.get("policy"))
        exp = self._discriminate(expert_obs, expert_act, noise.get("expert"))

        # -log D(expert) - log(1 - D(policy)), with log(1 - sigmoid(l)) = log_sigmoid(-l).
        # Expert rows are masked like the policy rows they are paired with (LSTM padding),
        # so both means have the tower's weight and N towers equal one.
        expert_term = masked_mean(tf.math.log_sigmoid(exp.logit), mask)
        policy_term = masked_mean(tf.math.log_sigmoid(-pol.logit), mask)
        discriminator_loss = -(expert_term + policy_term)

        penalty = self._gradient_penalty(
            policy_obs, expert_obs, policy_act, expert_act, mask, shard[f"{self.name}_penalty_mix"]
        )
        loss = discriminator_loss + GRADIENT_PENALTY_WEIGHT * penalty
        stats: Dict[str, tf.Tensor] = {
            "policy_estimate": masked_mean(pol.estimate, mask),
            "expert_estimate": masked_mean(exp.estimate, mask),
            "discriminator_loss": discriminator_loss,
            "gradient_penalty": penalty,
        }
        if self.beta is not None:
            assert pol.kl is not None and exp.kl is not None
            # ML-Agents' kl_loss: the sum of the two sides' mean KLs (not their average).
            kl = masked_mean(pol.kl, mask) + masked_mean(exp.kl, mask)
            loss = loss + self.beta * (kl - TARGET_MUTUAL_INFORMATION)
            stats["kl"] = kl
            stats["beta"] = tf.identity(self.beta)
        stats["loss"] = loss
        return SignalTower(loss, stats)

    def _gradient_penalty(
        self,
        policy_obs: Sequence[tf.Tensor],
        expert_obs: Sequence[tf.Tensor],
        policy_act: Optional[tf.Tensor],
        expert_act: Optional[tf.Tensor],
        mask: tf.Tensor,
        u: tf.Tensor,
    ) -> tf.Tensor:
        """``mean_rows (||grad D(x_interp)|| - 1)^2`` over every input of D (scalar);
        ``u`` ``[B]`` in [0, 1): each row's interpolation weight between expert and policy."""

        def mix(expert: tf.Tensor, policy: tf.Tensor) -> tf.Tensor:
            w = tf.reshape(u, [-1] + [1] * (expert.shape.ndims - 1))
            return w * expert + (1.0 - w) * policy

        obs = [mix(e, p) for e, p in zip(expert_obs, policy_obs)]
        act = mix(expert_act, policy_act) if expert_act is not None and policy_act is not None else None
        inputs = obs + ([act] if act is not None else [])
        estimate = self._discriminate(obs, act, z_noise=None).estimate
        squared = tf.zeros_like(u)
        for g in tf.gradients(estimate, inputs):
            if g is None:
                continue
            axes = list(range(1, g.shape.ndims))
            squared += tf.reduce_sum(tf.square(g), axis=axes) if axes else tf.square(g)
        norm = tf.sqrt(squared + REWARD_EPSILON)
        return masked_mean(tf.square(norm - 1.0), mask)

    def build_post_apply(self, apply_op: tf.Operation, stats: Mapping[str, tf.Tensor]) -> Optional[tf.Operation]:
        if self.beta is None:
            return None
        # After the discriminator's apply, and after this run's beta stat was read, so that
        # the reported beta is the one the loss used.
        with tf.control_dependencies([apply_op, stats["beta"]]):
            new_beta = tf.maximum(self.beta + VAIL_ALPHA * (stats["kl"] - TARGET_MUTUAL_INFORMATION), BETA_FLOOR)
            return tf.assign(self.beta, new_beta, name="update_gail_beta").op

    def sample_expert_rows(self, n: int) -> np.ndarray:
        """``[n]`` row indices of the demo: without replacement when it has ``n`` rows or
        more, else with replacement (see the module docstring). Draws from the signal's
        own generator."""
        size = len(self.expert)
        return self._rng.choice(size, n, replace=size < n)

    def prepare_update(self, minibatch: Mapping[str, np.ndarray], num_sequences: int) -> FeedDict:
        """An expert minibatch as large as the policy minibatch, the gradient penalty's
        interpolation weights and VAIL's noise. Touches no state but the signal's
        generator."""
        n = len(minibatch[MASKS])
        idx = self.sample_expert_rows(n)
        feed: FeedDict = {ph: self.expert.obs[i][idx] for i, ph in enumerate(self._expert_obs)}
        feed[self._mix] = self._rng.uniform(size=n).astype(np.float32)
        for ph in self._z_noise.values():
            feed[ph] = self._rng.standard_normal((n, Z_SIZE)).astype(np.float32)
        if CONTINUOUS_ACTION in self._expert_actions:
            feed[self._expert_actions[CONTINUOUS_ACTION]] = self.expert.continuous_action[idx]
        if DISCRETE_ACTION in self._expert_actions:
            feed[self._expert_actions[DISCRETE_ACTION]] = self.expert.discrete_action[idx]
        if self._expert_done is not None:
            feed[self._expert_done] = self.expert.done[idx]
        return feed

    @property
    def stats(self) -> Mapping[str, str]:
        out = {
            "Losses/GAIL Loss": f"{self.name}/loss",
            "Policy/GAIL Policy Estimate": f"{self.name}/policy_estimate",
            "Policy/GAIL Expert Estimate": f"{self.name}/expert_estimate",
        }
        if self.beta is not None:
            out["Policy/GAIL Beta"] = f"{self.name}/beta"
        return out

    # ---------------------------------------------------------------- running

    def evaluate(self, fields: Mapping[str, np.ndarray], has_updated: bool) -> np.ndarray:
        if not has_updated:  # TF release_1's gate: an untrained D's score is noise
            return np.zeros(len(fields[obs_key(0)]), np.float32)
        if self._evaluate_fn is None:
            self._evaluate_fn = FastCallable(self.policy.session, [self._reward], self._feed_list)
        return np.asarray(self._evaluate_fn(*[fields[k] for k in self._feed_keys])[0], np.float32)
