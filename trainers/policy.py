"""The actor: its graph (built once for inference, and again inside every training tower
through the same builder), and batched inference.

The policy owns the behavior's ``tf.Graph`` and ``Session``, the observation normalizers
and the named inference outputs of ``tf/names.py``. It has no value head: the critic
belongs to the optimizer.

Recurrent policies (``network_settings.memory``): the policy also keeps, per agent key, the
memory after the agent's last action and that action's discrete part (its next previous
action); ``act(..., agent_keys=...)`` feeds and updates them and returns the memories each
agent acted from (stored in its trajectory); ``forget_agents`` drops them when an episode
ends, so the next one starts from zeros. Trainer-agnostic: any optimizer can reuse it.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Callable, Dict, Hashable, List, Optional, Protocol, Sequence, Tuple

import numpy as np

from envs.base_env import ActionSpec, BehaviorSpec, ObservationKind
from trainers.graph import BehaviorGraph
from trainers.config import NetworkSettings, PPOSettings, TrainerSettings
from trainers.tf import names, tf
from trainers.tf.distributions import (
    CONTINUOUS_CLIP,
    Gaussian,
    MultiCategorical,
    build_gaussian,
    build_multi_categorical,
)
from trainers.tf.encoders import build_body, check_visual_sizes
from trainers.tf.lstm import LSTMPartner, lstm_sequences, lstm_trajectory
from trainers.tf.normalizer import Normalizer, build_normalizer
from trainers.tf.session import FastCallable

POLICY_SCOPE = "policy"
ACTING_SCOPE = "acting"  # threaded trainers: the copy of the actor that acts during updates


@dataclass(frozen=True)
class ActorTensors:
    """One copy of the actor.

    Attributes:
        encoding: ``[B, hidden]`` body output (``[B, memory_size // 2]``, the LSTM's
            output, with memory).
        continuous: Gaussian head or None.
        discrete: categorical heads or None.
        memory_out: ``[S, memory_size]`` the memory after each sequence (None without memory).
    """

    encoding: tf.Tensor
    continuous: Optional[Gaussian]
    discrete: Optional[MultiCategorical]
    memory_out: Optional[tf.Tensor] = None

    def log_prob(self, continuous_actions: Optional[tf.Tensor], discrete_actions: Optional[tf.Tensor]) -> tf.Tensor:
        """``[B]`` joint log-probability of raw continuous ``[B, c]`` and discrete ``[B, b]`` actions."""
        total = 0.0
        if self.continuous is not None:
            total += self.continuous.log_prob(continuous_actions)
        if self.discrete is not None:
            total += self.discrete.log_prob(discrete_actions)
        return total

    def log_prob_per_dim(
        self, continuous_actions: Optional[tf.Tensor], discrete_actions: Optional[tf.Tensor]
    ) -> tf.Tensor:
        """``[B, c + b]``: each continuous dimension's log-density, then each discrete
        branch's log-probability (ML-Agents' ``ActionLogProbs.flatten()``; PPO's ratio is
        clipped per column, as ML-Agents' ``trust_region_policy_loss``)."""
        parts = []
        if self.continuous is not None:
            parts.append(self.continuous.log_prob_per_dim(continuous_actions))
        if self.discrete is not None:
            parts.append(self.discrete.log_prob_per_dim(discrete_actions))
        return parts[0] if len(parts) == 1 else tf.concat(parts, axis=1)

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
    *,
    memory_in: Optional[tf.Tensor] = None,
    sequence_length: int = 1,
    step_mask: Optional[tf.Tensor] = None,
    prev_action: Optional[tf.Tensor] = None,
    reset: Optional[tf.Tensor] = None,
    lstm_partner: Optional[LSTMPartner] = None,
    log_std_init: float = 0.0,
    state_dependent: bool = False,
    sde_noise: Optional[tf.Tensor] = None,
    action_clip: float = CONTINUOUS_CLIP,
) -> ActorTensors:
    """Builds (or reuses, by variable name) the actor on ``obs`` ``[B, *shape_i]``.

    Used for the inference copy and for every training tower, so their weights are one.
    With ``network.memory`` the body's output goes through the LSTM (`trainers.tf.lstm`):
    ``B = S * sequence_length`` rows of ``S`` whole sequences, ``memory_in`` ``[S,
    memory_size]`` their initial memories, ``step_mask`` ``[B]`` (0 = padding) and, with
    discrete actions, ``prev_action`` ``[B, branches]`` int32 (the action taken at the
    previous step, 0 at an episode's first step) fed one-hot per branch into the LSTM.
    With ``reset`` ``[B]`` (packed sequences, `lstm_sequences`), ``memory_in`` is per row
    ``[B, memory_size]`` and a trajectory starting inside a sequence starts from its row's.

    ``squashed``: SAC's tanh-squashed Gaussian (see `Policy.squashed`); ``noise``
    ``[B, c]``: the continuous sample's standard-normal noise, fed (None: drawn in-graph).
    ``lstm_partner``: another network's LSTM stepped together with this one
    (`trainers.tf.lstm.LSTMPartner`; PPO's critic in the update). ``log_std_init``: the
    initial value of a non-squashed Gaussian's log std (used where the actor's variables
    are created: the policy). ``state_dependent``: PPO's ``use_sde`` (`Policy.state_dependent`:
    every copy is built with it); ``sde_noise`` ``[B, H, c]``: the acting rows' noise
    matrices (`trainers.tf.distributions.build_gaussian`). ``action_clip``: PPO's (what
    ``to_env`` divides by; `Policy.action_clip`), needed where actions go to an env.
    """
    with tf.variable_scope(POLICY_SCOPE, reuse=tf.AUTO_REUSE):
        encoding = build_body(obs, spec.observation_specs, network, normalizers, "encoder")
        action_spec = spec.action_spec
        memory_out = None
        if network.memory is not None:
            encoding, memory_out = recurrent_encoding(
                encoding, network, memory_in, sequence_length, step_mask,
                prev_action if action_spec.is_discrete else None, action_spec.discrete_branches,
                reset=reset, partner=lstm_partner,
            )
        cont = (
            build_gaussian(
                encoding, action_spec.continuous_size, squashed, noise, log_std_init,
                state_dependent=state_dependent, sde_noise=sde_noise, action_clip=action_clip,
            )
            if action_spec.is_continuous
            else None
        )
        disc = (
            build_multi_categorical(encoding, action_spec.discrete_branches, action_masks)
            if action_spec.is_discrete
            else None
        )
    return ActorTensors(encoding, cont, disc, memory_out)


