"""Behavioral cloning: supervised steps of the actor towards the expert's actions.

`BCModule` is built in the policy's graph when the trainer is constructed (before the
graph is finalised): an actor copy on its own placeholders (same weights as the policy,
by variable name), the loss, and its own Adam. After the PPO epochs of every update the
trainer calls `BCModule.update`: ``num_epoch`` passes, each over the first
``samples_per_update`` rows (0: all) of a fresh shuffle of the whole demo, in minibatches
of ``batch_size`` — a separate pass with its own
``sess.run`` per minibatch, by design (ML-Agents runs it after the policy update too).

**Loss.** Discrete: cross-entropy of the expert's action, summed over branches (masked
logits, the demo's masks when it has them). Continuous: the squared error between the
policy mean and the expert action *in environment space*. The environment receives
``clip(raw, -3, 3) / 3`` while demos store what the environment received (in [-1, 1]), so
the loss is ``mean((mu / 3 - a_expert)^2)``; the clip is left out because the targets lie
inside it (a clipped mean beyond +-3 would get no gradient back). The log std is not
trained by BC. Hybrid specs add both terms.

**Recurrent policies.** The demo is cut into its episodes, each left-padded to whole
sequences of ``sequence_length`` (as ML-Agents' update buffer does; padding masked out of the
loss); minibatches are whole sequences, each starting from a zero memory (as ML-Agents'
BC does), with the expert's previous discrete action fed as the policy's previous action
(0 at an episode's first step).

**Learning rate.** ``learning_rate x strength`` (the trainer's initial rate), decayed
linearly to 0 over ``steps`` agent steps (``steps: 0``: constant).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

import numpy as np

from trainers.buffer import pad_trajectory
from trainers.expert import ExpertData, load_expert_data
from trainers.fields import (
    ACTION_MASK,
    CONTINUOUS_ACTION,
    DISCRETE_ACTION,
    MASKS,
    OBS,
    PREV_ACTION,
    obs_key,
)
from trainers.policy import POLICY_SCOPE, Policy, build_actor
from trainers.reward_signals._features import action_placeholders, obs_placeholders
from trainers.config import BehavioralCloningSettings
from trainers.tf import tf
from trainers.tf.session import FastCallable
from trainers.tf.towers import masked_mean

BC_SCOPE = "behavioral_cloning"


class BCModule:
    """Behavioral cloning of one behavior's actor from a demonstration.

    Args:
        policy: the actor to train (its graph must not be finalised yet).
        settings: the ``behavioral_cloning`` section.
        learning_rate: the trainer's initial learning rate (scaled by ``strength``).
        batch_size, num_epoch: the trainer's, used where ``settings`` leaves them None.
        seed: seeds the choice and order of demo rows.
        after: ops the BC step must follow when it joins another run (SAC runs BC in its
            update run, after the SAC applies, so the two never write the actor at once).
    """

    def __init__(
        self,
        policy: Policy,
        settings: BehavioralCloningSettings,
        learning_rate: float,
        batch_size: int,
        num_epoch: int,
        seed: int = 0,
        after: Sequence[tf.Operation] = (),
    ) -> None:
        self.policy = policy
        self.settings = settings
        spec = policy.spec
        self.expert: ExpertData = load_expert_data(settings.demo_path, policy.behavior_name, spec)
        self.batch_size = settings.batch_size or batch_size
        self.num_epoch = settings.num_epoch or num_epoch
        self.initial_learning_rate = learning_rate * settings.strength
        self._rng = np.random.default_rng(seed)
        self.update_runs = 0  # BC sess.runs (tests count them)
        action_spec = spec.action_spec
        with policy.graph.as_default(), tf.name_scope(BC_SCOPE), tf.control_dependencies(list(after)):
            self._obs = obs_placeholders(spec, OBS)
            self._actions = action_placeholders(action_spec, "expert")
            self._mask: Optional[tf.Tensor] = None
            if action_spec.is_discrete:
                self._mask = tf.placeholder(
                    tf.float32, [None, sum(action_spec.discrete_branches)], name=ACTION_MASK
                )
            self._step = tf.placeholder(tf.int64, [], name="step")
            self._rows_mask: Optional[tf.Tensor] = None
            self._prev: Optional[tf.Tensor] = None
            memory_in = None
            length = policy.sequence_length
            if policy.use_recurrent:
                self._rows_mask = tf.placeholder(tf.float32, [None], name=MASKS)
                if action_spec.is_discrete:
                    self._prev = tf.placeholder(tf.int32, [None, action_spec.discrete_size], name=PREV_ACTION)
                memory_in = tf.zeros([tf.shape(self._rows_mask)[0] // length, policy.memory_size])
            actor = build_actor(
                self._obs, self._mask, spec, policy.settings.network_settings, policy.normalizers, policy.squashed,
                memory_in=memory_in, sequence_length=length, step_mask=self._rows_mask, prev_action=self._prev,
                state_dependent=policy.state_dependent,
            )

            def mean(x: tf.Tensor) -> tf.Tensor:
                return tf.reduce_mean(x) if self._rows_mask is None else masked_mean(x, self._rows_mask)

            loss = tf.constant(0.0)
            if actor.continuous is not None:
                # Env space (the clip left out; SAC's squashed actor: tanh of the mean).
                mu = actor.continuous.mean
                predicted = tf.tanh(mu) if policy.squashed else mu / policy.action_clip
                loss += mean(tf.reduce_mean(tf.square(predicted - self._actions[CONTINUOUS_ACTION]), axis=1))
            if actor.discrete is not None:
                loss += -mean(actor.discrete.log_prob(self._actions[DISCRETE_ACTION]))
            self.loss = loss
            if settings.steps > 0:
                frac = tf.minimum(tf.cast(self._step, tf.float32) / float(settings.steps), 1.0)
                self.learning_rate = self.initial_learning_rate * (1.0 - frac)
            else:
                self.learning_rate = tf.constant(self.initial_learning_rate, tf.float32)
            variables = [
                v for v in tf.trainable_variables() if v.op.name.startswith(POLICY_SCOPE + "/")
            ]
            optimizer = tf.train.AdamOptimizer(self.learning_rate, name="bc_adam")
            self._train_op = optimizer.minimize(self.loss, var_list=variables)
        self._feed_list: List[tf.Tensor] = (
            self._obs + list(self._actions.values()) + ([self._mask] if self._mask is not None else [])
        )
        if self._rows_mask is not None:
            self._feed_list.append(self._rows_mask)
        if self._prev is not None:
            self._feed_list.append(self._prev)
        self._feed_list.append(self._step)
        self._update_fn: Optional[FastCallable] = None
        self._sequences = _demo_sequences(self.expert, length) if policy.use_recurrent else None

    def _feeds(self, idx: np.ndarray, step: int) -> List[object]:
        """Values for ``feed_list`` from demo rows ``idx``."""
        feeds: List[object] = [o[idx] for o in self.expert.obs]
        if CONTINUOUS_ACTION in self._actions:
            feeds.append(self.expert.continuous_action[idx])
        if DISCRETE_ACTION in self._actions:
            feeds.append(self.expert.discrete_action[idx])
        if self._mask is not None:
            feeds.append(self.expert.action_mask[idx])
        feeds.append(step)
        return feeds

    # One minibatch inside another module's run (SAC): the ops and feeds it joins with.

    @property
    def train_op(self) -> tf.Operation:
        return self._train_op

    @property
    def feed_list(self) -> List[tf.Tensor]:
        return list(self._feed_list)

    def sample_feeds(self, step: int) -> List[object]:
        """``feed_list`` values for one minibatch of ``batch_size`` demo rows drawn at random
        (recurrent policies: ``max(1, batch_size // sequence_length)`` whole sequences of
        the padded demo, `sample_sequence_feeds`)."""
        if self._sequences is not None:
            return self.sample_sequence_feeds(step)
        n = len(self.expert)
        idx = self._rng.choice(n, size=min(self.batch_size, n), replace=False)
        return self._feeds(idx, step)

    def sample_sequence_feeds(self, step: int) -> List[object]:
        """Recurrent policies (recurrent SAC's joined run): ``feed_list`` values for
        ``max(1, batch_size // sequence_length)`` whole demo sequences drawn at random."""
        data = self._sequences
        assert data is not None  # recurrent policies only
        length = self.policy.sequence_length
        num_seq = len(data.masks) // length
        seqs = self._rng.choice(num_seq, size=min(max(1, self.batch_size // length), num_seq), replace=False)
        idx = (seqs[:, None] * length + np.arange(length)[None, :]).reshape(-1)
        feeds: List[object] = [o[idx] for o in data.obs]
        if CONTINUOUS_ACTION in self._actions:
            feeds.append(data.continuous_action[idx])
        if DISCRETE_ACTION in self._actions:
            feeds.append(data.discrete_action[idx])
        if self._mask is not None:
            feeds.append(data.action_mask[idx])
        feeds.append(data.masks[idx])  # the order of feed_list
        if self._prev is not None:
            feeds.append(data.prev_action[idx])
        feeds.append(step)
        return feeds

    @property
    def samples_per_update(self) -> int:
        """Demo rows used per update: ``samples_per_update``, or the whole demo when 0."""
        n = len(self.expert)
        return min(self.settings.samples_per_update, n) if self.settings.samples_per_update > 0 else n

    def update(self, step: int) -> float:
        """``num_epoch`` passes of minibatch steps over a sample of the demo.

        Args:
            step: the trainer's agent step (drives the learning-rate decay).
        Returns:
            The mean BC loss over the minibatches (reported as ``Losses/Pretraining Loss``).
        """
        if self._update_fn is None:
            self._update_fn = FastCallable(
                self.policy.session, [self.loss], self._feed_list, targets=[self._train_op]
            )
        if self._sequences is not None:
            return self._update_sequences(step)
        n = self.samples_per_update
        batch = min(self.batch_size, n)
        losses = []
        for _ in range(self.num_epoch):
            # As ML-Agents: every epoch reshuffles the *whole* demo and takes its first
            # ``samples_per_update`` rows (not one subset drawn once per update).
            order = self._rng.permutation(len(self.expert))
            for b in range(n // batch):
                idx = order[b * batch : (b + 1) * batch]
                losses.append(float(self._update_fn(*self._feeds(idx, step))[0]))
                self.update_runs += 1
        return float(np.mean(losses))

    def _update_sequences(self, step: int) -> float:
        """Recurrent policies: as `update`, over whole sequences of the padded demo."""
        length = self.policy.sequence_length
        data = self._sequences
        assert data is not None  # only called for recurrent policies
        num_seq = len(data.masks) // length
        n = max(1, min(self.samples_per_update // length, num_seq))
        per_batch = max(1, min(self.batch_size // length, n))
        chosen = self._rng.permutation(num_seq)[:n]
        offsets = np.arange(length)
        losses = []
        for _ in range(self.num_epoch):
            order = self._rng.permutation(chosen)
            for b in range(n // per_batch):
                seqs = order[b * per_batch : (b + 1) * per_batch]
                idx = (seqs[:, None] * length + offsets[None, :]).reshape(-1)
                feeds: List[object] = [o[idx] for o in data.obs]
                if CONTINUOUS_ACTION in self._actions:
                    feeds.append(data.continuous_action[idx])
                if DISCRETE_ACTION in self._actions:
                    feeds.append(data.discrete_action[idx])
                if self._mask is not None:
                    feeds.append(data.action_mask[idx])
                feeds.append(data.masks[idx])
                if self._prev is not None:
                    feeds.append(data.prev_action[idx])
                feeds.append(step)
                losses.append(float(self._update_fn_or_make()(*feeds)[0]))
                self.update_runs += 1
        return float(np.mean(losses))

    def _update_fn_or_make(self) -> FastCallable:
        if self._update_fn is None:
            self._update_fn = FastCallable(
                self.policy.session, [self.loss], self._feed_list, targets=[self._train_op]
            )
        return self._update_fn


@dataclass
class _DemoSequences:
    """The padded demo of a recurrent policy (`_demo_sequences`): rows ``[N x L, ...]``."""

    obs: List[np.ndarray]
    continuous_action: np.ndarray
    discrete_action: np.ndarray
    action_mask: np.ndarray
    masks: np.ndarray
    prev_action: np.ndarray


def _demo_sequences(expert: ExpertData, length: int) -> _DemoSequences:
    """The demo's episodes, each left-padded to whole sequences (`pad_trajectory`), with
    ``masks`` and the previous discrete actions (0 at each episode's first step)."""
    ends = np.flatnonzero(expert.done > 0) + 1
    bounds = [0] + [int(e) for e in ends if e < len(expert)] + [len(expert)]
    parts: List[Dict[str, np.ndarray]] = []
    for start, end in zip(bounds[:-1], bounds[1:]):
        if end <= start:
            continue
        fields = {obs_key(i): o[start:end] for i, o in enumerate(expert.obs)}
        fields[CONTINUOUS_ACTION] = expert.continuous_action[start:end]
        fields[DISCRETE_ACTION] = expert.discrete_action[start:end]
        fields[ACTION_MASK] = expert.action_mask[start:end]
        fields[MASKS] = np.ones(end - start, np.float32)
        prev = np.zeros_like(expert.discrete_action[start:end])
        prev[1:] = expert.discrete_action[start : end - 1]
        fields[PREV_ACTION] = prev
        parts.append(pad_trajectory(fields, length))
    joined = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    return _DemoSequences(
        obs=[joined[obs_key(i)] for i in range(len(expert.obs))],
        continuous_action=joined[CONTINUOUS_ACTION],
        discrete_action=joined[DISCRETE_ACTION],
        action_mask=joined[ACTION_MASK],
        masks=joined[MASKS],
        prev_action=joined[PREV_ACTION],
    )
