"""The actor: its graph (built once for inference, and again inside every training tower
through the same builder), and batched inference.

The policy owns the behavior's ``tf.Graph`` and ``Session``, the observation normalizers
and the named inference outputs of ``tf/names.py``. It has no value head: the critic
belongs to the optimizer.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from envs.base_env import ActionSpec, BehaviorSpec, ObservationKind
from trainers.exceptions import ConfigError
from trainers.settings import NetworkSettings, TrainerSettings
from trainers.tf import names, tf
from trainers.tf.distributions import (
    Gaussian,
    MultiCategorical,
    build_gaussian,
    build_multi_categorical,
)
from trainers.tf.encoders import build_body, check_visual_sizes
from trainers.tf.normalizer import Normalizer, build_normalizer
from trainers.tf.session import FastCallable, make_session

POLICY_SCOPE = "policy"


@dataclass(frozen=True)
class ActorTensors:
    """One copy of the actor.

    Attributes:
        encoding: ``[B, hidden]`` body output.
        continuous: Gaussian head or None.
        discrete: categorical heads or None.
    """

    encoding: tf.Tensor
    continuous: Optional[Gaussian]
    discrete: Optional[MultiCategorical]

    def log_prob(self, continuous_actions: Optional[tf.Tensor], discrete_actions: Optional[tf.Tensor]) -> tf.Tensor:
        """``[B]`` joint log-probability of raw continuous ``[B, c]`` and discrete ``[B, b]`` actions."""
        total = 0.0
        if self.continuous is not None:
            total += self.continuous.log_prob(continuous_actions)
        if self.discrete is not None:
            total += self.discrete.log_prob(discrete_actions)
        return total

    def entropy(self) -> tf.Tensor:
        """``[B]`` entropy of the joint action distribution."""
        total = 0.0
        if self.continuous is not None:
            total += self.continuous.entropy()
        if self.discrete is not None:
            total += self.discrete.entropy()
        return total


def build_actor(
    obs: Sequence[tf.Tensor],
    action_masks: Optional[tf.Tensor],
    spec: BehaviorSpec,
    network: NetworkSettings,
    normalizers: Sequence[Optional[Normalizer]],
    squashed: bool = False,
    noise: Optional[tf.Tensor] = None,
) -> ActorTensors:
    """Builds (or reuses, by variable name) the actor on ``obs`` ``[B, *shape_i]``.

    Used for the inference copy and for every training tower, so their weights are one.
    ``squashed``: SAC's tanh-squashed Gaussian (see `Policy.squashed`); ``noise``
    ``[B, c]``: the continuous sample's standard-normal noise, fed (None: drawn in-graph).
    """
    with tf.variable_scope(POLICY_SCOPE, reuse=tf.AUTO_REUSE):
        encoding = build_body(obs, spec.observation_specs, network, normalizers, "encoder")
        action_spec = spec.action_spec
        cont = (
            build_gaussian(encoding, action_spec.continuous_size, squashed, noise)
            if action_spec.is_continuous
            else None
        )
        disc = (
            build_multi_categorical(encoding, action_spec.discrete_branches, action_masks)
            if action_spec.is_discrete
            else None
        )
    return ActorTensors(encoding, cont, disc)


@dataclass
class ActionInfo:
    """Result of one batched inference call.

    Attributes:
        env_continuous: ``[N, c]`` float32 in [-1, 1] (what the env receives).
        raw_continuous: ``[N, c]`` float32 unclipped, unsquashed sample (what buffers store).
        discrete: ``[N, b]`` int32.
        log_probs: ``[N]`` float32 joint log-probability of the sampled action.
    """

    env_continuous: np.ndarray
    raw_continuous: np.ndarray
    discrete: np.ndarray
    log_probs: np.ndarray


def is_squashed(settings: TrainerSettings) -> bool:
    """Whether the behavior's actor is the tanh-squashed Gaussian (SAC, as in ML-Agents)."""
    return settings.trainer_type == "sac"


def _int_const(value: Sequence[int] | int, name: str) -> tf.Tensor:
    return tf.constant(value, dtype=tf.int32, name=name)


