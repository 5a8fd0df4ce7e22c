"""MA-POCA's training graph: the centralised critic, the counterfactual baseline, the losses
and the one-run update, built as towers (ML-Agents' ``poca/optimizer_torch.py``).

One network, ML-Agents' ``POCAValueNetwork`` over its ``MultiAgentNetworkBody``, gives both:

* the **critic** ``V(s_1..s_n)``: every group member's observation (the agent's own and
  its ``G`` mates'), each encoded (normalised vectors, CNNs for images: `build_body` with no
  dense layers), embedded as one entity (`attention.entity_embedding`), then masked
  residual self-attention over the present members (`attention.residual_self_attention`);
* the **baseline** ``Q(s_i, (s_j, a_j)_{j != i})``: the agent's own observation (no action,
  the one the baseline marginalises) beside each mate's observation joined with its action
  (continuous raw, discrete one-hot), embedded by a second embedding, through the same
  attention block.

Both then go through ``num_layers`` dense layers and get the number of present members,
scaled to [-1, 1] by the most members seen (``critic/max_group_size``, a saved,
non-trainable variable the trainer raises), before the value heads, one per reward signal,
which critic and baseline share (as ML-Agents).

**Variable group sizes**: the buffer pads the groupmate slots to the widest group it holds
(`trainers.poca.trainer`); the placeholders are ``[B, None, ...]`` and ``group_present``
``[B, None]`` masks the padding out of the attention, so a minibatch's width is whatever the
buffer's is. Each row carries its own groupmates, so rows are independent and the towers'
row-wise split (`trainers.tf.towers`) never separates what one row's losses need: a group's
steps may go to several towers, each row with all of its group. ``tests/trainers/
test_poca.py`` checks that 1, 2 and 4 towers give the same update.

The class reuses `PPOOptimizer`'s update run (``update``, ``_feeds``) over its own graph:
the same attribute names, built by its own ``__init__``.
"""
from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from envs.base_env import BehaviorSpec
from trainers.config import NetworkSettings, PPOSettings, TrainerSettings
from trainers.fields import (
    ACTION_MASK,
    ADVANTAGES,
    BASELINE_ESTIMATES,
    CONTINUOUS_ACTION,
    DISCRETE_ACTION,
    GROUP_CONTINUOUS_ACTION,
    GROUP_DISCRETE_ACTION,
    GROUP_PRESENT,
    LOG_PROBS,
    MASKS,
    RETURNS,
    VALUE_ESTIMATES,
    group_obs_key,
    obs_key,
    signal_key,
)
from trainers.loop.trajectory import GroupData
from trainers.optimizer import OptimizerBase, SignalWiring, add_signal_field_placeholders, schedule
from trainers.policy import POLICY_SCOPE, ActorTensors, Policy, build_actor
from trainers.ppo.optimizer import ADAM_EPSILON, CRITIC_SCOPE, PPOOptimizer, value_heads
from trainers.reward_signals.base import RewardSignal
from trainers.tf import tf
from trainers.tf.attention import NUM_HEADS, entity_embedding, residual_self_attention
from trainers.tf.encoders import build_body
from trainers.tf.layers import get_activation, mlp
from trainers.tf.normalizer import Normalizer
from trainers.tf.session import FastCallable
from trainers.tf.towers import OptimizerGroup, TowerOutput, build_towers, masked_mean

#: The saved, non-trainable most group members seen (ML-Agents' ``_current_max_agents``).
MAX_GROUP_SIZE = "max_group_size"


def flat_actions(continuous: Optional[tf.Tensor], discrete: Optional[tf.Tensor], branches: Sequence[int]) -> tf.Tensor:
    """``[..., c]`` raw continuous and ``[..., b]`` int32 discrete -> ``[..., c + sum(branches)]``
    (one-hot per branch), ML-Agents' ``AgentAction.to_flat``."""
    parts = [] if continuous is None else [continuous]
    if discrete is not None:
        parts.extend(tf.one_hot(discrete[..., i], n, dtype=tf.float32) for i, n in enumerate(branches))
    return parts[0] if len(parts) == 1 else tf.concat(parts, axis=-1)


def _encode(obs: Sequence[tf.Tensor], spec: BehaviorSpec, network: NetworkSettings,
            normalizers: Sequence[Optional[Normalizer]]) -> tf.Tensor:
    """Each member's observations ``[N, *shape_i]`` -> ``[N, d]`` (ML-Agents' ``ObservationEncoder``)."""
    return build_body(obs, spec.observation_specs, network, normalizers, "encoder", num_layers=0)