def recurrent_encoding(
    encoding: tf.Tensor,
    network: NetworkSettings,
    memory_in: Optional[tf.Tensor],
    sequence_length: int,
    step_mask: Optional[tf.Tensor] = None,
    prev_action: Optional[tf.Tensor] = None,
    branches: Sequence[int] = (),
    whole_trajectory: bool = False,
    reset: Optional[tf.Tensor] = None,
    partner: Optional[LSTMPartner] = None,
) -> Tuple[tf.Tensor, tf.Tensor]:
    """The body's ``[S * L, hidden]`` encoding (+ one-hot previous actions) through the LSTM
    named ``lstm`` in the current scope: -> (``[S * L, memory_size // 2]``, ``[S, memory_size]``).

    ``whole_trajectory``: ``[T, hidden]`` rows of one trajectory from ``memory_in`` ``[1,
    memory_size]`` -> (``[T, memory_size // 2]``, ``[T, memory_size]`` memory after each step).
    ``reset``: packed sequences, ``memory_in`` per row (`lstm_sequences`).
    """
    if memory_in is None:
        raise ValueError("a recurrent network needs memory_in")
    if prev_action is not None:
        onehots = [tf.one_hot(prev_action[:, i], size, dtype=tf.float32) for i, size in enumerate(branches)]
        encoding = tf.concat([encoding] + onehots, axis=1)
    memory = network.memory
    assert memory is not None, "a recurrent network needs network_settings.memory"
    if whole_trajectory:
        return lstm_trajectory(encoding, memory_in, memory.memory_size, "lstm")
    return lstm_sequences(encoding, memory_in, sequence_length, memory.memory_size, "lstm", step_mask, reset, partner)