class Policy:
    """The actor of one behavior: graph, session, normalizers and batched inference."""

    def __init__(
        self,
        behavior_name: str,
        spec: BehaviorSpec,
        settings: TrainerSettings,
        seed: int,
        devices: Sequence[str] = ("/cpu:0",),
        cpu_only: bool = False,
    ) -> None:
        network = settings.network_settings
        if network.memory is not None:
            raise ConfigError(
                f"behaviors.{behavior_name}.network_settings.memory: recurrent policies (LSTM) "
                "are not supported yet; remove the memory section"
            )
        check_visual_sizes(spec.observation_specs, network.vis_encode_type)
        self.behavior_name = behavior_name
        self.spec = spec
        self.settings = settings
        #: SAC's actor: tanh-squashed Gaussian with a state-dependent log std. Every copy
        #: of the actor (towers, BC, export) is built with this flag.
        self.squashed = is_squashed(settings)
        self.graph = tf.Graph()
        action_spec: ActionSpec = spec.action_spec
        with self.graph.as_default():
            tf.set_random_seed(seed)
            self.obs: List[tf.Tensor] = [
                tf.placeholder(tf.float32, (None,) + o.shape, name=names.obs_name(i))
                for i, o in enumerate(spec.observation_specs)
            ]
            self.action_masks: Optional[tf.Tensor] = None
            if action_spec.is_discrete:
                self.action_masks = tf.placeholder(
                    tf.float32, [None, sum(action_spec.discrete_branches)], name=names.ACTION_MASKS
                )
            self.normalizers: List[Optional[Normalizer]] = [
                build_normalizer(o.shape[0], f"normalizer_{i}")
                if network.normalize and o.kind == ObservationKind.VECTOR
                else None
                for i, o in enumerate(spec.observation_specs)
            ]
            self.global_step = tf.get_variable(
                "global_step", [], tf.int64, tf.zeros_initializer(), trainable=False
            )
            self._step_ph = tf.placeholder(tf.int64, [], name="set_step")
            self._step_assign = tf.assign(self.global_step, self._step_ph)
            self.actor = build_actor(
                self.obs, self.action_masks, spec, network, self.normalizers, self.squashed
            )
            self._build_outputs(action_spec)
        self.session = make_session(self.graph, devices, cpu_only)
        self._act: Optional[Callable[..., list]] = None
        self._act_deterministic: Optional[Callable[..., list]] = None
        self._empty: Dict[int, Tuple[np.ndarray, np.ndarray]] = {}

    def _build_outputs(self, action_spec: ActionSpec) -> None:
        """Named inference outputs (ML-Agents 2.0 names) and trainer-internal fetches."""
        actor = self.actor
        _int_const(names.MODEL_EXPORT_VERSION, names.VERSION_NUMBER)
        _int_const(0, names.MEMORY_SIZE)
        self.raw_continuous = self.env_continuous = self.deterministic_continuous = None
        self.discrete = self.deterministic_discrete = None
        if actor.continuous is not None:
            self.raw_continuous = tf.identity(actor.continuous.sample, name=names.RAW_CONTINUOUS_ACTIONS)
            self.env_continuous = tf.identity(
                actor.continuous.to_env(self.raw_continuous), name=names.CONTINUOUS_ACTIONS
            )
            _int_const(action_spec.continuous_size, names.CONTINUOUS_ACTION_OUTPUT_SHAPE)
            self.deterministic_continuous = tf.identity(
                actor.continuous.to_env(actor.continuous.mean), name=names.DETERMINISTIC_CONTINUOUS_ACTIONS
            )
        if actor.discrete is not None:
            self.discrete = tf.identity(actor.discrete.sample, name=names.DISCRETE_ACTIONS)
            _int_const(list(action_spec.discrete_branches), names.DISCRETE_ACTION_OUTPUT_SHAPE)
            self.deterministic_discrete = tf.identity(
                actor.discrete.deterministic, name=names.DETERMINISTIC_DISCRETE_ACTIONS
            )
        self.log_probs = tf.identity(
            actor.log_prob(self.raw_continuous, self.discrete), name=names.LOG_PROBS
        )
        self.entropy = tf.identity(actor.entropy(), name=names.ENTROPY)

    # ----------------------------------------------------------------- inference

    def _feed_list(self) -> List[tf.Tensor]:
        return self.obs + ([self.action_masks] if self.action_masks is not None else [])

    def _make_act(self, deterministic: bool) -> Callable[..., list]:
        if deterministic:
            fetches = [self.deterministic_continuous, self.deterministic_discrete]
        else:
            fetches = [self.raw_continuous, self.env_continuous, self.discrete, self.log_probs]
        present = [f for f in fetches if f is not None]
        run = FastCallable(self.session, present, self._feed_list())

        def call(*feeds: np.ndarray) -> list:
            values = iter(run(*feeds))
            return [next(values) if f is not None else None for f in fetches]

        return call

    def act(
        self, obs: Sequence[np.ndarray], action_masks: Optional[np.ndarray] = None, deterministic: bool = False
    ) -> ActionInfo:
        """One ``sess.run`` for all agents: ``obs[i]`` ``[N, *shape_i]`` -> actions for N agents.

        Args:
            obs: one float32 array per observation spec.
            action_masks: ``[N, sum(branches)]`` float32, 1 = allowed (all ones if None).
            deterministic: distribution modes instead of samples (for --inference).
        """
        n = obs[0].shape[0]
        feeds = list(obs)
        if self.action_masks is not None:
            feeds.append(
                action_masks if action_masks is not None
                else np.ones((n, int(self.action_masks.shape[1])), np.float32)
            )
        empty_c, empty_d = self._empty_actions(n)
        if deterministic:
            if self._act_deterministic is None:
                self._act_deterministic = self._make_act(True)
            cont, disc = self._act_deterministic(*feeds)
            cont = empty_c if cont is None else cont
            return ActionInfo(cont, cont, empty_d if disc is None else disc, np.zeros(n, np.float32))
        if self._act is None:
            self._act = self._make_act(False)
        raw, env, disc, logp = self._act(*feeds)
        return ActionInfo(
            empty_c if env is None else env,
            empty_c if raw is None else raw,
            empty_d if disc is None else disc,
            logp,
        )

    def _empty_actions(self, n: int) -> Tuple[np.ndarray, np.ndarray]:
        """Zero-width continuous/discrete arrays for ``n`` agents, cached (hot path)."""
        cached = self._empty.get(n)
        if cached is None:
            spec = self.spec.action_spec
            cached = self._empty[n] = (
                np.zeros((n, spec.continuous_size), np.float32),
                np.zeros((n, spec.discrete_size), np.int32),
            )
        return cached

    def update_normalization(self, obs: Sequence[np.ndarray]) -> None:
        """Merges a trajectory's vector observations into the running statistics (one run)."""
        feed = {n.update_input: o for n, o in zip(self.normalizers, obs) if n is not None}
        if feed:
            ops = [n.update_op for n in self.normalizers if n is not None]
            self.session.run(ops, feed_dict=feed)

    @property
    def normalize(self) -> bool:
        return any(n is not None for n in self.normalizers)

    def set_step(self, step: int) -> None:
        """Writes the trainer's step into the graph (saved with checkpoints)."""
        self.session.run(self._step_assign, {self._step_ph: step})

    def get_step(self) -> int:
        return int(self.session.run(self.global_step))