def build_poca_critic(
    obs: Sequence[tf.Tensor],
    group_obs: Sequence[tf.Tensor],
    group_actions: Optional[tf.Tensor],
    present: tf.Tensor,
    spec: BehaviorSpec,
    network: NetworkSettings,
    normalizers: Sequence[Optional[Normalizer]],
    signal_names: Sequence[str],
    max_group_size: tf.Tensor,
) -> Tuple[Dict[str, tf.Tensor], Optional[Dict[str, tf.Tensor]]]:
    """The centralised critic and (with ``group_actions``) the baseline, per signal ``[B]``.

    Args:
        obs: the agent's own ``obs[i]`` ``[B, *shape_i]``.
        group_obs: the mates' ``[B, G, *shape_i]`` (``G`` may be dynamic, even 0).
        group_actions: the mates' flat actions ``[B, G, a]`` (`flat_actions`); None: no
            baseline (the bootstrap values).
        present: ``[B, G]`` float32, 1 for a mate, 0 for a padded slot.
        max_group_size: scalar float32, the most members (agent included) seen.
    Returns:
        (signal -> critic values ``[B]``, signal -> baselines ``[B]`` or None).
    """
    hidden = network.hidden_units
    with tf.variable_scope(CRITIC_SCOPE, reuse=tf.AUTO_REUSE):
        own = _encode(obs, spec, network, normalizers)  # [B, d]
        batch = tf.shape(own)[0]
        width = tf.shape(present)[1]
        flat = [tf.reshape(o, tf.concat([[-1], tf.shape(o)[2:]], axis=0)) for o in group_obs]
        for f, s in zip(flat, spec.observation_specs):
            f.set_shape((None,) + tuple(s.shape))
        size = int(own.shape[-1])
        mates = tf.reshape(_encode(flat, spec, network, normalizers), [batch, width, size])  # [B, G, d]
        absent = 1.0 - present
        own_absent = tf.zeros([batch, 1], tf.float32)
        own_entity = entity_embedding(own[:, None, :], hidden, "obs_embedding")  # [B, 1, h]
        streams = {
            "critic": (
                tf.concat([own_entity, entity_embedding(mates, hidden, "obs_embedding")], axis=1),
                tf.concat([own_absent, absent], axis=1),
            )
        }
        if group_actions is not None:
            with_actions = tf.concat([mates, group_actions], axis=2)
            streams["baseline"] = (
                tf.concat([entity_embedding(with_actions, hidden, "obs_action_embedding"), own_entity], axis=1),
                tf.concat([absent, own_absent], axis=1),
            )
        act = get_activation(network.activation)
        out: Dict[str, Dict[str, tf.Tensor]] = {}
        for name, (entities, mask) in streams.items():
            attended = residual_self_attention(entities, mask, NUM_HEADS, "self_attention")  # [B, h]
            encoding = mlp(attended, hidden, network.num_layers, act, "linear_encoder")
            members = tf.reduce_sum(1.0 - mask, axis=1, keepdims=True)  # [B, 1]
            scaled = members * 2.0 / max_group_size - 1.0  # -1 alone, +1 at the most seen
            out[name] = value_heads(tf.concat([encoding, scaled], axis=1), signal_names)
        return out["critic"], out.get("baseline")