@dataclass
class ActionInfo:
    """Result of one batched inference call.

    Attributes:
        env_continuous: ``[N, c]`` float32 in [-1, 1] (what the env receives).
        raw_continuous: ``[N, c]`` float32 unclipped, unsquashed sample (what buffers store).
        discrete: ``[N, b]`` int32.
        log_probs: ``[N, c + b]`` float32 log-probability of the sampled action per
            continuous dimension and per discrete branch (their sum is the joint one).
        memory: ``[N, memory_size]`` the memory each agent acted *from* (recurrent only).
        prev_action: ``[N, branches]`` the previous actions fed (recurrent + discrete only).
    """

    env_continuous: np.ndarray
    raw_continuous: np.ndarray
    discrete: np.ndarray
    log_probs: np.ndarray
    memory: Optional[np.ndarray] = None
    prev_action: Optional[np.ndarray] = None


def is_squashed(settings: TrainerSettings) -> bool:
    """Whether the behavior's actor is the tanh-squashed Gaussian (SAC, as in ML-Agents)."""
    return settings.kind.squashed


class Actor(Protocol):
    """What the controller acts through (`Policy`, or `trainers.export.onnx_policy.OnnxPolicy`
    for ``--inference --model``)."""

    @property
    def use_recurrent(self) -> bool:
        """Whether it keeps a memory per agent (so agents need stable keys)."""

    def act(
        self,
        obs: Sequence[np.ndarray],
        action_masks: Optional[np.ndarray] = None,
        deterministic: bool = False,
        agent_keys: Optional[Sequence[Hashable]] = None,
    ) -> ActionInfo:
        """Actions for N agents: ``obs[i]`` ``[N, *shape_i]``, ``action_masks``
        ``[N, sum(branches)]`` float32 1 = allowed, N ``agent_keys``."""

    def forget_agents(self, keys: Sequence[Hashable]) -> None:
        """Drops what it keeps for agents whose episode ended."""

    def sync_acting_weights(self) -> None:
        """Threaded trainers: the trained weights become the acting ones (else a no-op)."""

    def close(self) -> None:
        """Releases its sessions."""


