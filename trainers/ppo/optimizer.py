"""PPO's training graph: the critic, the losses, and the one-run update, built as towers.

The optimizer owns the critic: a separate value network with one head per reward signal
(``shared_critic: true`` puts the heads on the actor's body instead). The update graph is
``trainers.tf.towers.build_towers`` over one builder (actor copy + critic + losses + every
reward signal's tower) so that N devices only add towers.
"""
from __future__ import annotations

import os
from typing import Dict, Hashable, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from envs.base_env import BehaviorSpec
from trainers.fields import (
    ACTION_MASK,
    ADVANTAGES,
    CONTINUOUS_ACTION,
    CRITIC_MEMORY,
    DISCRETE_ACTION,
    LOG_PROBS,
    MASKS,
    MEMORY,
    PREV_ACTION,
    RESET,
    RETURNS,
    VALUE_ESTIMATES,
    obs_key,
    signal_key,
)
from trainers.optimizer import OptimizerBase, SignalWiring, add_signal_field_placeholders, schedule
from trainers.policy import POLICY_SCOPE, ActorTensors, Policy, build_actor, recurrent_encoding
from trainers.reward_signals.base import FeedDict, RewardSignal
from trainers.config import NetworkSettings, PPOSettings, TrainerSettings
from trainers.tf import names, tf
from trainers.tf.adam import adam
from trainers.tf.encoders import build_body
from trainers.tf.layers import dense
from trainers.tf.lstm import LSTMPartner, lstm_sequences, lstm_trajectory
from trainers.tf.normalizer import Normalizer
from trainers.tf.session import AUTO_POOL, CALLER_THREAD, FastCallable
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
    """Value heads, one per reward signal: ``obs[i]`` ``[B, *shape]`` -> name -> ``[B]``.

    Feed-forward (or on a shared encoding); `build_recurrent_critic` adds the critic's LSTM.
    """
    with tf.variable_scope(CRITIC_SCOPE, reuse=tf.AUTO_REUSE):
        if shared_encoding is None:
            encoding = build_body(obs, spec.observation_specs, network, normalizers, "encoder")
        else:
            encoding = shared_encoding
        return value_heads(encoding, signal_names)


def clipped_surrogate(
    log_prob: tf.Tensor, old_log_prob: tf.Tensor, advantages: tf.Tensor, epsilon: tf.Tensor, mask: tf.Tensor
) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """PPO's clipped policy loss, ML-Agents' ``trust_region_policy_loss``: the ratio per
    action column (each continuous dimension and each discrete branch, ``[B, D]``, from
    `ActorTensors.log_prob_per_dim`), each clipped to ``1 +- epsilon`` against the row's
    advantage ``[B]``, averaged over the columns and the unmasked rows. With one column it
    is the ratio of the joint probability; with several, one dimension's large change is
    clipped without muting the others' (hybrid actions learn markedly better: see the
    README's "Figures behind choices in the code").

    Returns (policy loss, approximate KL of the joint probability, fraction of clipped
    ratios), scalars.
    """
    diff = log_prob - old_log_prob  # [B, D]
    ratio = tf.exp(diff)
    adv = advantages[:, None]
    surrogate = tf.minimum(ratio * adv, tf.clip_by_value(ratio, 1.0 - epsilon, 1.0 + epsilon) * adv)
    policy_loss = -masked_mean(tf.reduce_mean(surrogate, axis=1), mask)
    approx_kl = masked_mean(0.5 * tf.square(tf.reduce_sum(diff, axis=1)), mask)
    clipped = tf.cast(tf.abs(ratio - 1.0) > epsilon, tf.float32)
    clip_fraction = masked_mean(tf.reduce_mean(clipped, axis=1), mask)
    return policy_loss, approx_kl, clip_fraction


def value_heads(encoding: tf.Tensor, signal_names: Sequence[str]) -> Dict[str, tf.Tensor]:
    """One linear head per signal on ``encoding`` ``[B, h]`` (call inside the critic scope)."""
    return {s: dense(encoding, 1, f"value_{s}", gain=1.0)[:, 0] for s in signal_names}


