"""SAC's training graph: twin Q networks, a value network and its target copy, the learned
entropy coefficients, and the one-run update, built as towers.

Soft actor-critic with a state-value network (Haarnoja et al. 2018, as ML-Agents' SAC). The
optimizer owns every critic: ``Q1``, ``Q2`` (scopes ``sac_q1/``, ``sac_q2/``) and ``V``
(``sac_value/``), each its own encoder + body with **one head per reward signal**, and the
target ``V'`` (``sac_target_value/``), never trained, moved towards ``V`` by
``V' <- (1 - tau) V' + tau V`` after every update, in the same run. Q networks read the
observations and the *squashed* continuous action ``tanh(u)``; with discrete actions a Q
head has one output per action of every branch (``sum(branches)`` wide) and
``Q(s, a) = mean_b Q_b(s, a_b)`` (continuous only: one output).

Per reward signal ``k`` (reward ``r_k`` already scaled by its strength, discount
``gamma_k``), on a minibatch of replayed rows ``(s, u, a_d, r, s', terminal)`` and a fresh
policy sample ``u~ ~ pi(.|s)`` (reparameterised), with
``H(s) = alpha_c log pi_c(u~|s) + sum_b alpha_b sum_a pi_b(a|s) log pi_b(a|s)``::

    Q loss_i   = 0.5 mean_k mean (Q_i,k(s, u, a_d) - [r_k + gamma_k (1 - terminal_k) V'_k(s')])^2
    V loss     = 0.5 mean_k mean (V_k(s) - [E_{a_d~pi} min_i Q_i,k(s, u~, a_d) - H(s)])^2
    policy     = mean (H(s) - mean_k E_{a_d~pi} Q_1,k(s, u~, a_d))
    entropy    = -mean (log alpha_c [log pi_c(u~|s) + target_c])
                 - sum_b mean (log alpha_b [sum_a pi_b log pi_b + target_b])

with brackets held constant (stop-gradient), the policy loss on ``Q1`` as in ML-Agents (the
value target takes the minimum of both, which is what curbs over-estimation), ``terminal_k = 0`` for signals that ignore
terminal states (curiosity), ``target_c = -(continuous size)`` and
``target_b = 0.2 log(branch size)`` (ML-Agents' target entropies; a masked action has
probability 0 and adds 0 to ``sum_a pi log pi``), one learned ``log alpha`` for the
continuous actions and one per discrete branch, initialised to ``log(init_entcoef)``.
The policy's ``log pi_c`` is the tanh-corrected log-probability (`Gaussian.log_prob`).

Three optimizer groups, each with its own Adam at ``learning_rate``: ``sac_policy``
(``policy/``), ``sac_critic`` (Q1, Q2, V) and ``sac_entropy`` (the log alphas); every
reward signal with a network adds its group. All gradients are taken from the same
pre-update weights and applied in one ``sess.run`` (`trainers.tf.towers.build_towers`:
rows split over devices, row-weighted averaging), then the target update runs.

**Recurrent SAC** (``network_settings.memory``; ML-Agents Release 22's semantics,
``sac/optimizer_torch.py``). The minibatch is ``S`` whole sequences of ``L`` replayed rows
(`trainers.sac.replay`: each trajectory left-padded, ``masks`` 0 on the padding, which
leaves every LSTM's state unchanged). Every network has its own LSTM after its body
(``memory_size``; the Q networks' body reads the action, as ML-Agents' ``NetworkBody``):

* the actor unrolls from ``memory`` at each sequence's first row (the memory the acting
  policy stepped from there; padding rows repeat the first real row's), with the previous
  discrete actions when the policy reads them;
* ``V`` unrolls from ``critic_memory`` at each sequence's first row: the critic's own
  memory, carried per agent across its trajectories (`SACOptimizer.trajectory_values`);
* ``Q1``, ``Q2`` unroll from zeros in every sequence (ML-Agents: Q memories are not kept
  while acting);
* ``V'`` reads the next observations, so it starts from the critic memory *after* the
  sequence's first real step: one step of ``V``'s LSTM from ``critic_memory`` on that row
  (ML-Agents' "evaluate one step in the critic to get next_value_memories"), held
  constant.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, Hashable, List, Mapping, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from envs.base_env import BehaviorSpec
from trainers.fields import (
    ACTION_MASK,
    CONTINUOUS_ACTION,
    CRITIC_MEMORY,
    DISCRETE_ACTION,
    MASKS,
    MEMORY,
    PREV_ACTION,
    REWARDS,
    SAC_NOISE,
    TERMINAL,
    next_obs_key,
    obs_key,
    signal_key,
)
from trainers.optimizer import OptimizerBase, SignalWiring, add_signal_field_placeholders, schedule
from trainers.policy import POLICY_SCOPE, ActorTensors, Policy, build_actor
from trainers.reward_signals.base import FeedDict, RewardSignal
from trainers.config import NetworkSettings, SACSettings, TrainerSettings
from trainers.tf import names, tf
from trainers.tf.encoders import build_body
from trainers.tf.layers import dense
from trainers.tf.lstm import lstm_sequences, lstm_trajectory
from trainers.tf.normalizer import Normalizer
from trainers.tf.session import AUTO_POOL, FastCallable
from trainers.tf.towers import OptimizerGroup, TowerGraph, TowerOutput, build_towers, masked_mean

Q1_SCOPE = "sac_q1"
Q2_SCOPE = "sac_q2"
VALUE_SCOPE = "sac_value"
TARGET_SCOPE = "sac_target_value"
ENTROPY_SCOPE = "sac_entropy"
DISCRETE_TARGET_ENTROPY_SCALE = 0.2
CONTINUOUS_TARGET_ENTROPY_SCALE = 1.0

#: The groups the SAC update applies (besides the reward signals').
SAC_GROUPS = ("sac_policy", "sac_critic", "sac_entropy")


def target_entropies(spec: BehaviorSpec) -> Dict[str, Any]:
    """ML-Agents' target entropies: ``continuous`` ``-c`` and ``discrete`` (one per branch)
    ``0.2 log(branch size)``."""
    a = spec.action_spec
    out: Dict[str, Any] = {}  # ``continuous``: float; ``discrete``: one float per branch
    if a.is_continuous:
        out["continuous"] = -CONTINUOUS_TARGET_ENTROPY_SCALE * float(a.continuous_size)
    if a.is_discrete:
        out["discrete"] = [DISCRETE_TARGET_ENTROPY_SCALE * math.log(n) for n in a.discrete_branches]
    return out


@dataclass(frozen=True)
class Sequences:
    """How a recurrent critic network runs over its rows.

    Attributes:
        memory_in: ``[S, memory_size]`` the memory each sequence starts from (``[1,
            memory_size]`` with ``whole_trajectory``).
        sequence_length: ``L``: the rows are ``S`` sequences of ``L`` (static).
        step_mask: ``[S * L]`` 0 on padding rows (the state is left unchanged), or None.
        whole_trajectory: the rows are one trajectory of any length ``T``
            (`trainers.tf.lstm.lstm_trajectory`); ``memory_out`` is then the memory after
            every step ``[T, memory_size]``.
    """

    memory_in: tf.Tensor
    sequence_length: int = 1
    step_mask: Optional[tf.Tensor] = None
    whole_trajectory: bool = False


class StateNetwork(NamedTuple):
    """One critic network's tensors.

    Attributes:
        heads: signal -> ``[B, outputs]``.
        body: ``[B, hidden]`` the body's output (the LSTM's input when recurrent).
        memory_out: ``[S, memory_size]`` the memory after each sequence (``[T, m]`` after
            every step with ``whole_trajectory``); None without memory.
    """

    heads: Dict[str, tf.Tensor]
    body: tf.Tensor
    memory_out: Optional[tf.Tensor]


def build_state_network(
    scope: str,
    obs: Sequence[tf.Tensor],
    spec: BehaviorSpec,
    network: NetworkSettings,
    normalizers: Sequence[Optional[Normalizer]],
    signal_names: Sequence[str],
    outputs: int,
    action: Optional[tf.Tensor] = None,
    sequences: Optional[Sequences] = None,
) -> StateNetwork:
    """One critic network: encoder + body (``action`` ``[B, c]`` joined before the body),
    with ``sequences`` its own LSTM (``lstm`` in ``scope``) after the body, then one head per
    reward signal: name -> ``[B, outputs]``."""
    with tf.variable_scope(scope, reuse=tf.AUTO_REUSE):
        body = build_body(obs, spec.observation_specs, network, normalizers, "encoder", extra=action)
        encoding, memory_out = body, None
        if sequences is not None:
            assert network.memory is not None, "a recurrent critic needs network_settings.memory"
            size = network.memory.memory_size
            if sequences.whole_trajectory:
                encoding, memory_out = lstm_trajectory(body, sequences.memory_in, size, "lstm")
            else:
                encoding, memory_out = lstm_sequences(
                    body, sequences.memory_in, sequences.sequence_length, size, "lstm", sequences.step_mask
                )
        heads = {s: dense(encoding, outputs, f"{s}_head", gain=1.0) for s in signal_names}
        return StateNetwork(heads, body, memory_out)


def sequence_starts(rows: tf.Tensor, sequence_length: int) -> tf.Tensor:
    """``[S * L, k]`` per-row values -> ``[S, k]`` those of each sequence's first row."""
    return tf.reshape(rows, [-1, sequence_length, int(rows.shape[-1])])[:, 0]