class POCAOptimizer(PPOOptimizer):
    """Critic, baseline, POCA losses and the tower update graph in the policy's graph."""

    def __init__(  # noqa: super().__init__ builds PPO's graph: OptimizerBase's only
        self,
        policy: Policy,
        settings: TrainerSettings,
        signals: Mapping[str, RewardSignal],
        devices: Sequence[str] = ("/cpu:0",),
    ) -> None:
        OptimizerBase.__init__(self, policy, settings, signals, devices)
        hp = settings.hyperparameters
        assert isinstance(hp, PPOSettings) and policy.sequence_length == 1  # POCA: feed-forward only
        self.hyperparameters: PPOSettings = hp
        spec = policy.spec
        with policy.graph.as_default():
            with tf.variable_scope(CRITIC_SCOPE):
                self.max_group_size = tf.get_variable(
                    MAX_GROUP_SIZE, [], tf.float32, tf.ones_initializer(), trainable=False
                )
            self._group_size_in = tf.placeholder(tf.float32, [], "group_size_in")
            self._raise_group_size = tf.assign(self.max_group_size, tf.maximum(self.max_group_size, self._group_size_in))
            self.current_step = tf.placeholder(tf.int64, [], name="current_step")
            self.learning_rate = schedule(
                hp.learning_rate, hp.learning_rate_schedule, self.current_step, settings.max_steps, 1e-10
            )
            self.beta = schedule(hp.beta, hp.resolved_beta_schedule, self.current_step, settings.max_steps, hp.beta_final)
            self.epsilon = schedule(
                hp.epsilon, hp.resolved_epsilon_schedule, self.current_step, settings.max_steps, hp.epsilon_final
            )
            self.placeholders = self._make_placeholders(spec)
            groups = [
                OptimizerGroup(
                    "poca",
                    tf.train.AdamOptimizer(self.learning_rate, epsilon=ADAM_EPSILON),  # PPO's (ADAM_EPSILON)
                    (POLICY_SCOPE + "/", CRITIC_SCOPE + "/"),
                    max_grad_norm=hp.max_grad_norm,
                )
            ]
            self._wiring = SignalWiring(self.signals, groups, self.placeholders)
            self.signal_placeholders = self._wiring.placeholders
            self._signal_groups = self._wiring.groups
            self.groups = groups
            batch = {**self.placeholders, **self.signal_placeholders}
            self.towers = build_towers(self._build_tower, batch, groups, self.devices)
            post_ops: List[tf.Operation] = [op for ops in self._wiring.post_apply_ops(self.towers).values() for op in ops]
            with tf.control_dependencies(list(self.towers.apply_ops.values())):
                step_update = tf.assign(policy.behavior_graph.global_step, self.current_step)
            self._update_op = tf.group(step_update, *self.towers.apply_ops.values(), *post_ops)
            self._stat_names = sorted(self.towers.stats) + ["learning_rate", "beta", "epsilon"]
            self._stat_tensors = [self.towers.stats[n] for n in sorted(self.towers.stats)] + [
                self.learning_rate, self.beta, self.epsilon,
            ]
            self._build_group_values(spec)
        self._feed_list = (
            list(self.placeholders.values()) + list(self.signal_placeholders.values()) + [self.current_step]
        )
        self._update_fn: Optional[FastCallable] = None
        self._trajectory_fn: Optional[FastCallable] = None
        self._known_group_size: Optional[float] = None  # the variable's value, read lazily

    # ---------------------------------------------------------------- graph

    def _make_placeholders(self, spec: BehaviorSpec) -> Dict[str, tf.Tensor]:
        ph: Dict[str, tf.Tensor] = {}
        a = spec.action_spec
        with tf.name_scope("update"):
            for i, o in enumerate(spec.observation_specs):
                ph[obs_key(i)] = tf.placeholder(tf.float32, (None,) + o.shape, name=obs_key(i))
                ph[group_obs_key(i)] = tf.placeholder(tf.float32, (None, None) + o.shape, name=group_obs_key(i))
            if a.is_continuous:
                ph[CONTINUOUS_ACTION] = tf.placeholder(tf.float32, [None, a.continuous_size], CONTINUOUS_ACTION)
                ph[GROUP_CONTINUOUS_ACTION] = tf.placeholder(
                    tf.float32, [None, None, a.continuous_size], GROUP_CONTINUOUS_ACTION
                )
            if a.is_discrete:
                ph[DISCRETE_ACTION] = tf.placeholder(tf.int32, [None, a.discrete_size], DISCRETE_ACTION)
                ph[ACTION_MASK] = tf.placeholder(tf.float32, [None, sum(a.discrete_branches)], ACTION_MASK)
                ph[GROUP_DISCRETE_ACTION] = tf.placeholder(tf.int32, [None, None, a.discrete_size], GROUP_DISCRETE_ACTION)
            ph[GROUP_PRESENT] = tf.placeholder(tf.float32, [None, None], GROUP_PRESENT)
            ph[LOG_PROBS] = tf.placeholder(tf.float32, [None], LOG_PROBS)
            ph[ADVANTAGES] = tf.placeholder(tf.float32, [None], ADVANTAGES)
            ph[MASKS] = tf.placeholder(tf.float32, [None], MASKS)
            for s in self.signals:
                for kind in (RETURNS, VALUE_ESTIMATES, BASELINE_ESTIMATES):
                    ph[signal_key(s, kind)] = tf.placeholder(tf.float32, [None], signal_key(s, kind))
            add_signal_field_placeholders(ph, self.signals, spec)
        return ph

    def _critic(self, source: Mapping[str, tf.Tensor], obs: Sequence[tf.Tensor], baseline: bool
                ) -> Tuple[Dict[str, tf.Tensor], Optional[Dict[str, tf.Tensor]]]:
        spec = self.policy.spec
        n_obs = len(spec.observation_specs)
        actions = None
        if baseline:
            actions = flat_actions(
                source.get(GROUP_CONTINUOUS_ACTION), source.get(GROUP_DISCRETE_ACTION),
                spec.action_spec.discrete_branches,
            )
        return build_poca_critic(
            obs, [source[group_obs_key(i)] for i in range(n_obs)], actions, source[GROUP_PRESENT], spec,
            self.settings.network_settings, self.policy.normalizers, list(self.signals), self.max_group_size,
        )

    def _build_tower(self, shard: Dict[str, tf.Tensor]) -> TowerOutput:
        """Actor copy + critic + baseline + POCA losses (+ every signal's tower) on one shard."""
        policy = self.policy
        spec = policy.spec
        obs = [shard[obs_key(i)] for i in range(len(spec.observation_specs))]
        mask = shard[MASKS]
        actor: ActorTensors = build_actor(
            obs, shard.get(ACTION_MASK), spec, self.settings.network_settings, policy.normalizers,
            log_std_init=self.hyperparameters.log_std_init,
        )
        values, baselines = self._critic(shard, obs, baseline=True)
        assert baselines is not None
        eps = self.epsilon
        log_prob = actor.log_prob(shard.get(CONTINUOUS_ACTION), shard.get(DISCRETE_ACTION))
        ratio = tf.exp(log_prob - shard[LOG_PROBS])
        adv = shard[ADVANTAGES]
        surrogate = tf.minimum(ratio * adv, tf.clip_by_value(ratio, 1.0 - eps, 1.0 + eps) * adv)
        policy_loss = -masked_mean(surrogate, mask)

        def trust_region(estimates: Dict[str, tf.Tensor], old_kind: str) -> tf.Tensor:
            """ML-Agents' ``trust_region_value_loss``: per signal, the squared error to the
            returns, clipped around the old estimates by epsilon; the mean over signals."""
            losses = []
            for s, v in estimates.items():
                old, ret = shard[signal_key(s, old_kind)], shard[signal_key(s, RETURNS)]
                per_row = tf.square(ret - v)
                if self.hyperparameters.clip_value_loss:
                    per_row = tf.maximum(per_row, tf.square(ret - (old + tf.clip_by_value(v - old, -eps, eps))))
                losses.append(masked_mean(per_row, mask))
            return tf.add_n(losses) / float(len(losses))

        value_loss = trust_region(values, VALUE_ESTIMATES)
        baseline_loss = trust_region(baselines, BASELINE_ESTIMATES)
        entropy = masked_mean(actor.entropy(), mask)
        # ML-Agents' weights: the baseline's loss at half the critic's.
        loss = policy_loss + 0.5 * (value_loss + 0.5 * baseline_loss) - self.beta * entropy
        stats = {
            "policy_loss": policy_loss,
            "value_loss": value_loss,
            "baseline_loss": baseline_loss,
            "entropy": entropy,
            "approx_kl": masked_mean(0.5 * tf.square(log_prob - shard[LOG_PROBS]), mask),
            "clip_fraction": masked_mean(tf.cast(tf.abs(ratio - 1.0) > eps, tf.float32), mask),
        }
        losses = {"poca": loss}
        self._wiring.build_tower(shard, losses, stats)
        return TowerOutput(losses, stats, tf.reduce_sum(mask))

    def _build_group_values(self, spec: BehaviorSpec) -> None:
        """Critic values and baselines of a trajectory's rows, on the policy's observation
        placeholders and groupmate placeholders of their own (``poca_values/...``)."""
        a = spec.action_spec
        self.value_inputs: Dict[str, tf.Tensor] = {}
        with tf.name_scope("poca_values"):
            for i, o in enumerate(spec.observation_specs):
                self.value_inputs[group_obs_key(i)] = tf.placeholder(tf.float32, (None, None) + o.shape, group_obs_key(i))
            if a.is_continuous:
                self.value_inputs[GROUP_CONTINUOUS_ACTION] = tf.placeholder(
                    tf.float32, [None, None, a.continuous_size], GROUP_CONTINUOUS_ACTION
                )
            if a.is_discrete:
                self.value_inputs[GROUP_DISCRETE_ACTION] = tf.placeholder(
                    tf.int32, [None, None, a.discrete_size], GROUP_DISCRETE_ACTION
                )
            self.value_inputs[GROUP_PRESENT] = tf.placeholder(tf.float32, [None, None], GROUP_PRESENT)
        values, baselines = self._critic(self.value_inputs, self.policy.obs, baseline=True)
        assert baselines is not None
        self.values = values
        self.baselines = baselines

    # -------------------------------------------------------------- running

    def observe_group_size(self, members: int) -> None:
        """Raises ``critic/max_group_size`` to ``members`` (agent included) when larger (one
        run, only then: the variable changes a few times in a run)."""
        if self._known_group_size is None:
            self._known_group_size = float(self.policy.session.run(self.max_group_size))
        if members > self._known_group_size:
            self.policy.session.run(self._raise_group_size, {self._group_size_in: float(members)})
            self._known_group_size = float(members)

    def forget_group_size(self) -> None:
        """After a restore: the variable's value is read again at the next use."""
        self._known_group_size = None

    def group_values(
        self, obs: Sequence[np.ndarray], next_obs: Sequence[np.ndarray], group: Optional[GroupData]
    ) -> Tuple[Dict[str, np.ndarray], Dict[str, np.ndarray]]:
        """Critic values and baselines of one trajectory, in one run.

        Args:
            obs: the agent's ``obs[i]`` ``[T, *shape]``; next_obs: ``[1, *shape]``.
            group: its mates (`GroupData`); None: no mates.
        Returns:
            (signal -> ``[T + 1]`` critic values, the last one over ``next_obs`` and the
            mates' next observations; signal -> ``[T]`` baselines).
        """
        spec = self.policy.spec
        a = spec.action_spec
        n = len(obs[0])
        width = 0 if group is None else max(group.num_mates, len(group.next_obs[0]))
        feeds: Dict[str, np.ndarray] = {}
        present = np.zeros((n + 1, width), np.float32)
        for i, o in enumerate(spec.observation_specs):
            mates = np.zeros((n + 1, width) + tuple(o.shape), np.float32)
            if group is not None:
                mates[:n, : group.num_mates] = group.obs[i]
                mates[n, : len(group.next_obs[i])] = group.next_obs[i]
            feeds[group_obs_key(i)] = mates
        cont = np.zeros((n + 1, width, a.continuous_size), np.float32)
        disc = np.zeros((n + 1, width, a.discrete_size), np.int32)
        if group is not None:
            present[:n, : group.num_mates] = group.present
            present[n, : len(group.next_obs[0])] = 1.0
            cont[:n, : group.num_mates] = group.continuous_action
            disc[:n, : group.num_mates] = group.discrete_action
        feeds[GROUP_PRESENT] = present
        if a.is_continuous:
            feeds[GROUP_CONTINUOUS_ACTION] = cont
        if a.is_discrete:
            feeds[GROUP_DISCRETE_ACTION] = disc
        if self._trajectory_fn is None:
            fetches = [self.values[s] for s in self.signals] + [self.baselines[s] for s in self.signals]
            self._trajectory_fn = FastCallable(
                self.policy.session, fetches, list(self.policy.obs) + list(self.value_inputs.values())
            )
        rows = [np.concatenate([o, nxt], axis=0) for o, nxt in zip(obs, next_obs)]
        out = self._trajectory_fn(*rows, *[feeds[k] for k in self.value_inputs])
        k = len(self.signals)
        values = {s: v for s, v in zip(self.signals, out[:k])}
        # The bootstrap row's baseline is not one (its "mates' actions" are zeros).
        baselines = {s: b[:n] for s, b in zip(self.signals, out[k:])}
        return values, baselines

    def update_separately(self, minibatch: Mapping[str, np.ndarray], step: int, extra_feed: Dict[tf.Tensor, np.ndarray]) -> Dict[str, float]:
        """PPO's benchmark-only mode (one run per network) is not built for POCA."""
        raise NotImplementedError("POCA updates in one run per minibatch only")