def build_recurrent_critic(
    obs: Sequence[tf.Tensor],
    spec: BehaviorSpec,
    network: NetworkSettings,
    normalizers: Sequence[Optional[Normalizer]],
    signal_names: Sequence[str],
    memory_in: tf.Tensor,
    sequence_length: int = 1,
    step_mask: Optional[tf.Tensor] = None,
    whole_trajectory: bool = False,
    reset: Optional[tf.Tensor] = None,
) -> Tuple[Dict[str, tf.Tensor], tf.Tensor]:
    """The critic with its own LSTM (seed 2: the critic's memories are not the actor's).

    Args:
        obs: ``[S * L, *shape]`` rows of whole sequences (or ``[T, *shape]``, one trajectory,
            with ``whole_trajectory``).
        memory_in: ``[S, memory_size]`` the critic memory at each sequence start (``[1,
            memory_size]`` with ``whole_trajectory``).
        step_mask: ``[S * L]`` 0 on padding (which leaves the memory unchanged).
        reset: ``[S * L]`` packed sequences (`lstm_sequences`): ``memory_in`` is then the
            critic memory of every row ``[S * L, memory_size]``, used where ``reset`` is 1.
    Returns:
        (signal -> ``[B]`` values, ``[S, memory_size]`` final memories; with
        ``whole_trajectory`` ``[T, memory_size]``, the memory after every step).
    """
    assert network.memory is not None, "a recurrent critic needs network_settings.memory"
    memory_size = network.memory.memory_size
    with tf.variable_scope(CRITIC_SCOPE, reuse=tf.AUTO_REUSE):
        encoding = build_body(obs, spec.observation_specs, network, normalizers, "encoder")
        if whole_trajectory:
            encoding, memory_out = lstm_trajectory(encoding, memory_in, memory_size, "lstm")
        else:
            encoding, memory_out = lstm_sequences(
                encoding, memory_in, sequence_length, memory_size, "lstm", step_mask, reset
            )
        return value_heads(encoding, signal_names), memory_out


#: Costly ops (`trainers.tf.session._costly_op_count`) of the partnered LSTM update: per
#: unrolled step (forward and backward) and for the rest of the update. Packed sequences
#: (resets): about 21 and 400 (traced: 1,745 at sequence_length 64 with 2x128 encoders,
#: 699 at 16 with 1x32); padded (no resets): about 19 and 340 (1,539 and 637).
_PARTNERED_OPS = {True: (21, 400), False: (19, 340)}


def critic_lstm_with_actor(settings: TrainerSettings, devices: Sequence[str]) -> bool:
    """Whether the update steps the critic's LSTM inside the actor's LSTM ops
    (`LSTMPartner`: one batched cell, half the unrolled ops) or as its own unroll.

    Two unrolls are two independent chains of small ops, which TensorFlow's inter-op pool
    runs on two cores at once; one batched chain runs on one core, and on two cores the
    two chains made `benchmark.py --memory`'s LSTM update faster. But two unrolls are
    more ops, which lose wherever the ops run one after another: where `AUTO_POOL`'s
    trial keeps the batched update in the caller's thread (``config/ppo/Memory.yaml``,
    sequence_length 16), in a threaded trainer's update thread, on one core, and on a
    GPU, where the cost is the number of kernel launches (not measured: no GPU). Figures:
    README, "Figures behind choices in the code". So the unrolls run apart only where the batched update would go to the
    pool untried anyway (over `FastCallable.POOL_UNTRIED_OPS` costly ops).
    """
    if settings.updates_in_thread or (os.cpu_count() or 1) < 2 or any("gpu" in d.lower() for d in devices):
        return True
    memory = settings.network_settings.memory
    hp = settings.hyperparameters
    assert memory is not None and isinstance(hp, PPOSettings)  # recurrent PPO runs only
    per_step, rest = _PARTNERED_OPS[hp.pack_sequences]
    return per_step * memory.sequence_length + rest <= FastCallable.POOL_UNTRIED_OPS


