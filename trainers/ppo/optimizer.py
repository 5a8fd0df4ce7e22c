"""PPO's training graph: the critic, the losses, and the one-run update, built as towers.

The optimizer owns the critic: a separate value network with one head per reward signal
(``shared_critic: true`` puts the heads on the actor's body instead). The update graph is
``trainers.tf.towers.build_towers`` over one builder (actor copy + critic + losses + every
reward signal's tower) so that N devices only add towers.
"""
from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Sequence

import numpy as np

from envs.base_env import BehaviorSpec
from trainers.optimizer_common import SignalWiring, add_signal_field_placeholders, schedule
from trainers.policy import POLICY_SCOPE, ActorTensors, Policy, build_actor
from trainers.reward_signals.base import FeedDict, RewardSignal
from trainers.settings import NetworkSettings, PPOSettings, TrainerSettings
from trainers.tf import names, tf
from trainers.tf.encoders import build_body
from trainers.tf.layers import dense
from trainers.tf.normalizer import Normalizer
from trainers.tf.session import UPDATE_POOL, FastCallable
from trainers.tf.towers import OptimizerGroup, TowerGraph, TowerOutput, build_towers, masked_mean

CRITIC_SCOPE = "critic"


def build_critic(
    obs: Sequence[tf.Tensor],
    spec: BehaviorSpec,
    network: NetworkSettings,
    normalizers: Sequence[Optional[Normalizer]],
    signal_names: Sequence[str],
    shared_encoding: Optional[tf.Tensor] = None,
) -> Dict[str, tf.Tensor]:
    """Value heads, one per reward signal: ``obs[i]`` ``[B, *shape]`` -> name -> ``[B]``."""
    with tf.variable_scope(CRITIC_SCOPE, reuse=tf.AUTO_REUSE):
        if shared_encoding is None:
            encoding = build_body(obs, spec.observation_specs, network, normalizers, "encoder")
        else:
            encoding = shared_encoding
        return {s: dense(encoding, 1, f"value_{s}", gain=1.0)[:, 0] for s in signal_names}


