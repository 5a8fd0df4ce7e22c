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

**Recurrent** (``network_settings.memory``): the actor is recurrent PPO's; critic and
baseline share one LSTM (``critic/lstm``) between the dense layers and the member count, as
ML-Agents' ``MultiAgentNetworkBody``, each stream from its own memory (``critic_memory``,
``baseline_memory``). Trajectories are unrolled in one run from the agent's carried
memories (`POCAOptimizer.trajectory_group_values`); the update reads whole padded sequences
(recurrent PPO's layout: each sequence from its first row's memories) and the towers split
by whole sequences (``tests/trainers/test_poca_memory.py``).

The class reuses `PPOOptimizer`'s update run (``update``, ``_feeds``) over its own graph:
the same attribute names, built by its own ``__init__``.
"""
from __future__ import annotations

from typing import Dict, Hashable, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from envs.base_env import BehaviorSpec
from trainers.config import NetworkSettings, PPOSettings, TrainerSettings
from trainers.fields import (
    ACTION_MASK,
    ADVANTAGES,
    BASELINE_ESTIMATES,
    BASELINE_MEMORY,
    CONTINUOUS_ACTION,
    CRITIC_MEMORY,
    DISCRETE_ACTION,
    GROUP_CONTINUOUS_ACTION,
    GROUP_DISCRETE_ACTION,
    GROUP_PRESENT,
    LOG_PROBS,
    MASKS,
    MEMORY,
    PREV_ACTION,
    RETURNS,
    VALUE_ESTIMATES,
    group_obs_key,
    obs_key,
    signal_key,
)
from trainers.loop.trajectory import GroupData
from trainers.optimizer import OptimizerBase, SignalWiring, add_signal_field_placeholders, schedule
from trainers.policy import POLICY_SCOPE, ActorTensors, Policy, build_actor
from trainers.ppo.optimizer import CRITIC_SCOPE, PPOOptimizer, clipped_surrogate, value_heads
from trainers.reward_signals.base import RewardSignal
from trainers.tf import tf
from trainers.tf.adam import adam
from trainers.tf.attention import NUM_HEADS, entity_embedding, residual_self_attention
from trainers.tf.encoders import build_body
from trainers.tf.layers import get_activation, mlp
from trainers.tf.lstm import lstm_sequences, lstm_trajectory
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


def poca_encodings(
    obs: Sequence[tf.Tensor],
    group_obs: Sequence[tf.Tensor],
    group_actions: Optional[tf.Tensor],
    present: tf.Tensor,
    spec: BehaviorSpec,
    network: NetworkSettings,
    normalizers: Sequence[Optional[Normalizer]],
    max_group_size: tf.Tensor,
) -> Dict[str, Tuple[tf.Tensor, tf.Tensor]]:
    """ML-Agents' ``MultiAgentNetworkBody`` up to its LSTM, in the critic's scope: per
    stream (``"critic"`` and, with ``group_actions``, ``"baseline"``) the encoding after
    the attention and the dense layers ``[B, hidden]``, and the scaled member count ``[B,
    1]`` that joins it after the LSTM (`build_poca_critic`: straight away).

    Args:
        obs: the agent's own ``obs[i]`` ``[B, *shape_i]``.
        group_obs: the mates' ``[B, G, *shape_i]`` (``G`` may be dynamic, even 0).
        group_actions: the mates' flat actions ``[B, G, a]`` (`flat_actions`); None: no
            baseline (the bootstrap values).
        present: ``[B, G]`` float32, 1 for a mate, 0 for a padded slot.
        max_group_size: scalar float32, the most members (agent included) seen.
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
        out: Dict[str, Tuple[tf.Tensor, tf.Tensor]] = {}
        for name, (entities, mask) in streams.items():
            attended = residual_self_attention(entities, mask, NUM_HEADS, "self_attention")  # [B, h]
            encoding = mlp(attended, hidden, network.num_layers, act, "linear_encoder")
            members = tf.reduce_sum(1.0 - mask, axis=1, keepdims=True)  # [B, 1]
            out[name] = (encoding, members * 2.0 / max_group_size - 1.0)  # -1 alone, +1 at the most seen
        return out