class Policy:
    """The actor of one behavior: graph, session, normalizers and batched inference."""

    def __init__(
        self,
        behavior_name: str,
        spec: BehaviorSpec,
        settings: TrainerSettings,
        behavior_graph: BehaviorGraph,
    ) -> None:
        network = settings.network_settings
        check_visual_sizes(spec.observation_specs, network.vis_encode_type)
        self.behavior_name = behavior_name
        self.spec = spec
        self.settings = settings
        #: SAC's actor: tanh-squashed Gaussian with a state-dependent log std. Every copy
        #: of the actor (towers, BC, export) is built with this flag.
        self.squashed = is_squashed(settings)
        self.behavior_graph = behavior_graph
        action_spec: ActionSpec = spec.action_spec
        with self.graph.as_default():
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
            # Recurrent inference: one step per agent from its memory (and previous action).
            self.memory_in: Optional[tf.Tensor] = None
            self.prev_action: Optional[tf.Tensor] = None
            if self.use_recurrent:
                self.memory_in = tf.placeholder(tf.float32, [None, self.memory_size], name=names.RECURRENT_IN)
                if action_spec.is_discrete:
                    self.prev_action = tf.placeholder(
                        tf.int32, [None, action_spec.discrete_size], name=names.PREV_ACTION
                    )
            hp = settings.hyperparameters
            # gSDE: each acting row's noise matrix [N, H, c], fed per agent (`_sde_noise_for`).
            self.sde_noise: Optional[tf.Tensor] = None
            if self.state_dependent:
                self.sde_noise = tf.placeholder(
                    tf.float32, [None, None, action_spec.continuous_size], name="sde_noise"
                )
            self.actor = build_actor(
                self.obs, self.action_masks, spec, network, self.normalizers,
                squashed=self.squashed, memory_in=self.memory_in, prev_action=self.prev_action,
                log_std_init=hp.log_std_init if isinstance(hp, PPOSettings) else 0.0,
                state_dependent=self.state_dependent, sde_noise=self.sde_noise, action_clip=self.action_clip,
            )
            self._build_outputs(action_spec)
            self._acting: Optional[_ActingCopy] = (
                _ActingCopy(
                    lambda: build_actor(
                        self.obs, self.action_masks, spec, network, self.normalizers,
                        memory_in=self.memory_in, prev_action=self.prev_action,
                        state_dependent=self.state_dependent, sde_noise=self.sde_noise,
                        action_clip=self.action_clip,
                    )
                )
                if settings.updates_in_thread
                else None
            )
        self._act: Optional[Callable[..., list]] = None
        self._act_deterministic: Optional[Callable[..., list]] = None
        self._update_normalization: Optional[FastCallable] = None
        self._empty: Dict[int, Tuple[np.ndarray, np.ndarray]] = {}
        # Per agent (any hashable key, e.g. (worker, agent id)): the memory after its last
        # action and that action's discrete part; absent = episode start (zeros).
        self._memories: Dict[Hashable, np.ndarray] = {}
        self._prev_actions: Dict[Hashable, np.ndarray] = {}
        # gSDE, per agent key: its noise matrix [H, c] and how many steps it has acted with it.
        self._sde: Dict[Hashable, List] = {}
        self._sde_rng = np.random.default_rng(behavior_graph.seed)
        self._sde_shape: Tuple[int, ...] = ()
        if self.state_dependent:
            self._sde_shape = (int(self.actor.encoding.shape[-1]), action_spec.continuous_size)

    # ------------------------------------------------------------------ gSDE

    @property
    def action_clip(self) -> float:
        """What a continuous action is clipped to and divided by on its way to the env: PPO's
        and POCA's ``action_clip``, else ML-Agents' 3 (SAC squashes with tanh instead)."""
        hp = self.settings.hyperparameters
        return hp.action_clip if isinstance(hp, PPOSettings) else CONTINUOUS_CLIP

    def to_env(self, raw: tf.Tensor) -> tf.Tensor:
        """``[B, c]`` raw continuous actions -> what the env receives, in [-1, 1] (the actor's
        mapping: ``action_clip``'s clip, or SAC's tanh); for graphs built on other inputs
        (the reward signals' features)."""
        gaussian = self.actor.continuous
        assert gaussian is not None, "to_env needs continuous actions"
        return gaussian.to_env(raw)

    @property
    def state_dependent(self) -> bool:
        """PPO's ``use_sde`` with continuous actions: state-dependent exploration noise."""
        hp = self.settings.hyperparameters
        return isinstance(hp, PPOSettings) and hp.use_sde and self.spec.action_spec.is_continuous

    def _sde_noise_for(self, n: int, agent_keys: Optional[Sequence[Hashable]]) -> np.ndarray:
        """``[n, H, c]``: each agent's noise matrix, a new one for an agent without one or
        whose matrix has acted ``sde_sample_freq`` steps (fresh ones for all without keys)."""
        if agent_keys is None or len(agent_keys) != n:
            return self._sde_rng.standard_normal((n,) + self._sde_shape, dtype=np.float32)
        hp = self.settings.hyperparameters
        assert isinstance(hp, PPOSettings)  # state_dependent is PPO's
        freq = hp.sde_sample_freq
        matrices = []
        for key in agent_keys:
            entry = self._sde.get(key)
            if entry is None or (freq > 0 and entry[1] >= freq):
                entry = self._sde[key] = [self._sde_rng.standard_normal(self._sde_shape, dtype=np.float32), 0]
            entry[1] += 1
            matrices.append(entry[0])
        return np.array(matrices)

    def resample_exploration(self) -> None:
        """gSDE: every agent draws a new noise matrix at its next step (after an update, as
        Stable-Baselines3 at each rollout's start). No-op otherwise."""
        self._sde.clear()

    # ------------------------------------------------------------------ memory

    @property
    def use_recurrent(self) -> bool:
        return self.settings.network_settings.memory is not None

    @property
    def memory_size(self) -> int:
        """``memory_size`` of the LSTM (0 without memory)."""
        memory = self.settings.network_settings.memory
        return memory.memory_size if memory is not None else 0

    @property
    def sequence_length(self) -> int:
        """Rows per training sequence (1 without memory)."""
        memory = self.settings.network_settings.memory
        return memory.sequence_length if memory is not None else 1

    def retrieve_memories(self, keys: Sequence[Hashable]) -> np.ndarray:
        """``[N, memory_size]``: each agent's current memory (zeros at episode start)."""
        zeros = np.zeros(self.memory_size, np.float32)
        if not keys:
            return np.zeros((0, self.memory_size), np.float32)
        # np.array of equal-shape rows: np.stack's result, at a third of its cost (per step).
        return np.array([self._memories.get(k, zeros) for k in keys])

    def retrieve_previous_actions(self, keys: Sequence[Hashable]) -> np.ndarray:
        """``[N, branches]`` int32: each agent's previous discrete action (zeros at episode start)."""
        zeros = np.zeros(self.spec.action_spec.discrete_size, np.int32)
        if not keys:
            return np.zeros((0, zeros.size), np.int32)
        return np.array([self._prev_actions.get(k, zeros) for k in keys])

    def forget_agents(self, keys: Sequence[Hashable]) -> None:
        """Drops the memories, previous actions (and gSDE noise) of agents whose episode ended."""
        for k in keys:
            self._memories.pop(k, None)
            self._prev_actions.pop(k, None)
            self._sde.pop(k, None)

    def _build_outputs(self, action_spec: ActionSpec) -> None:
        """Named inference outputs (ML-Agents 2.0 names) and trainer-internal fetches."""
        actor = self.actor
        # The contract's constants, as the export has them. Nothing reads them here, but they
        # stay: TF1 seeds each random op from the count of ops before it, so the critic's
        # initial weights depend on them.
        constants = names.contract_constants(
            action_spec.continuous_size, action_spec.discrete_branches, self.memory_size
        )
        tf.constant(constants[names.VERSION_NUMBER], name=names.VERSION_NUMBER)
        tf.constant(constants[names.MEMORY_SIZE], name=names.MEMORY_SIZE)
        self.memory_out = (
            tf.identity(actor.memory_out, name=names.RECURRENT_OUT) if actor.memory_out is not None else None
        )
        self.raw_continuous = self.env_continuous = self.deterministic_continuous = None
        self.discrete = self.deterministic_discrete = None
        if actor.continuous is not None:
            self.raw_continuous = tf.identity(actor.continuous.sample, name=names.RAW_CONTINUOUS_ACTIONS)
            self.env_continuous = tf.identity(
                actor.continuous.to_env(self.raw_continuous), name=names.CONTINUOUS_ACTIONS
            )
            tf.constant(constants[names.CONTINUOUS_ACTION_OUTPUT_SHAPE], name=names.CONTINUOUS_ACTION_OUTPUT_SHAPE)
            self.deterministic_continuous = tf.identity(
                actor.continuous.to_env(actor.continuous.mean), name=names.DETERMINISTIC_CONTINUOUS_ACTIONS
            )
        if actor.discrete is not None:
            self.discrete = tf.identity(actor.discrete.sample, name=names.DISCRETE_ACTIONS)
            tf.constant(constants[names.DISCRETE_ACTION_OUTPUT_SHAPE], name=names.DISCRETE_ACTION_OUTPUT_SHAPE)
            self.deterministic_discrete = tf.identity(
                actor.discrete.deterministic, name=names.DETERMINISTIC_DISCRETE_ACTIONS
            )
        self.log_probs = tf.identity(
            actor.log_prob_per_dim(self.raw_continuous, self.discrete), name=names.LOG_PROBS
        )
        self.entropy = tf.identity(actor.entropy(), name=names.ENTROPY)

    # ----------------------------------------------------------------- graph

    @property
    def graph(self) -> tf.Graph:
        """The behavior's graph (`BehaviorGraph`), which every module builds into."""
        return self.behavior_graph.graph

    @property
    def session(self) -> tf.Session:
        """Where inference, value estimates and checkpoints run."""
        return self.behavior_graph.session

    @property
    def update_session(self) -> tf.Session:
        """Where update runs go: `session`, or on a cluster the chief's server's."""
        return self.behavior_graph.update_session

    def close(self) -> None:
        self.behavior_graph.close()

    # ----------------------------------------------------------------- inference

    def _feed_list(self, deterministic: bool) -> List[tf.Tensor]:
        feeds = self.obs + ([self.action_masks] if self.action_masks is not None else [])
        if self.memory_in is not None:
            feeds.append(self.memory_in)
        if self.prev_action is not None:
            feeds.append(self.prev_action)
        if self.sde_noise is not None and not deterministic:
            feeds.append(self.sde_noise)
        return feeds

    def _make_act(self, deterministic: bool) -> Callable[..., list]:
        source: "Policy | _ActingCopy" = self._acting if self._acting is not None else self
        if deterministic:
            fetches = [source.deterministic_continuous, source.deterministic_discrete]
        else:
            fetches = [source.raw_continuous, source.env_continuous, source.discrete, source.log_probs]
        fetches.append(source.memory_out)
        present = [f for f in fetches if f is not None]
        run = FastCallable(self.session, present, self._feed_list(deterministic))

        def call(*feeds: np.ndarray) -> list:
            values = iter(run(*feeds))
            return [next(values) if f is not None else None for f in fetches]

        return call

    def act(
        self,
        obs: Sequence[np.ndarray],
        action_masks: Optional[np.ndarray] = None,
        deterministic: bool = False,
        agent_keys: Optional[Sequence[Hashable]] = None,
    ) -> ActionInfo:
        """One ``sess.run`` for all agents: ``obs[i]`` ``[N, *shape_i]`` -> actions for N agents.

        Args:
            obs: one float32 array per observation spec.
            action_masks: ``[N, sum(branches)]`` float32, 1 = allowed (all ones if None).
            deterministic: distribution modes instead of samples (for --inference).
            agent_keys: N agent keys (recurrent policies: whose memories to feed and keep;
                ``use_sde``: whose noise matrices; else ignored).
        """
        n = obs[0].shape[0]
        feeds = list(obs)
        if self.action_masks is not None:
            feeds.append(
                action_masks if action_masks is not None
                else np.ones((n, int(self.action_masks.shape[1])), np.float32)
            )
        memory = prev = None
        if self.use_recurrent:
            if agent_keys is None or len(agent_keys) != n:
                raise ValueError("a recurrent policy needs one agent key per row")
            memory = self.retrieve_memories(agent_keys)
            feeds.append(memory)
            if self.prev_action is not None:
                prev = self.retrieve_previous_actions(agent_keys)
                feeds.append(prev)
        if self.sde_noise is not None and not deterministic:
            feeds.append(self._sde_noise_for(n, agent_keys))
        empty_c, empty_d = self._empty_actions(n)
        if deterministic:
            if self._act_deterministic is None:
                self._act_deterministic = self._make_act(True)
            cont, disc, memory_out = self._act_deterministic(*feeds)
            cont = empty_c if cont is None else cont
            a = self.spec.action_spec
            logp_zeros = np.zeros((n, a.continuous_size + a.discrete_size), np.float32)
            info = ActionInfo(cont, cont, empty_d if disc is None else disc, logp_zeros)
        else:
            if self._act is None:
                self._act = self._make_act(False)
            raw, env, disc, logp, memory_out = self._act(*feeds)
            info = ActionInfo(
                empty_c if env is None else env,
                empty_c if raw is None else raw,
                empty_d if disc is None else disc,
                logp,
            )
        if memory is not None:
            assert agent_keys is not None  # checked above for recurrent policies
            info.memory, info.prev_action = memory, prev
            self._memories.update(zip(agent_keys, memory_out))
            if prev is not None:
                self._prev_actions.update(zip(agent_keys, info.discrete))
        return info

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

    def acting_view(self, source: "_ActingCopy") -> "Policy":
        """This policy acting through another copy of its actor (``source``, built on this
        policy's inputs, e.g. the self-play ghost of `trainers.ghost_actor`), with memories
        of its own: the same graph, session and feeds, the inference callables and the
        per-agent memories and previous actions its own."""
        view = copy.copy(self)
        view._acting = source
        view._act = view._act_deterministic = None
        view._empty, view._memories, view._prev_actions, view._sde = {}, {}, {}, {}
        return view

    def sync_acting_weights(self) -> None:
        """Threaded trainers: copies the trained actor into the acting copy, in one run.

        `act` reads only the acting copy, so an update running in another thread never
        changes the weights an inference call sees; this swap is the only moment they change.
        No-op without ``threaded``.
        """
        if self._acting is not None:
            self.session.run(self._acting.sync_op)

    def update_normalization(self, obs: Sequence[np.ndarray]) -> None:
        """Merges a trajectory's vector observations (each ``[T, size]``) into the running
        statistics, in one run: a `FastCallable`, as every per-trajectory and per-step run
        (``Session.run`` with a feed dict costs several times more: README, "Figures behind
        choices in the code")."""
        present = [(n, o) for n, o in zip(self.normalizers, obs) if n is not None]
        if not present:
            return
        if self._update_normalization is None:
            self._update_normalization = FastCallable(
                self.session, [], [n.update_input for n, _ in present], [n.update_op for n, _ in present]
            )
        self._update_normalization(*(o for _, o in present))

    @property
    def normalize(self) -> bool:
        return any(n is not None for n in self.normalizers)

    def set_step(self, step: int) -> None:
        """Writes the trainer's step into the graph (saved with checkpoints)."""
        self.behavior_graph.set_step(step)

    def get_step(self) -> int:
        return self.behavior_graph.get_step()