class PPOOptimizer:
    """Critic, PPO losses and the tower update graph in the policy's graph."""

    def __init__(
        self,
        policy: Policy,
        settings: TrainerSettings,
        signals: Mapping[str, RewardSignal],
        devices: Sequence[str] = ("/cpu:0",),
    ) -> None:
        self.policy = policy
        self.settings = settings
        self.hyperparameters: PPOSettings = settings.hyperparameters
        self.signals = dict(signals)
        self.devices = tuple(devices)
        self.update_runs = 0  # number of update sess.runs (tests count them)
        hp = self.hyperparameters
        spec = policy.spec
        with policy.graph.as_default():
            self.current_step = tf.placeholder(tf.int64, [], name="current_step")
            self.learning_rate = schedule(
                hp.learning_rate, hp.learning_rate_schedule, self.current_step, settings.max_steps, 1e-10
            )
            self.beta = schedule(hp.beta, hp.resolved_beta_schedule, self.current_step, settings.max_steps, 1e-5)
            self.epsilon = schedule(
                hp.epsilon, hp.resolved_epsilon_schedule, self.current_step, settings.max_steps, 0.1
            )
            self.placeholders = self._make_placeholders(spec)
            groups = [
                OptimizerGroup(
                    "ppo", tf.train.AdamOptimizer(self.learning_rate, epsilon=1e-5), (POLICY_SCOPE + "/", CRITIC_SCOPE + "/")
                )
            ]
            self._wiring = SignalWiring(self.signals, groups, self.placeholders)
            self.signal_placeholders = self._wiring.placeholders
            self._signal_groups = self._wiring.groups
            self.groups = groups
            batch = {**self.placeholders, **self.signal_placeholders}
            self.towers: TowerGraph = build_towers(self._build_tower, batch, groups, self.devices)
            # Per group: the ops one group's update needs (for the separate-runs benchmark).
            self._group_targets: Dict[str, List[tf.Operation]] = {
                name: [op] for name, op in self.towers.apply_ops.items()
            }
            post_ops = []
            for group, ops in self._wiring.post_apply_ops(self.towers).items():
                post_ops.extend(ops)
                self._group_targets[group].extend(ops)
            with tf.control_dependencies(list(self.towers.apply_ops.values())):
                step_update = tf.assign(policy.global_step, self.current_step)
            self._update_op = tf.group(step_update, *self.towers.apply_ops.values(), *post_ops)
            # The separate-runs mode's policy run must not trigger the other groups' applies
            # (step_update above depends on all of them).
            with tf.control_dependencies([self.towers.apply_ops["ppo"]]):
                self._group_targets["ppo"].append(tf.assign(policy.global_step, self.current_step).op)
            self._stat_names = sorted(self.towers.stats)
            self._stat_names.extend(["learning_rate", "beta", "epsilon"])
            self._stat_tensors = [self.towers.stats[n] for n in sorted(self.towers.stats)] + [
                self.learning_rate,
                self.beta,
                self.epsilon,
            ]
            # Value estimates for trajectories: the critic on the inference placeholders.
            shared = policy.actor.encoding if hp.shared_critic else None
            values = build_critic(
                policy.obs, spec, settings.network_settings, policy.normalizers, list(self.signals), shared
            )
            self.values = {s: tf.identity(v, name=names.value_name(s)) for s, v in values.items()}
        self._feed_list: List[tf.Tensor] = (
            list(self.placeholders.values()) + list(self.signal_placeholders.values()) + [self.current_step]
        )
        self._update_fn: Optional[FastCallable] = None
        self._values_fn: Optional[FastCallable] = None

    # ---------------------------------------------------------------- graph

    def _make_placeholders(self, spec: BehaviorSpec) -> Dict[str, tf.Tensor]:
        ph: Dict[str, tf.Tensor] = {}
        with tf.name_scope("update"):
            for i, o in enumerate(spec.observation_specs):
                ph[f"obs_{i}"] = tf.placeholder(tf.float32, (None,) + o.shape, name=f"obs_{i}")
            a = spec.action_spec
            if a.is_continuous:
                ph["continuous_action"] = tf.placeholder(tf.float32, [None, a.continuous_size], "continuous_action")
            if a.is_discrete:
                ph["discrete_action"] = tf.placeholder(tf.int32, [None, a.discrete_size], "discrete_action")
                ph["action_mask"] = tf.placeholder(tf.float32, [None, sum(a.discrete_branches)], "action_mask")
            ph["log_probs"] = tf.placeholder(tf.float32, [None], "log_probs")
            ph["advantages"] = tf.placeholder(tf.float32, [None], "advantages")
            ph["masks"] = tf.placeholder(tf.float32, [None], "masks")
            for s in self.signals:
                ph[f"{s}_returns"] = tf.placeholder(tf.float32, [None], f"{s}_returns")
                ph[f"{s}_value_estimates"] = tf.placeholder(tf.float32, [None], f"{s}_value_estimates")
            # Fields only reward signals read, one shared placeholder each.
            add_signal_field_placeholders(ph, self.signals, spec)
        return ph

    def _build_tower(self, shard: Dict[str, tf.Tensor]) -> TowerOutput:
        """Actor copy + critic + PPO losses (+ every signal's tower) on one shard."""
        policy = self.policy
        spec = policy.spec
        network = self.settings.network_settings
        obs = [shard[f"obs_{i}"] for i in range(len(spec.observation_specs))]
        actor: ActorTensors = build_actor(obs, shard.get("action_mask"), spec, network, policy.normalizers)
        shared = actor.encoding if self.hyperparameters.shared_critic else None
        values = build_critic(obs, spec, network, policy.normalizers, list(self.signals), shared)
        mask = shard["masks"]
        eps = self.epsilon

        log_prob = actor.log_prob(shard.get("continuous_action"), shard.get("discrete_action"))
        ratio = tf.exp(log_prob - shard["log_probs"])
        adv = shard["advantages"]
        surrogate = tf.minimum(ratio * adv, tf.clip_by_value(ratio, 1.0 - eps, 1.0 + eps) * adv)
        policy_loss = -masked_mean(surrogate, mask)

        value_losses = []
        for s, v in values.items():
            old_v, ret = shard[f"{s}_value_estimates"], shard[f"{s}_returns"]
            per_row = tf.square(ret - v)
            if self.hyperparameters.clip_value_loss:
                v_clipped = old_v + tf.clip_by_value(v - old_v, -eps, eps)
                per_row = tf.maximum(per_row, tf.square(ret - v_clipped))
            value_losses.append(masked_mean(per_row, mask))
        value_loss = tf.add_n(value_losses) / float(len(value_losses))
        entropy = masked_mean(actor.entropy(), mask)
        loss = policy_loss + 0.5 * value_loss - self.beta * entropy

        stats = {
            "policy_loss": policy_loss,
            "value_loss": value_loss,
            "entropy": entropy,
            "approx_kl": masked_mean(0.5 * tf.square(log_prob - shard["log_probs"]), mask),
            "clip_fraction": masked_mean(tf.cast(tf.abs(ratio - 1.0) > eps, tf.float32), mask),
        }
        losses = {"ppo": loss}
        self._wiring.build_tower(shard, losses, stats)
        return TowerOutput(losses, stats, tf.reduce_sum(mask))

    # -------------------------------------------------------------- running

    def evaluate_values(self, obs: Sequence[np.ndarray]) -> Dict[str, np.ndarray]:
        """Critic estimates for ``obs[i]`` ``[T, *shape]``: signal -> ``[T]`` (one run)."""
        if self._values_fn is None:
            self._values_fn = FastCallable(
                self.policy.session, [self.values[s] for s in self.signals], self.policy.obs
            )
        out = self._values_fn(*obs)
        return {s: v for s, v in zip(self.signals, out)}

    def _feeds(self, minibatch: Mapping[str, np.ndarray], step: int, extra_feed: FeedDict) -> List[object]:
        feeds: List[object] = [minibatch[k] for k in self.placeholders]
        feeds.extend(self._wiring.feeds(extra_feed))
        feeds.append(step)
        return feeds

    def update_separately(
        self, minibatch: Mapping[str, np.ndarray], step: int, extra_feed: FeedDict
    ) -> Dict[str, float]:
        """The upstream-style update, for benchmarks only: one ``sess.run`` per network
        (policy+critic, then each reward signal), each recomputing what it needs. The
        weights end the same as with ``update`` (each group's gradients come from the
        same pre-update weights, since no group reads another's variables)."""
        if not hasattr(self, "_separate_fns"):
            owner = {group: sig for sig, group in self._signal_groups.items()}
            self._separate_fns = []
            for group, targets in self._group_targets.items():
                # Each run fetches only its own network's statistics.
                names = [
                    n for n in self._stat_names
                    if (n.startswith(owner[group] + "/") if group in owner else "/" not in n)
                ]
                tensors = [self._stat_tensors[self._stat_names.index(n)] for n in names]
                fn = FastCallable(self.policy.session, tensors, self._feed_list, targets, pool=UPDATE_POOL)
                self._separate_fns.append((names, fn))
        feeds = self._feeds(minibatch, step, extra_feed)
        stats: Dict[str, float] = {}
        for names, fn in self._separate_fns:
            stats.update((n, float(v)) for n, v in zip(names, fn(*feeds)))
        self.update_runs += len(self._separate_fns)
        return stats

    def update(self, minibatch: Mapping[str, np.ndarray], step: int, extra_feed: FeedDict) -> Dict[str, float]:
        """**One** ``sess.run``: applies every group's averaged gradients; returns stats.

        Args:
            minibatch: buffer field -> ``[B, ...]`` array (every update placeholder's key).
            step: the trainer's current step (drives the schedules).
            extra_feed: the merged feeds of every signal's ``prepare_update``.
        """
        if self._update_fn is None:
            self._update_fn = FastCallable(
                self.policy.session, self._stat_tensors, self._feed_list, targets=[self._update_op], pool=UPDATE_POOL
            )
        out = self._update_fn(*self._feeds(minibatch, step, extra_feed))
        self.update_runs += 1
        return {name: float(v) for name, v in zip(self._stat_names, out)}