class PPOOptimizer(OptimizerBase):
    """Critic, PPO losses and the tower update graph in the policy's graph."""

    def __init__(
        self,
        policy: Policy,
        settings: TrainerSettings,
        signals: Mapping[str, RewardSignal],
        devices: Sequence[str] = ("/cpu:0",),
    ) -> None:
        super().__init__(policy, settings, signals, devices)
        hp = settings.hyperparameters
        assert isinstance(hp, PPOSettings)
        self.hyperparameters: PPOSettings = hp
        spec = policy.spec
        with policy.graph.as_default():
            self.current_step = tf.placeholder(tf.int64, [], name="current_step")
            self.learning_rate = schedule(
                hp.learning_rate, hp.learning_rate_schedule, self.current_step, settings.max_steps, 1e-10
            )
            self.beta = schedule(
                hp.beta, hp.resolved_beta_schedule, self.current_step, settings.max_steps, hp.beta_final
            )
            self.epsilon = schedule(
                hp.epsilon, hp.resolved_epsilon_schedule, self.current_step, settings.max_steps, hp.epsilon_final
            )
            self.placeholders = self._make_placeholders(spec)
            groups = [
                OptimizerGroup(
                    # Epsilon 1e-5 by default, not ML-Agents' 1e-8: see PPOSettings.adam_epsilon.
                    "ppo",
                    adam(self.learning_rate, hp.adam_epsilon, hp.adam_epsilon_placement),
                    (POLICY_SCOPE + "/", CRITIC_SCOPE + "/"),
                    max_grad_norm=hp.max_grad_norm,
                )
            ]
            self._wiring = SignalWiring(self.signals, groups, self.placeholders)
            self.signal_placeholders = self._wiring.placeholders
            self._signal_groups = self._wiring.groups
            self.groups = groups
            batch = {**self.placeholders, **self.signal_placeholders}
            self.towers: TowerGraph = build_towers(
                self._build_tower, batch, groups, self.devices,
                sequence_length=policy.sequence_length,
            )
            # Per group: the ops one group's update needs (for the separate-runs benchmark).
            self._group_targets: Dict[str, List[tf.Operation]] = {
                name: [op] for name, op in self.towers.apply_ops.items()
            }
            post_ops = []
            for group, ops in self._wiring.post_apply_ops(self.towers).items():
                post_ops.extend(ops)
                self._group_targets[group].extend(ops)
            with tf.control_dependencies(list(self.towers.apply_ops.values())):
                step_update = tf.assign(policy.behavior_graph.global_step, self.current_step)
            self._update_op = tf.group(step_update, *self.towers.apply_ops.values(), *post_ops)
            # The separate-runs mode's policy run must not trigger the other groups' applies
            # (step_update above depends on all of them).
            with tf.control_dependencies([self.towers.apply_ops["ppo"]]):
                self._group_targets["ppo"].append(tf.assign(policy.behavior_graph.global_step, self.current_step).op)
            self._stat_names = sorted(self.towers.stats)
            self._stat_names.extend(["learning_rate", "beta", "epsilon"])
            self._stat_tensors = [self.towers.stats[n] for n in sorted(self.towers.stats)] + [
                self.learning_rate,
                self.beta,
                self.epsilon,
            ]
            # Value estimates for trajectories: the critic on the inference placeholders.
            self.critic_memory_in: Optional[tf.Tensor] = None
            self.critic_memory_out: Optional[tf.Tensor] = None
            if policy.use_recurrent:
                values = self._build_trajectory_values()
            else:
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
        self._trajectory_fn: Optional[FastCallable] = None
        # Seed 2: the critic memory of every agent between its trajectories (dropped when
        # its episode ends); absent = zeros.
        self.critic_memory_dict: Dict[Hashable, np.ndarray] = {}

    @property
    def uses_critic_memory(self) -> bool:
        """The critic has its own LSTM (recurrent, not ``shared_critic``)."""
        return self.policy.use_recurrent and not self.hyperparameters.shared_critic

    def _build_trajectory_values(self) -> Dict[str, tf.Tensor]:
        """Values of one whole trajectory ``[T]`` on the inference placeholders, carrying the
        memory through it in one run. Separate critic: from ``critic_memory_in`` ``[1, m]``,
        also giving the critic memory after every step. Shared critic: the actor's LSTM from
        the actor's memory at the trajectory start (``policy.memory_in`` ``[1, m]``) with the
        previous actions (``policy.prev_action`` ``[T, b]``)."""
        policy = self.policy
        spec = policy.spec
        network = self.settings.network_settings
        m = policy.memory_size
        if self.hyperparameters.shared_critic:
            with tf.variable_scope(POLICY_SCOPE, reuse=tf.AUTO_REUSE):
                body = build_body(policy.obs, spec.observation_specs, network, policy.normalizers, "encoder")
                encoding, _ = recurrent_encoding(
                    body, network, policy.memory_in, 1, None, policy.prev_action,
                    spec.action_spec.discrete_branches, whole_trajectory=True,
                )
            with tf.variable_scope(CRITIC_SCOPE, reuse=tf.AUTO_REUSE):
                return value_heads(encoding, list(self.signals))
        self.critic_memory_in = tf.placeholder(tf.float32, [1, m], name="critic_memory_in")
        values, states = build_recurrent_critic(
            policy.obs, spec, network, policy.normalizers, list(self.signals), self.critic_memory_in,
            whole_trajectory=True,
        )
        self.critic_memory_out = tf.identity(states, name="critic_memory_out")
        return values

    # ---------------------------------------------------------------- graph

    def _make_placeholders(self, spec: BehaviorSpec) -> Dict[str, tf.Tensor]:
        """The update's row fields. Feed-forward on one tower, every minibatch is
        ``batch_size`` rows (`AgentBuffer.minibatches`) and the graph knows it: the
        gradients are then built without most of their shape bookkeeping (Shape,
        BroadcastGradientArgs, the Reshape and Sum of broadcasts), 229 instead of 293 ops
        in CartPole's update and about 10 % of its time (README, "Figures behind choices
        in the code"). Recurrent minibatches (whole sequences) and towers (shards of
        run-time sizes, which gain nothing from it) keep a dynamic row count."""
        ph: Dict[str, tf.Tensor] = {}
        static = not self.policy.use_recurrent and len(self.devices) == 1
        rows: Optional[int] = self.hyperparameters.batch_size if static else None
        with tf.name_scope("update"):
            for i, o in enumerate(spec.observation_specs):
                ph[obs_key(i)] = tf.placeholder(tf.float32, (rows,) + o.shape, name=obs_key(i))
            a = spec.action_spec
            if a.is_continuous:
                ph[CONTINUOUS_ACTION] = tf.placeholder(tf.float32, [rows, a.continuous_size], CONTINUOUS_ACTION)
            if a.is_discrete:
                ph[DISCRETE_ACTION] = tf.placeholder(tf.int32, [rows, a.discrete_size], DISCRETE_ACTION)
                ph[ACTION_MASK] = tf.placeholder(tf.float32, [rows, sum(a.discrete_branches)], ACTION_MASK)
            # Per continuous dimension and discrete branch (`ActorTensors.log_prob_per_dim`).
            ph[LOG_PROBS] = tf.placeholder(tf.float32, [rows, a.continuous_size + a.discrete_size], LOG_PROBS)
            ph[ADVANTAGES] = tf.placeholder(tf.float32, [rows], ADVANTAGES)
            ph[MASKS] = tf.placeholder(tf.float32, [rows], MASKS)
            if self.policy.use_recurrent:
                m = self.policy.memory_size
                # Per row: the memories each step acted from, used at sequence starts
                # and, packed, where ``reset`` marks a trajectory start.
                ph[MEMORY] = tf.placeholder(tf.float32, [None, m], MEMORY)
                if self.hyperparameters.pack_sequences:
                    ph[RESET] = tf.placeholder(tf.float32, [None], RESET)
                if a.is_discrete:
                    ph[PREV_ACTION] = tf.placeholder(tf.int32, [None, a.discrete_size], PREV_ACTION)
                if not self.hyperparameters.shared_critic:
                    ph[CRITIC_MEMORY] = tf.placeholder(tf.float32, [None, m], CRITIC_MEMORY)
            for s in self.signals:
                ph[signal_key(s, RETURNS)] = tf.placeholder(tf.float32, [rows], signal_key(s, RETURNS))
                ph[signal_key(s, VALUE_ESTIMATES)] = tf.placeholder(tf.float32, [rows], signal_key(s, VALUE_ESTIMATES))
            # Fields only reward signals read, one shared placeholder each.
            add_signal_field_placeholders(ph, self.signals, spec)
        return ph

    def _build_tower(self, shard: Dict[str, tf.Tensor]) -> TowerOutput:
        """Actor copy + critic + PPO losses (+ every signal's tower) on one shard."""
        policy = self.policy
        spec = policy.spec
        network = self.settings.network_settings
        obs = [shard[obs_key(i)] for i in range(len(spec.observation_specs))]
        mask = shard[MASKS]
        memory, critic_memory = shard.get(MEMORY), shard.get(CRITIC_MEMORY)
        if memory is not None and not self.hyperparameters.pack_sequences:
            # Padded layout (trainers/buffer.py): no trajectory starts inside a sequence,
            # so each sequence starts from its first row's memories and the unroll needs
            # no resets (fewer ops).
            length = policy.sequence_length
            memory = memory[::length]
            critic_memory = None if critic_memory is None else critic_memory[::length]
        partner = None
        if self.uses_critic_memory and critic_lstm_with_actor(self.settings, self.devices):
            # The critic's LSTM steps in the actor's LSTM ops (`LSTMPartner`): the same
            # variables and results as `build_recurrent_critic`, half the unrolled ops.
            with tf.variable_scope(CRITIC_SCOPE, reuse=tf.AUTO_REUSE):
                critic_encoding = build_body(obs, spec.observation_specs, network, policy.normalizers, "encoder")
                assert network.memory is not None and critic_memory is not None  # recurrent only
                partner = LSTMPartner(critic_encoding, critic_memory, network.memory.memory_size, "lstm")
        actor: ActorTensors = build_actor(
            obs, shard.get(ACTION_MASK), spec, network, policy.normalizers,
            memory_in=memory, sequence_length=policy.sequence_length,
            prev_action=shard.get(PREV_ACTION), reset=shard.get(RESET), lstm_partner=partner,
            state_dependent=policy.state_dependent,
        )
        if partner is not None:
            with tf.variable_scope(CRITIC_SCOPE, reuse=tf.AUTO_REUSE):
                values = value_heads(partner.output, list(self.signals))
        elif self.uses_critic_memory:  # its own unroll (`critic_lstm_with_actor`)
            assert critic_memory is not None  # fed with the critic's own LSTM
            values, _ = build_recurrent_critic(
                obs, spec, network, policy.normalizers, list(self.signals), critic_memory,
                policy.sequence_length, reset=shard.get(RESET),
            )
        else:
            shared = actor.encoding if self.hyperparameters.shared_critic else None
            values = build_critic(obs, spec, network, policy.normalizers, list(self.signals), shared)
        eps = self.epsilon

        log_prob = actor.log_prob_per_dim(shard.get(CONTINUOUS_ACTION), shard.get(DISCRETE_ACTION))
        policy_loss, approx_kl, clip_fraction = clipped_surrogate(log_prob, shard[LOG_PROBS], shard[ADVANTAGES], eps, mask)

        value_losses = []
        for s, v in values.items():
            old_v, ret = shard[signal_key(s, VALUE_ESTIMATES)], shard[signal_key(s, RETURNS)]
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
            "approx_kl": approx_kl,
            "clip_fraction": clip_fraction,
        }
        losses = {"ppo": loss}
        self._wiring.build_tower(shard, losses, stats)
        return TowerOutput(losses, stats, tf.reduce_sum(mask))

    # -------------------------------------------------------------- running

    def evaluate_values(self, obs: Sequence[np.ndarray]) -> Dict[str, np.ndarray]:
        """Critic estimates for ``obs[i]`` ``[T, *shape]``: signal -> ``[T]`` (one run;
        feed-forward critics only, see `trajectory_values`)."""
        if self._values_fn is None:
            self._values_fn = FastCallable(
                self.policy.session, [self.values[s] for s in self.signals], self.policy.obs
            )
        out = self._values_fn(*obs)
        return {s: v for s, v in zip(self.signals, out)}

    def trajectory_values(
        self,
        obs: Sequence[np.ndarray],
        agent: Hashable,
        done: bool,
        actor_memory: Optional[np.ndarray] = None,
        prev_actions: Optional[np.ndarray] = None,
    ) -> Tuple[Dict[str, np.ndarray], Optional[np.ndarray]]:
        """Critic estimates for one trajectory of ``agent`` plus its bootstrap observation.

        Args:
            obs: ``obs[i]`` ``[T + 1, *shape]``: the trajectory's observations, then the next one.
            agent: the agent's key (whose critic memory to carry).
            done: the agent's episode ended with this trajectory (its critic memory is dropped).
            actor_memory: recurrent policies: ``[T, m]`` the actor's memories (shared critic).
            prev_actions: recurrent + discrete: ``[T + 1, b]`` previous actions (shared critic).
        Returns:
            (signal -> ``[T + 1]`` values, ``[T, m]`` the critic memory each step started
            from, or None when the critic has no memory of its own). Without memory this is
            `evaluate_values`. With memory the whole trajectory is unrolled in one run from
            the agent's critic memory (what evaluating it sequence by sequence and carrying
            the memory gives), and the memory after its last step is kept for the agent's
            next trajectory.
        """
        if not self.policy.use_recurrent:
            return self.evaluate_values(obs), None
        if self._trajectory_fn is None:
            fetches = [self.values[s] for s in self.signals]
            if self.uses_critic_memory:
                feeds = list(self.policy.obs) + [self.critic_memory_in]
                fetches.append(self.critic_memory_out)
            else:
                feeds = list(self.policy.obs) + [self.policy.memory_in]
                if self.policy.prev_action is not None:
                    feeds.append(self.policy.prev_action)
            self._trajectory_fn = FastCallable(self.policy.session, fetches, feeds)
        n = len(obs[0]) - 1
        if not self.uses_critic_memory:
            # The actor's memory before the first step starts the unroll (recurrent callers
            # always give it, and the previous actions with discrete actions).
            assert actor_memory is not None
            feeds = list(obs) + [actor_memory[:1]]
            if self.policy.prev_action is not None:
                assert prev_actions is not None
                feeds.append(prev_actions)
            out = self._trajectory_fn(*feeds)
            return {s: v for s, v in zip(self.signals, out)}, None
        start = self.critic_memory_dict.get(agent)
        if start is None:
            start = np.zeros(self.policy.memory_size, np.float32)
        out = self._trajectory_fn(*obs, start[None])
        states = out[-1]  # [T + 1, m]: after each step (the last one: after the bootstrap obs)
        memories = np.concatenate([start[None], states[: n - 1]], axis=0)
        if done:
            self.critic_memory_dict.pop(agent, None)
        else:
            self.critic_memory_dict[agent] = states[n - 1]
        return {s: v for s, v in zip(self.signals, out[:-1])}, memories

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
                fn = FastCallable(
                    self.policy.update_session, tensors, self._feed_list, targets, pool=AUTO_POOL
                )
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
                self.policy.update_session,
                self._stat_tensors,
                self._feed_list,
                targets=[self._update_op],
                # A threaded trainer's update has a thread of its own: running its ops
                # there leaves the other core to the envs and inference, which is what
                # threading is for (benchmark_slow_env.py's steps/s: README, "Figures
                # behind choices in the code").
                pool=CALLER_THREAD if self.settings.updates_in_thread else AUTO_POOL,
            )
        out = self._update_fn(*self._feeds(minibatch, step, extra_feed))
        self.update_runs += 1
        return {name: float(v) for name, v in zip(self._stat_names, out)}