class _ActingCopy:
    """A second actor (``acting/policy/...``) with its own weights, for threaded trainers.

    It reads the same observation placeholders and normalizers as the policy (normalizer
    statistics only change between updates; see `trainers.loop.threaded`). Its variables are
    local (not saved in checkpoints, not trainable, not exported: export freezes the named
    outputs of the policy itself); ``sync_op`` assigns every one from its ``policy/...``
    twin in one group, which also initialises them.

    The self-play ghost (`trainers.ghost_actor`) is another such copy, under its own
    ``scope``, with normalizers of its own and without ``sync_op`` (snapshots are assigned).
    """

    def __init__(self, build: Callable[[], ActorTensors], scope: str = ACTING_SCOPE, sync: bool = True) -> None:
        """``build``: builds the actor (`build_actor` on the policy's inputs) in the current
        scope; ``scope``: where its variables live; ``sync``: build ``sync_op``."""

        def local_getter(getter: Callable[..., tf.Variable], name: str, *args: object, **kwargs: object) -> tf.Variable:
            kwargs["trainable"] = False
            kwargs["collections"] = [tf.GraphKeys.LOCAL_VARIABLES]
            return getter(name, *args, **kwargs)

        with tf.variable_scope(scope, custom_getter=local_getter):
            actor = build()
        prefix = scope + "/"
        #: The copy's variables; each one's twin is named without ``prefix``.
        self.variables: List[tf.Variable] = [v for v in tf.local_variables() if v.op.name.startswith(prefix)]
        if sync:
            sources = {v.op.name: v for v in tf.global_variables()}
            copies = self.variables
            self.sync_op = tf.group(*[c.assign(sources[c.op.name[len(prefix):]]) for c in copies], name="sync_acting")
        self.raw_continuous = self.env_continuous = self.deterministic_continuous = None
        self.discrete = self.deterministic_discrete = None
        if actor.continuous is not None:
            self.raw_continuous = actor.continuous.sample
            self.env_continuous = actor.continuous.to_env(self.raw_continuous)
            self.deterministic_continuous = actor.continuous.to_env(actor.continuous.mean)
        if actor.discrete is not None:
            self.discrete = actor.discrete.sample
            self.deterministic_discrete = actor.discrete.deterministic
        self.log_probs = actor.log_prob_per_dim(self.raw_continuous, self.discrete)
        self.memory_out = actor.memory_out  # None without memory