def poca_heads(encoding: tf.Tensor, scaled_members: tf.Tensor, signal_names: Sequence[str]) -> Dict[str, tf.Tensor]:
    """The value heads (shared by critic and baseline, as ML-Agents) on ``concat(encoding
    [B, e], scaled_members [B, 1])``: signal -> ``[B]``."""
    with tf.variable_scope(CRITIC_SCOPE, reuse=tf.AUTO_REUSE):
        return value_heads(tf.concat([encoding, scaled_members], axis=1), signal_names)


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
    """The feed-forward centralised critic and (with ``group_actions``) the baseline, per
    signal ``[B]`` (arguments: `poca_encodings`).

    Returns:
        (signal -> critic values ``[B]``, signal -> baselines ``[B]`` or None).
    """
    streams = poca_encodings(obs, group_obs, group_actions, present, spec, network, normalizers, max_group_size)
    out = {name: poca_heads(encoding, scaled, signal_names) for name, (encoding, scaled) in streams.items()}
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
        assert isinstance(hp, PPOSettings) and not hp.pack_sequences  # refused when the config loads
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
                    adam(self.learning_rate, hp.adam_epsilon, hp.adam_epsilon_placement),  # PPO's keys
                    (POLICY_SCOPE + "/", CRITIC_SCOPE + "/"),
                    max_grad_norm=hp.max_grad_norm,
                )
            ]
            self._wiring = SignalWiring(self.signals, groups, self.placeholders)
            self.signal_placeholders = self._wiring.placeholders
            self._signal_groups = self._wiring.groups
            self.groups = groups
            batch = {**self.placeholders, **self.signal_placeholders}
            # Recurrent: the towers split minibatches by whole sequences, as recurrent PPO's.
            self.towers = build_towers(
                self._build_tower, batch, groups, self.devices, sequence_length=policy.sequence_length
            )
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
        # Recurrent: the critic's and the baseline's memory of every agent between its
        # trajectories (process time, as PPO's critic memories; dropped when its episode
        # ends, never saved); absent = zeros.
        self.critic_memory_dict: Dict[Hashable, np.ndarray] = {}
        self.baseline_memory_dict: Dict[Hashable, np.ndarray] = {}

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
            if self.policy.use_recurrent:
                m = self.policy.memory_size
                # Per row, the memory its step started from; the update reads each
                # sequence's first row (padded layout: sequences start at trajectory rows
                # 0, L, 2L, ...).
                for key in (MEMORY, CRITIC_MEMORY, BASELINE_MEMORY):
                    ph[key] = tf.placeholder(tf.float32, [None, m], key)
                if a.is_discrete:
                    ph[PREV_ACTION] = tf.placeholder(tf.int32, [None, a.discrete_size], PREV_ACTION)
            # Per continuous dimension and discrete branch (`ActorTensors.log_prob_per_dim`).
            ph[LOG_PROBS] = tf.placeholder(tf.float32, [None, a.continuous_size + a.discrete_size], LOG_PROBS)
            ph[ADVANTAGES] = tf.placeholder(tf.float32, [None], ADVANTAGES)
            ph[MASKS] = tf.placeholder(tf.float32, [None], MASKS)
            for s in self.signals:
                for kind in (RETURNS, VALUE_ESTIMATES, BASELINE_ESTIMATES):
                    ph[signal_key(s, kind)] = tf.placeholder(tf.float32, [None], signal_key(s, kind))
            add_signal_field_placeholders(ph, self.signals, spec)
        return ph

    def _streams(self, source: Mapping[str, tf.Tensor], obs: Sequence[tf.Tensor]) -> Dict[str, Tuple[tf.Tensor, tf.Tensor]]:
        """`poca_encodings` of the critic and the baseline over ``source``'s group fields."""
        spec = self.policy.spec
        n_obs = len(spec.observation_specs)
        actions = flat_actions(
            source.get(GROUP_CONTINUOUS_ACTION), source.get(GROUP_DISCRETE_ACTION), spec.action_spec.discrete_branches,
        )
        return poca_encodings(
            obs, [source[group_obs_key(i)] for i in range(n_obs)], actions, source[GROUP_PRESENT], spec,
            self.settings.network_settings, self.policy.normalizers, self.max_group_size,
        )

    def _critic(self, source: Mapping[str, tf.Tensor], obs: Sequence[tf.Tensor]
                ) -> Tuple[Dict[str, tf.Tensor], Dict[str, tf.Tensor]]:
        """Critic values and baselines on whole sequences of ``source`` (the update's rows).

        Recurrent: the critic's LSTM (``critic/lstm``, ML-Agents' one LSTM of the
        ``MultiAgentNetworkBody``, after the dense layers) runs each stream from its own
        memories, ``source[CRITIC_MEMORY]`` / ``source[BASELINE_MEMORY]`` ``[S * L, m]``
        read at sequence starts. Both streams share the weights, so they run as ``2S``
        sequences of one unroll (half the unrolled ops of two). No step mask: padding sits
        at a trajectory's end, after every real row of its sequence, and the final
        memories are not used."""
        streams = self._streams(source, obs)
        memory = self.settings.network_settings.memory
        if memory is None:
            heads = {name: poca_heads(enc, scaled, list(self.signals)) for name, (enc, scaled) in streams.items()}
            return heads["critic"], heads["baseline"]
        length = self.policy.sequence_length
        (critic, critic_scaled), (baseline, baseline_scaled) = streams["critic"], streams["baseline"]
        starts = tf.concat([source[CRITIC_MEMORY][::length], source[BASELINE_MEMORY][::length]], axis=0)  # [2S, m]
        with tf.variable_scope(CRITIC_SCOPE, reuse=tf.AUTO_REUSE):
            out, _ = lstm_sequences(tf.concat([critic, baseline], axis=0), starts, length, memory.memory_size, "lstm")
        critic_out, baseline_out = tf.split(out, 2, axis=0)  # [S * L, m / 2] each
        return (
            poca_heads(critic_out, critic_scaled, list(self.signals)),
            poca_heads(baseline_out, baseline_scaled, list(self.signals)),
        )

    def _build_tower(self, shard: Dict[str, tf.Tensor]) -> TowerOutput:
        """Actor copy + critic + baseline + POCA losses (+ every signal's tower) on one shard."""
        policy = self.policy
        spec = policy.spec
        obs = [shard[obs_key(i)] for i in range(len(spec.observation_specs))]
        mask = shard[MASKS]
        memory = shard.get(MEMORY)
        if memory is not None:  # recurrent PPO's actor, padded layout: each sequence's first row
            memory = memory[:: policy.sequence_length]
        actor: ActorTensors = build_actor(
            obs, shard.get(ACTION_MASK), spec, self.settings.network_settings, policy.normalizers,
            log_std_init=self.hyperparameters.log_std_init,
            memory_in=memory, sequence_length=policy.sequence_length, prev_action=shard.get(PREV_ACTION),
        )
        values, baselines = self._critic(shard, obs)
        eps = self.epsilon
        log_prob = actor.log_prob_per_dim(shard.get(CONTINUOUS_ACTION), shard.get(DISCRETE_ACTION))
        policy_loss, approx_kl, clip_fraction = clipped_surrogate(log_prob, shard[LOG_PROBS], shard[ADVANTAGES], eps, mask)

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
            "approx_kl": approx_kl,
            "clip_fraction": clip_fraction,
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
        streams = self._streams(self.value_inputs, self.policy.obs)
        #: Per stream, the encoding before the LSTM and the scaled member count (the
        #: closed forms of tests/trainers/test_poca_memory.py read them).
        self.value_streams = streams
        memory = self.settings.network_settings.memory
        self.critic_memory_in: Optional[tf.Tensor] = None
        self.baseline_memory_in: Optional[tf.Tensor] = None
        self.memory_outs: List[tf.Tensor] = []
        if memory is not None:
            # One trajectory unrolled in one run from the agent's carried memories (each
            # stream its own; `lstm_trajectory`'s fused op), the memory after every step out.
            encoded: Dict[str, Tuple[tf.Tensor, tf.Tensor]] = {}
            for name in ("critic", "baseline"):
                memory_in = tf.placeholder(tf.float32, [1, memory.memory_size], f"{name}_memory_in")
                setattr(self, f"{name}_memory_in", memory_in)
                encoding, scaled = streams[name]
                with tf.variable_scope(CRITIC_SCOPE, reuse=tf.AUTO_REUSE):
                    out, states = lstm_trajectory(encoding, memory_in, memory.memory_size, "lstm")
                self.memory_outs.append(states)  # [T + 1, m]
                encoded[name] = (out, scaled)
            streams = encoded
        heads = {name: poca_heads(enc, scaled, list(self.signals)) for name, (enc, scaled) in streams.items()}
        self.values = heads["critic"]
        self.baselines = heads["baseline"]

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
        """Critic values and baselines of one trajectory, in one run (recurrent: from zero
        memories, nothing carried; `trajectory_group_values` carries an agent's)."""
        values, baselines, _ = self.trajectory_group_values(obs, next_obs, group)
        return values, baselines

    def trajectory_group_values(
        self,
        obs: Sequence[np.ndarray],
        next_obs: Sequence[np.ndarray],
        group: Optional[GroupData],
        agent: Optional[Hashable] = None,
        done: bool = False,
    ) -> Tuple[Dict[str, np.ndarray], Dict[str, np.ndarray], Optional[Tuple[np.ndarray, np.ndarray]]]:
        """Critic values and baselines of one trajectory, in one run.

        Args:
            obs: the agent's ``obs[i]`` ``[T, *shape]``; next_obs: ``[1, *shape]``.
            group: its mates (`GroupData`); None: no mates.
            agent: recurrent: the agent whose critic and baseline memories to start from
                and carry (None: zeros, nothing kept).
            done: the agent's episode ended with this trajectory (its memories are dropped).
        Returns:
            (signal -> ``[T + 1]`` critic values, the last one over ``next_obs`` and the
            mates' next observations; signal -> ``[T]`` baselines; recurrent: the critic's
            and the baseline's memory each step started from, ``[T, m]`` each, else None).
            Recurrent, the whole trajectory is unrolled from the agent's memories (what
            ML-Agents' ``_evaluate_by_sequence_team`` gets sequence by sequence), the
            bootstrap row as the step after the last (ML-Agents' ``critic_pass`` of the
            next observations from the memory after the trajectory); the memories after
            the last step are kept for the agent's next trajectory.
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
        recurrent = self.critic_memory_in is not None and self.baseline_memory_in is not None
        if self._trajectory_fn is None:
            fetches = [self.values[s] for s in self.signals] + [self.baselines[s] for s in self.signals]
            inputs = list(self.policy.obs) + list(self.value_inputs.values())
            if self.critic_memory_in is not None and self.baseline_memory_in is not None:
                fetches += self.memory_outs
                inputs += [self.critic_memory_in, self.baseline_memory_in]
            self._trajectory_fn = FastCallable(self.policy.session, fetches, inputs)
        rows = [np.concatenate([o, nxt], axis=0) for o, nxt in zip(obs, next_obs)]
        args = [*rows, *[feeds[k] for k in self.value_inputs]]
        starts: List[np.ndarray] = []
        if recurrent:
            zeros = np.zeros(self.policy.memory_size, np.float32)
            for memories in (self.critic_memory_dict, self.baseline_memory_dict):
                start = memories.get(agent, zeros) if agent is not None else zeros
                starts.append(start)
                args.append(start[None])
        out = self._trajectory_fn(*args)
        k = len(self.signals)
        values = {s: v for s, v in zip(self.signals, out[:k])}
        # The bootstrap row's baseline is not one (its "mates' actions" are zeros).
        baselines = {s: b[:n] for s, b in zip(self.signals, out[k : 2 * k])}
        if not recurrent:
            return values, baselines, None
        started: List[np.ndarray] = []
        for start, states, memories in zip(starts, out[2 * k :], (self.critic_memory_dict, self.baseline_memory_dict)):
            # states [T + 1, m]: after each step (the last: after the bootstrap row).
            started.append(np.concatenate([start[None], states[: n - 1]], axis=0))
            if agent is not None:
                if done:
                    memories.pop(agent, None)
                else:
                    memories[agent] = states[n - 1]
        return values, baselines, (started[0], started[1])

    def update_separately(self, minibatch: Mapping[str, np.ndarray], step: int, extra_feed: Dict[tf.Tensor, np.ndarray]) -> Dict[str, float]:
        """PPO's benchmark-only mode (one run per network) is not built for POCA."""
        raise NotImplementedError("POCA updates in one run per minibatch only")