def first_real_rows(mask: tf.Tensor, sequence_length: int) -> tf.Tensor:
    """``[S * L]`` masks -> ``[S]`` int32: the row index of each sequence's first real row
    (padding is only ever in front: the replay left-pads trajectories)."""
    per_sequence = tf.reshape(mask, [-1, sequence_length])
    # The number of leading padding rows: the running product of (1 - mask) stays 1 on them.
    leading = tf.reduce_sum(tf.math.cumprod(1.0 - per_sequence, axis=1), axis=1)
    offset = tf.minimum(tf.cast(leading, tf.int32), sequence_length - 1)
    return tf.range(tf.shape(per_sequence)[0], dtype=tf.int32) * sequence_length + offset


@dataclass(frozen=True)
class TowerProbe:
    """One tower's actor copy and value heads, kept for checks (`SACOptimizer.probes`).

    Attributes:
        actor: the actor on the tower's rows.
        values: signal -> ``[B, 1]`` ``V(s)``.
        target_values: signal -> ``[B, 1]`` ``V'(s')``.
    """

    actor: ActorTensors
    values: Dict[str, tf.Tensor]
    target_values: Dict[str, tf.Tensor]


class SACOptimizer(OptimizerBase):
    """Critics, SAC losses and the tower update graph in the policy's graph."""

    def __init__(
        self,
        policy: Policy,
        settings: TrainerSettings,
        signals: Mapping[str, RewardSignal],
        devices: Sequence[str] = ("/cpu:0",),
    ) -> None:
        super().__init__(policy, settings, signals, devices)
        hp = settings.hyperparameters
        assert isinstance(hp, SACSettings)
        self.hyperparameters: SACSettings = hp
        spec = policy.spec
        a = spec.action_spec
        self._branches = list(a.discrete_branches)
        self._q_outputs = sum(self._branches) if a.is_discrete else 1
        self.targets = target_entropies(spec)
        with policy.graph.as_default():
            self.current_step = tf.placeholder(tf.int64, [], name="sac_current_step")
            self.learning_rate = schedule(
                hp.learning_rate, hp.learning_rate_schedule, self.current_step, settings.max_steps, 1e-10
            )
            init = math.log(hp.init_entcoef)
            with tf.variable_scope(ENTROPY_SCOPE):
                self.log_alpha_continuous = (
                    tf.get_variable("log_alpha_continuous", [], tf.float32, tf.constant_initializer(init))
                    if a.is_continuous else None
                )
                self.log_alpha_discrete = (
                    tf.get_variable("log_alpha_discrete", [len(self._branches)], tf.float32, tf.constant_initializer(init))
                    if a.is_discrete else None
                )
            self.placeholders = self._make_placeholders(spec)
            # One joint set: the policy loss reads Q1/Q2 and the critic's value target reads
            # the policy and alpha, so no apply may run before every SAC gradient is computed.
            groups = [
                OptimizerGroup(
                    "sac_policy",
                    tf.train.AdamOptimizer(self.learning_rate, name="sac_policy_adam"),
                    (POLICY_SCOPE + "/",),
                    joint="sac",
                ),
                OptimizerGroup(
                    "sac_critic",
                    tf.train.AdamOptimizer(self.learning_rate, name="sac_critic_adam"),
                    (Q1_SCOPE + "/", Q2_SCOPE + "/", VALUE_SCOPE + "/"),
                    joint="sac",
                ),
                OptimizerGroup(
                    "sac_entropy",
                    tf.train.AdamOptimizer(self.learning_rate, name="sac_entropy_adam"),
                    (ENTROPY_SCOPE + "/",),
                    joint="sac",
                ),
            ]
            self._wiring = SignalWiring(self.signals, groups, self.placeholders)
            self.signal_placeholders = self._wiring.placeholders
            self.groups = groups
            batch = {**self.placeholders, **self.signal_placeholders}
            #: Per tower, its actor copy and value heads (`TowerProbe`; checks read them).
            self.probes: List[TowerProbe] = []
            # Recurrent: towers get whole sequences (a sequence never crosses towers).
            self.towers: TowerGraph = build_towers(
                self._build_tower, batch, groups, self.devices, sequence_length=policy.sequence_length
            )
            post = self._wiring.post_apply_ops(self.towers)
            sac_applies = [self.towers.apply_ops[g] for g in SAC_GROUPS]
            # The target value network follows V after V's update, in the same run.
            target = self._scope_variables(TARGET_SCOPE + "/")
            by_name = {v.op.name: v for v in tf.global_variables()}
            live = [by_name[VALUE_SCOPE + t.op.name[len(TARGET_SCOPE):]] for t in target]
            tau = hp.tau
            with tf.control_dependencies(sac_applies):
                soft = [tf.assign(t, (1.0 - tau) * t + tau * v) for t, v in zip(target, live)]
                step_update = tf.assign(policy.behavior_graph.global_step, self.current_step)
            self.init_target_op = tf.group(*[tf.assign(t, v) for t, v in zip(target, live)], name="sac_target_init")
            self.sac_op = tf.group(*sac_applies, *soft, step_update)
            signal_ops: List[tf.Operation] = []
            for group in self._wiring.groups.values():
                signal_ops.append(self.towers.apply_ops[group])
                signal_ops.extend(post.get(group, []))
            self._signal_ops = signal_ops
            names_ = sorted(self.towers.stats)
            self._sac_stat_names = [n for n in names_ if "/" not in n] + ["learning_rate"]
            self._signal_stat_names = [n for n in names_ if "/" in n]
            self._sac_stats = [self.towers.stats[n] for n in self._sac_stat_names[:-1]] + [self.learning_rate]
            self._signal_stats = [self.towers.stats[n] for n in self._signal_stat_names]
            # The full run's fetches and targets (scripts/check_towers.py traces them).
            self._stat_names = self._sac_stat_names + self._signal_stat_names
            self._stat_tensors = self._sac_stats + self._signal_stats
            self._update_op = tf.group(self.sac_op, *self._signal_ops)
            # Value estimates of trajectories (Policy/<Signal> Value Estimate): V on the
            # inference placeholders; recurrent: one trajectory unrolled from the agent's
            # critic memory, with the memory after every step.
            self.critic_memory_in: Optional[tf.Tensor] = None
            self.critic_memory_out: Optional[tf.Tensor] = None
            sequences = None
            if policy.use_recurrent:
                self.critic_memory_in = tf.placeholder(
                    tf.float32, [1, policy.memory_size], name="sac_critic_memory_in"
                )
                sequences = Sequences(self.critic_memory_in, whole_trajectory=True)
            values = build_state_network(
                VALUE_SCOPE, policy.obs, spec, settings.network_settings, policy.normalizers, list(self.signals), 1,
                sequences=sequences,
            )
            if values.memory_out is not None:
                self.critic_memory_out = tf.identity(values.memory_out, name="sac_critic_memory_out")
            self.values = {s: tf.identity(v[:, 0], name=names.value_name(s)) for s, v in values.heads.items()}
        self._feed_list: List[tf.Tensor] = (
            list(self.placeholders.values()) + list(self.signal_placeholders.values()) + [self.current_step]
        )
        self._sac_feed_list = list(self.placeholders.values()) + [self.current_step]
        self._fns: Dict[bool, FastCallable] = {}
        self._values_fn: Optional[FastCallable] = None
        # Recurrent: each agent's critic memory between its trajectories (dropped when its
        # episode ends); absent = zeros.
        self.critic_memory_dict: Dict[Hashable, np.ndarray] = {}

    @staticmethod
    def _scope_variables(prefix: str) -> List[tf.Variable]:
        return sorted(
            (v for v in tf.global_variables() if v.op.name.startswith(prefix)), key=lambda v: v.op.name
        )

    # ---------------------------------------------------------------- graph

    def _make_placeholders(self, spec: BehaviorSpec) -> Dict[str, tf.Tensor]:
        ph: Dict[str, tf.Tensor] = {}
        with tf.name_scope("sac_update"):
            for i, o in enumerate(spec.observation_specs):
                ph[obs_key(i)] = tf.placeholder(tf.float32, (None,) + o.shape, name=obs_key(i))
            for i, o in enumerate(spec.observation_specs):
                ph[next_obs_key(i)] = tf.placeholder(tf.float32, (None,) + o.shape, name=next_obs_key(i))
            a = spec.action_spec
            if a.is_continuous:
                ph[CONTINUOUS_ACTION] = tf.placeholder(tf.float32, [None, a.continuous_size], CONTINUOUS_ACTION)
                # The reparameterised sample's noise, fed, so N towers match 1 tower.
                ph[SAC_NOISE] = tf.placeholder(tf.float32, [None, a.continuous_size], SAC_NOISE)
            if a.is_discrete:
                ph[DISCRETE_ACTION] = tf.placeholder(tf.int32, [None, a.discrete_size], DISCRETE_ACTION)
                ph[ACTION_MASK] = tf.placeholder(tf.float32, [None, sum(a.discrete_branches)], ACTION_MASK)
            ph[MASKS] = tf.placeholder(tf.float32, [None], MASKS)
            ph[TERMINAL] = tf.placeholder(tf.float32, [None], TERMINAL)
            if self.policy.use_recurrent:
                m = self.policy.memory_size
                # Per row, as stored; the towers read each sequence's first row.
                ph[MEMORY] = tf.placeholder(tf.float32, [None, m], MEMORY)
                ph[CRITIC_MEMORY] = tf.placeholder(tf.float32, [None, m], CRITIC_MEMORY)
                if self.policy.prev_action is not None:  # what the acting LSTM reads too
                    ph[PREV_ACTION] = tf.placeholder(tf.int32, [None, a.discrete_size], PREV_ACTION)
            for s in self.signals:
                ph[signal_key(s, REWARDS)] = tf.placeholder(tf.float32, [None], signal_key(s, REWARDS))
            add_signal_field_placeholders(ph, self.signals, spec)
        return ph

    def _split_branches(self, x: tf.Tensor) -> List[tf.Tensor]:
        """``[B, sum(branches)]`` -> one ``[B, n_b]`` per branch."""
        return tf.split(x, self._branches, axis=1) if len(self._branches) > 1 else [x]

    def _q_taken(self, q: tf.Tensor, discrete_action: Optional[tf.Tensor]) -> tf.Tensor:
        """``[B, outputs]`` -> ``[B]`` Q of the taken discrete actions (mean over branches)."""
        if discrete_action is None:
            return q[:, 0]
        per_branch = [
            tf.reduce_sum(qb * tf.one_hot(discrete_action[:, b], n, dtype=qb.dtype), axis=1)
            for b, (qb, n) in enumerate(zip(self._split_branches(q), self._branches))
        ]
        return tf.add_n(per_branch) / float(len(per_branch))

    def _q_expected(self, q: tf.Tensor, probs: Optional[List[tf.Tensor]]) -> tf.Tensor:
        """``[B, outputs]`` -> ``[B]`` Q expected under the policy's discrete probabilities."""
        if probs is None:
            return q[:, 0]
        per_branch = [tf.reduce_sum(qb * p, axis=1) for qb, p in zip(self._split_branches(q), probs)]
        return tf.add_n(per_branch) / float(len(per_branch))

    def _build_tower(self, shard: Dict[str, tf.Tensor]) -> TowerOutput:
        """Actor copy + Q1, Q2, V, V' + SAC losses (+ every signal's tower) on one shard."""
        policy = self.policy
        spec = policy.spec
        network = self.settings.network_settings
        norms = policy.normalizers
        signal_names = list(self.signals)
        n_obs = len(spec.observation_specs)
        obs = [shard[obs_key(i)] for i in range(n_obs)]
        next_obs = [shard[next_obs_key(i)] for i in range(n_obs)]
        mask = shard[MASKS]
        length = policy.sequence_length
        # Recurrent: how each network runs over the shard's S sequences (module docstring).
        actor_memory = q_sequences = value_sequences = None
        if policy.use_recurrent:
            actor_memory = sequence_starts(shard[MEMORY], length)
            zeros = tf.zeros(tf.stack([tf.shape(mask)[0] // length, policy.memory_size]))
            q_sequences = Sequences(zeros, length, mask)
            value_sequences = Sequences(sequence_starts(shard[CRITIC_MEMORY], length), length, mask)
        actor: ActorTensors = build_actor(
            obs, shard.get(ACTION_MASK), spec, network, norms, squashed=True, noise=shard.get(SAC_NOISE),
            memory_in=actor_memory, sequence_length=length, step_mask=mask if actor_memory is not None else None,
            prev_action=shard.get(PREV_ACTION),
        )

        # The policy's entropy term H(s) [B] (alpha held constant) and its raw log-probs.
        entropy_term = 0.0
        neg_entropy = 0.0  # sum of log pi (continuous) and sum p log p (discrete): [B]
        entropy_loss = 0.0
        alpha_stats = []
        sampled = None
        probs = None
        if actor.continuous is not None:
            sampled = actor.continuous.sample
            logp_c = actor.continuous.log_prob(sampled)
            # One read of log alpha per tower, and the entropy loss written through
            # log(alpha) so that its gradient needs that read: the apply of log alpha then
            # waits for every use of alpha in this run (a d/d(log alpha) of
            # log_alpha * x would not, and the other losses could read the updated value).
            alpha_c = tf.exp(tf.identity(self.log_alpha_continuous))
            entropy_term += tf.stop_gradient(alpha_c) * logp_c
            neg_entropy += logp_c
            entropy_loss += -masked_mean(
                tf.log(alpha_c) * tf.stop_gradient(logp_c + self.targets["continuous"]), mask
            )
            alpha_stats.append(alpha_c)
        if actor.discrete is not None:
            alpha_d = tf.exp(tf.identity(self.log_alpha_discrete))  # one read (see above)
            probs = [tf.exp(lp) for lp in actor.discrete.log_probs]
            for b, (p, lp) in enumerate(zip(probs, actor.discrete.log_probs)):
                # Masked actions: p = 0 exactly, so p * log p = 0 (not NaN: log p is finite).
                plogp = tf.reduce_sum(p * lp, axis=1)
                entropy_term += tf.stop_gradient(alpha_d[b]) * plogp
                neg_entropy += plogp
                entropy_loss += -masked_mean(
                    tf.log(alpha_d[b]) * tf.stop_gradient(plogp + self.targets["discrete"][b]), mask
                )
                alpha_stats.append(alpha_d[b])

        # Q on the replayed actions and on the policy's sample: two passes (one pass of 2B
        # rows costs the same forward but twice the backward: each loss reads one half).
        discrete_action = shard.get(DISCRETE_ACTION)

        def q_net(scope: str, action: Optional[tf.Tensor]) -> Dict[str, tf.Tensor]:
            return build_state_network(
                scope, obs, spec, network, norms, signal_names, self._q_outputs, action, q_sequences
            ).heads

        if sampled is not None:
            data_action, pi_action = tf.tanh(shard[CONTINUOUS_ACTION]), tf.tanh(sampled)
            q1_data, q2_data = q_net(Q1_SCOPE, data_action), q_net(Q2_SCOPE, data_action)
            q1_pi, q2_pi = q_net(Q1_SCOPE, pi_action), q_net(Q2_SCOPE, pi_action)
        else:
            q1_data = q1_pi = q_net(Q1_SCOPE, None)
            q2_data = q2_pi = q_net(Q2_SCOPE, None)
        value_net = build_state_network(VALUE_SCOPE, obs, spec, network, norms, signal_names, 1, None, value_sequences)
        values = value_net.heads
        target_sequences = None
        if value_sequences is not None:
            # V' reads s', so it starts from the critic memory after the first real step of
            # each sequence: one step of V's LSTM there, held constant (ML-Agents).
            assert network.memory is not None  # recurrent
            with tf.variable_scope(VALUE_SCOPE, reuse=tf.AUTO_REUSE):
                _, after_first = lstm_sequences(
                    tf.gather(value_net.body, first_real_rows(mask, length)), value_sequences.memory_in, 1,
                    network.memory.memory_size, "lstm",
                )
            target_sequences = Sequences(tf.stop_gradient(after_first), length, mask)
        target_next = build_state_network(
            TARGET_SCOPE, next_obs, spec, network, norms, signal_names, 1, None, target_sequences
        ).heads
        # No op added for it: TF1 seeds each random op from the count of ops before it.
        self.probes.append(TowerProbe(actor, values, target_next))

        q1_losses, q2_losses, value_losses, policy_q = [], [], [], []
        for s in signal_names:
            keep = 1.0 - shard[TERMINAL] * (1.0 if self.signals[s].use_terminal_states else 0.0)
            backup = tf.stop_gradient(shard[signal_key(s, REWARDS)] + self.signals[s].gamma * keep * target_next[s][:, 0])
            q1_losses.append(0.5 * masked_mean(tf.square(self._q_taken(q1_data[s], discrete_action) - backup), mask))
            q2_losses.append(0.5 * masked_mean(tf.square(self._q_taken(q2_data[s], discrete_action) - backup), mask))
            min_q = self._q_expected(tf.minimum(q1_pi[s], q2_pi[s]), probs)
            v_backup = tf.stop_gradient(min_q - entropy_term)
            value_losses.append(0.5 * masked_mean(tf.square(values[s][:, 0] - v_backup), mask))
            policy_q.append(self._q_expected(q1_pi[s], probs))
        k = float(len(signal_names))
        q1_loss = tf.add_n(q1_losses) / k
        q2_loss = tf.add_n(q2_losses) / k
        value_loss = tf.add_n(value_losses) / k
        policy_loss = masked_mean(entropy_term - tf.add_n(policy_q) / k, mask)

        stats = {
            "policy_loss": policy_loss,
            "q1_loss": q1_loss,
            "q2_loss": q2_loss,
            "value_loss": value_loss,
            "entropy_loss": entropy_loss,
            "entropy": -masked_mean(neg_entropy, mask),
            "entropy_coef": tf.add_n(alpha_stats) / float(len(alpha_stats)),
            "q1_estimate": masked_mean(tf.add_n([self._q_taken(q1_data[s], discrete_action) for s in signal_names]) / k, mask),
        }
        losses = {"sac_policy": policy_loss, "sac_critic": q1_loss + q2_loss + value_loss, "sac_entropy": entropy_loss}
        self._wiring.build_tower(shard, losses, stats)
        return TowerOutput(losses, stats, tf.reduce_sum(mask))

    # -------------------------------------------------------------- running

    def init_targets(self) -> None:
        """Copies V into V' (after a fresh initialisation; a restore brings its own V')."""
        self.policy.session.run(self.init_target_op)

    def evaluate_values(self, obs: Sequence[np.ndarray]) -> Dict[str, np.ndarray]:
        """V estimates for ``obs[i]`` ``[T, *shape]``: signal -> ``[T]`` (one run;
        feed-forward V only: a recurrent V needs its memory, `trajectory_values`)."""
        if self.critic_memory_in is not None:
            raise ValueError("a recurrent value network is evaluated per trajectory (trajectory_values)")
        if self._values_fn is None:
            self._values_fn = FastCallable(self.policy.session, [self.values[s] for s in self.signals], self.policy.obs)
        return dict(zip(self.signals, self._values_fn(*obs)))

    def trajectory_values(
        self, obs: Sequence[np.ndarray], agent: Hashable, done: bool
    ) -> Tuple[Dict[str, np.ndarray], Optional[np.ndarray]]:
        """V estimates for one trajectory of ``agent``, and (recurrent) the critic memory
        each of its steps started from.

        Args:
            obs: ``obs[i]`` ``[T, *shape]``.
            agent: the agent's key (whose critic memory to carry).
            done: the agent's episode ended with this trajectory (its memory is dropped).
        Returns:
            (signal -> ``[T]``, ``[T, memory_size]`` or None without memory). Recurrent:
            the trajectory unrolled in one run from the agent's critic memory (zeros at
            its episode start); the memory after its last step is kept for its next one.
        """
        if self.critic_memory_in is None:
            return self.evaluate_values(obs), None
        if self._values_fn is None:
            fetches = [self.values[s] for s in self.signals] + [self.critic_memory_out]
            self._values_fn = FastCallable(self.policy.session, fetches, self.policy.obs + [self.critic_memory_in])
        start = self.critic_memory_dict.get(agent)
        if start is None:
            start = np.zeros(self.policy.memory_size, np.float32)
        out = self._values_fn(*obs, start[None])
        after = out[-1]  # [T, m]: the memory after each step
        if done:
            self.critic_memory_dict.pop(agent, None)
        else:
            self.critic_memory_dict[agent] = after[-1]
        memories = np.concatenate([start[None], after[:-1]], axis=0)
        return dict(zip(self.signals, out[:-1])), memories

    def update(
        self, minibatch: Mapping[str, np.ndarray], step: int, extra_feed: Optional[FeedDict] = None,
        with_signals: bool = True, extra_targets: Sequence[tf.Operation] = (),
        extra_fetches: Sequence[tf.Tensor] = (), extra_feeds: Sequence[tf.Tensor] = (),
        extra_values: Sequence[object] = (),
    ) -> Dict[str, float]:
        """**One** ``sess.run``: the SAC groups' averaged gradients, the target update and,
        ``with_signals``, every reward signal's update (and ``extra_targets``: BC) too.

        Args:
            minibatch: field -> ``[B, ...]`` (every SAC placeholder's key).
            step: the trainer's step (schedules; written to the global step).
            extra_feed: the merged feeds of every signal's ``prepare_update`` (with_signals).
            extra_targets, extra_fetches, extra_feeds, extra_values: another module's ops
                joined to the signals' run (BC's train op, its loss, its placeholders and
                their values); fixed for the optimizer's life after the first call.
        Returns:
            stat name -> value (signal stats as ``<signal>/<stat>`` when with_signals;
            ``extra/<i>`` for ``extra_fetches``).
        """
        fn = self._fns.get(with_signals)
        if fn is None:
            if with_signals:
                fetches = self._sac_stats + self._signal_stats + list(extra_fetches)
                fn = FastCallable(
                    self.policy.session, fetches, self._feed_list + list(extra_feeds),
                    targets=[self.sac_op, *self._signal_ops, *extra_targets], pool=AUTO_POOL,
                )
            else:
                fn = FastCallable(
                    self.policy.session, self._sac_stats, self._sac_feed_list, targets=[self.sac_op], pool=AUTO_POOL
                )
            self._fns[with_signals] = fn
        feeds: List[object] = [minibatch[k] for k in self.placeholders]
        if with_signals:
            feeds.extend(self._wiring.feeds(extra_feed or {}))
            feeds.append(step)
            feeds.extend(extra_values)
            stat_names = self._sac_stat_names + self._signal_stat_names + [f"extra/{i}" for i in range(len(extra_fetches))]
        else:
            feeds.append(step)
            stat_names = self._sac_stat_names
        out = fn(*feeds)
        self.update_runs += 1
        return {n: float(v) for n, v in zip(stat_names, out)}
