"""The settings: frozen dataclasses that validate themselves in ``__post_init__``, and the
tables of trainer types, hyperparameter classes and reward signals. A behavior's settings
are here; the run's environment, engine, checkpoint, device and cluster settings are in
`trainers.config.run`; `RunOptions` joins them."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from typing import Any, Dict, Literal, Mapping, Optional, Tuple, Type, Union, get_args

from trainers.config._fields import (
    _InvalidField,
    _check_bool,
    _check_choice,
    _check_instance,
    _check_int,
    _check_number,
    _check_str,
    _describe,
    _is_int,
    _suggestion,
)
from trainers.config.environment_parameters import EnvironmentParameterSettings, check_environment_parameters
from trainers.config.run import (
    CheckpointSettings,
    ClusterSettings,
    DeviceSettings,
    EngineSettings,
    EnvSettings,
)
from trainers.config.limits import (
    MAX_BODY_WEIGHTS,
    MAX_EVALUATION_EPISODES,
    MAX_SELF_PLAY_WINDOW,
    MAX_MEMORY_SIZE,
    MAX_NUM_LAYERS,
    MAX_SEQUENCE_LENGTH,
    _check_at_most,
    _check_buffer_size,
    _check_hidden_units,
)


TrainerType = Literal["ppo", "sac", "poca"]
ScheduleType = Literal["linear", "constant"]
EncoderType = Literal["simple", "nature_cnn", "resnet", "resnet_tf", "match3", "fully_connected"]
ActivationType = Literal["swish", "tanh", "relu"]
AdvantageNormalization = Literal["buffer", "minibatch", "none"]
AdamEpsilonPlacement = Literal["tf", "torch"]

TRAINER_TYPES: Tuple[str, ...] = get_args(TrainerType)
SCHEDULE_TYPES: Tuple[str, ...] = get_args(ScheduleType)
ENCODER_TYPES: Tuple[str, ...] = get_args(EncoderType)
ACTIVATION_TYPES: Tuple[str, ...] = get_args(ActivationType)
ADVANTAGE_NORMALIZATIONS: Tuple[str, ...] = get_args(AdvantageNormalization)
ADAM_EPSILON_PLACEMENTS: Tuple[str, ...] = get_args(AdamEpsilonPlacement)


# --------------------------------------------------------------------------------------
# The settings.
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PPOSettings:
    """PPO hyperparameters (``hyperparameters:`` when ``trainer_type: ppo``)."""

    batch_size: int = 1024
    """Experiences per minibatch (one gradient step); at most buffer_size."""
    buffer_size: int = 10240
    """Experiences collected before an update; each update makes num_epoch passes."""
    learning_rate: float = 3e-4
    """Initial Adam learning rate (> 0)."""
    learning_rate_schedule: ScheduleType = "linear"
    """linear: decays to 1e-10 over max_steps; constant: fixed."""
    beta: float = 5e-3
    """Entropy bonus coefficient (>= 0); decays to 1e-5 when its schedule is linear."""
    epsilon: float = 0.2
    """Clip range of the policy ratio, in (0, 1); decays to 0.1 when linear."""
    lambd: float = 0.95
    """GAE lambda, in [0, 1]."""
    num_epoch: int = 3
    """Passes over the update buffer per update."""
    beta_schedule: Optional[ScheduleType] = None
    """Schedule of beta; None: learning_rate_schedule (see resolved_beta_schedule)."""
    epsilon_schedule: Optional[ScheduleType] = None
    """Schedule of epsilon; None: learning_rate_schedule (see resolved_epsilon_schedule)."""
    shared_critic: bool = False
    """True: actor and critic share the network body; False: a separate value network."""
    clip_value_loss: bool = True
    """True (ML-Agents): the value loss is clipped around the old estimates by epsilon;
    False (Stable-Baselines3's default): plain squared error. Clipping by 0.2 slows the
    critic where returns are large (CartPole: up to ~100)."""
    # --- Beyond ML-Agents (Stable-Baselines3 / rl-zoo knobs); the defaults are ML-Agents'.
    beta_final: float = 1e-5
    """Where a linear beta schedule ends at max_steps (ML-Agents: 1e-5)."""
    epsilon_final: float = 0.1
    """Where a linear epsilon schedule ends at max_steps (ML-Agents: 0.1; the zoo's
    ``lin_0.2`` clip range: 0)."""
    max_grad_norm: Optional[float] = None
    """Clip each update's gradient (policy and critic together) to this global norm; None:
    no clipping (ML-Agents). Stable-Baselines3's PPO: 0.5."""
    advantage_normalization: AdvantageNormalization = "buffer"
    """buffer (ML-Agents): over the whole update buffer; minibatch (Stable-Baselines3):
    over each minibatch, with torch's unbiased std as SB3; none."""
    action_clip: float = 3.0
    """Continuous actions reach the environment as ``clip(a, -action_clip, action_clip) /
    action_clip``, in [-1, 1] (ML-Agents: 3, fixed). A Gymnasium env's Box then scales [-1, 1]
    to its bounds, so with ``action_clip`` equal to the bounds' half width (Pendulum-v1: 2) a
    raw action reaches the env in the env's own units, clipped to its bounds: Stable-Baselines3's
    mapping, where ``log_std_init`` means what the zoo's does. The mean's last layer then works
    in those units, which changes how fast Adam moves it (README, Benchmarks)."""
    log_std_init: float = 0.0
    """Initial log standard deviation of continuous actions (ML-Agents and
    Stable-Baselines3: 0, a standard deviation of 1; the zoo sets e.g. -2). With
    ``use_sde``: the initial value of every entry of the noise matrix's log std."""
    use_sde: bool = False
    """Generalized state-dependent exploration (gSDE, Raffin et al. 2021; Stable-Baselines3's
    ``use_sde``) for continuous actions: the noise is ``z @ W`` for the actor's last hidden
    features ``z`` (gradient stopped) and a matrix ``W ~ N(0, exp(log_std)^2)`` per agent,
    ``log_std`` a trainable ``[hidden, c]`` matrix; the action's distribution is
    ``N(mean, z^2 @ exp(log_std)^2 + 1e-6)``. Each agent keeps its ``W`` for
    ``sde_sample_freq`` of its steps; off in ML-Agents."""
    sde_sample_freq: int = -1
    """With ``use_sde``: each agent draws a new noise matrix every this many of its steps;
    -1 (Stable-Baselines3's default): only after each update (SB3: at each rollout's
    start). An agent whose episode ended draws a new one either way."""
    normalize_reward: bool = False
    """Scale the environment's reward by the running standard deviation of its discounted
    return and clip it to [-10, 10], as Stable-Baselines3's ``VecNormalize(norm_reward=True)``
    (the return uses the extrinsic signal's gamma and restarts with each episode). The
    statistics are saved with checkpoints. Off in ML-Agents."""
    pack_sequences: bool = False
    """Recurrent policies: False (ML-Agents): each trajectory fills whole sequences of
    ``sequence_length`` rows, its last one padded, and ``buffer_size`` and ``batch_size``
    count the padding rows, as ML-Agents counts them. True: trajectories are packed back
    to back, only the buffer's last sequence is padded and both count real steps: less
    computation per step with episodes shorter than a sequence, but each minibatch then
    holds several episodes, so there are fewer gradient steps per step collected
    (README, "Memory (LSTM)")."""
    adam_epsilon: float = 1e-5
    """Adam's epsilon for the policy and critic (Stable-Baselines3's PPO: 1e-5; ML-Agents'
    torch trainers: torch's default, 1e-8). 1e-5 is our default because it learned better
    here (with ``adam_epsilon_placement: tf``): GAIL + BC on Simple
    (config/ppo/Simple_gail.yaml, seeds 1-6) first passed a mean return of 0.9 at steps
    750/500/750/500/1000/500 with 1e-5 and 1000/500/>1000/500/1000/500 with 1e-8; with a
    high learning rate, 1e-8 turns near-zero gradients into full-size steps."""
    adam_epsilon_placement: AdamEpsilonPlacement = "tf"
    """Where epsilon joins Adam's step. tf (TF1's ``AdamOptimizer``): on the root of the
    raw second moment, ``lr sqrt(1 - b2^t) / (1 - b1^t) m / (sqrt(v) + eps)``; torch
    (``torch.optim.Adam``: Stable-Baselines3, ML-Agents' torch trainers): on the root of the
    bias-corrected one, ``lr m_hat / (sqrt(v_hat) + eps)``. They differ while gradients are
    near epsilon's size: at the first step TF's epsilon acts 32x larger, 2x until about
    step 290 (README, "Adam's epsilon")."""
    update_when_full: bool = False
    """False (ML-Agents): update once the buffer holds *more* than ``buffer_size`` rows.
    True: once it holds ``buffer_size`` rows, as Stable-Baselines3 updates after each
    rollout of ``n_steps x n_envs`` rows: with ``time_horizon x agents == buffer_size``
    the first cut of every agent fills the buffer exactly and updates at once, where
    ML-Agents' rule waits for the next trajectories (on Acrobot-v1 the first update
    comes at 8000 rows instead of 4096)."""

    def __post_init__(self) -> None:
        _check_int(self, "batch_size", 1)
        _check_int(self, "buffer_size", 1)
        _check_buffer_size(self)
        _check_number(self, "learning_rate", 0.0, low_open=True)
        _check_choice(self, "learning_rate_schedule", SCHEDULE_TYPES)
        _check_number(self, "beta", 0.0)
        _check_number(self, "epsilon", 0.0, 1.0, low_open=True, high_open=True)
        _check_number(self, "lambd", 0.0, 1.0)
        _check_int(self, "num_epoch", 1)
        _check_choice(self, "beta_schedule", SCHEDULE_TYPES, optional=True)
        _check_choice(self, "epsilon_schedule", SCHEDULE_TYPES, optional=True)
        _check_bool(self, "shared_critic")
        _check_bool(self, "clip_value_loss")
        _check_number(self, "beta_final", 0.0)
        _check_number(self, "epsilon_final", 0.0, 1.0, high_open=True)
        _check_number(self, "max_grad_norm", 0.0, low_open=True, optional=True)
        _check_choice(self, "advantage_normalization", ADVANTAGE_NORMALIZATIONS)
        _check_number(self, "log_std_init", -20.0, 2.0)
        _check_number(self, "action_clip", 0.0, low_open=True)
        _check_bool(self, "normalize_reward")
        _check_bool(self, "pack_sequences")
        _check_bool(self, "update_when_full")
        _check_number(self, "adam_epsilon", 0.0, 1.0, low_open=True)
        _check_choice(self, "adam_epsilon_placement", ADAM_EPSILON_PLACEMENTS)
        _check_bool(self, "use_sde")
        _check_int(self, "sde_sample_freq", -1)
        if self.sde_sample_freq == 0:
            raise _InvalidField("sde_sample_freq", "expected -1 (after each update) or an integer >= 1, got 0")
        if self.batch_size > self.buffer_size:
            raise _InvalidField(
                "batch_size",
                f"must not exceed buffer_size ({self.buffer_size}), got {self.batch_size}",
            )

    @property
    def resolved_beta_schedule(self) -> str:
        """The schedule beta follows: beta_schedule, else learning_rate_schedule."""
        return self.beta_schedule or self.learning_rate_schedule

    @property
    def resolved_epsilon_schedule(self) -> str:
        """The schedule epsilon follows: epsilon_schedule, else learning_rate_schedule."""
        return self.epsilon_schedule or self.learning_rate_schedule


@dataclass(frozen=True)
class SACSettings:
    """SAC hyperparameters (``hyperparameters:`` when ``trainer_type: sac``)."""

    batch_size: int = 128
    """Experiences per gradient step, sampled from the replay buffer; at most buffer_size."""
    buffer_size: int = 50000
    """Capacity of the replay buffer, in experiences."""
    learning_rate: float = 3e-4
    """Initial Adam learning rate (> 0)."""
    learning_rate_schedule: ScheduleType = "constant"
    """linear: decays to 1e-10 over max_steps; constant: fixed."""
    buffer_init_steps: int = 0
    """Random-action experiences collected before the first update (>= 0)."""
    tau: float = 0.005
    """Soft target-network update rate, in (0, 1]."""
    steps_per_update: float = 1.0
    """Agent steps per gradient step (> 0)."""
    init_entcoef: float = 1.0
    """Initial entropy coefficient (> 0)."""
    save_replay_buffer: bool = False
    """Save the replay buffer with checkpoints and load it on resume."""
    reward_signal_steps_per_update: Optional[float] = None
    """Agent steps per reward-signal update; None: steps_per_update."""

    def __post_init__(self) -> None:
        _check_int(self, "batch_size", 1)
        _check_int(self, "buffer_size", 1)
        _check_buffer_size(self)
        _check_number(self, "learning_rate", 0.0, low_open=True)
        _check_choice(self, "learning_rate_schedule", SCHEDULE_TYPES)
        _check_int(self, "buffer_init_steps", 0)
        _check_number(self, "tau", 0.0, 1.0, low_open=True)
        _check_number(self, "steps_per_update", 0.0, low_open=True)
        _check_number(self, "init_entcoef", 0.0, low_open=True)
        _check_bool(self, "save_replay_buffer")
        _check_number(self, "reward_signal_steps_per_update", 0.0, low_open=True, optional=True)
        if self.batch_size > self.buffer_size:
            raise _InvalidField(
                "batch_size",
                f"must not exceed buffer_size ({self.buffer_size}), got {self.batch_size}",
            )

    @property
    def resolved_reward_signal_steps_per_update(self) -> float:
        """reward_signal_steps_per_update, else steps_per_update."""
        if self.reward_signal_steps_per_update is None:
            return self.steps_per_update
        return self.reward_signal_steps_per_update


@dataclass(frozen=True)
class POCASettings(PPOSettings):
    """MA-POCA hyperparameters (``trainer_type: poca``): PPO's keys and defaults, as
    ML-Agents' ``POCASettings`` (trainers/poca/). Refused: ``shared_critic`` (POCA's
    critic is its own centralised network over the group), ``normalize_reward`` and ``use_sde``."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.shared_critic:
            raise _InvalidField(
                "shared_critic", "true is not supported with trainer_type poca (its centralised critic has its own network)"
            )
        if self.normalize_reward:
            raise _InvalidField("normalize_reward", "true is not supported with trainer_type poca")
        if self.use_sde:
            raise _InvalidField("use_sde", "true is not supported with trainer_type poca")


HyperparamSettings = Union[PPOSettings, SACSettings, POCASettings]


@dataclass(frozen=True)
class TrainerKind:
    """What a trainer type is and supports: the one table the loader, the policy and the
    run read (a combination a trainer cannot run is refused when the config loads)."""

    hyperparameters: Type[Any]
    """Its ``hyperparameters:`` dataclass."""
    recurrent: bool
    """Supports ``network_settings.memory`` (an LSTM policy and critic)."""
    cluster: bool
    """Supports ``cluster_settings`` (towers on other machines' devices)."""
    threaded_updates: bool
    """Honours ``threaded: true`` (its updates can run beside the env steps)."""
    squashed: bool
    """Its continuous actor is the tanh-squashed Gaussian (ML-Agents' SAC)."""
    self_play: bool = False
    """Accepts ``self_play`` (ML-Agents' ghost trainer wraps PPO and SAC alike)."""


#: trainer_type -> its capabilities.
TRAINER_KINDS: Dict[str, TrainerKind] = {
    "ppo": TrainerKind(PPOSettings, recurrent=True, cluster=True, threaded_updates=True, squashed=False, self_play=True),
    # Updates run every few env steps, so no thread. Recurrent: sequences in the replay
    # buffer (trainers/sac/).
    "sac": TrainerKind(SACSettings, recurrent=True, cluster=False, threaded_updates=False, squashed=True, self_play=True),
    # MA-POCA (trainers/poca/): updates between env steps. Recurrent: padded sequences
    # only (pack_sequences refused in TrainerSettings).
    "poca": TrainerKind(POCASettings, recurrent=True, cluster=False, threaded_updates=False, squashed=False, self_play=True),
}
HYPERPARAMETER_TYPES: Dict[str, Type[Any]] = {name: kind.hyperparameters for name, kind in TRAINER_KINDS.items()}


def cluster_refusal(trainer_type: str) -> str:
    """Why a trainer type without cluster support cannot run with ``cluster_settings``."""
    supported = ", ".join(n for n, k in TRAINER_KINDS.items() if k.cluster)
    return f"{trainer_type} runs on local devices only; cluster_settings (--cluster) is supported for {supported}"


@dataclass(frozen=True)
class MemorySettings:
    """LSTM memory (``network_settings.memory``); absent means no memory."""

    memory_size: int = 128
    """Size of the memory vector, concat(c, h): even and > 0."""
    sequence_length: int = 64
    """Steps per training sequence (> 0)."""

    def __post_init__(self) -> None:
        _check_int(self, "memory_size")
        if self.memory_size <= 0 or self.memory_size % 2:
            raise _InvalidField(
                "memory_size", f"expected an even integer >= 2, got {self.memory_size}"
            )
        _check_at_most(
            self, "memory_size", MAX_MEMORY_SIZE, "floats", f"an LSTM of {MAX_MEMORY_SIZE // 2} units"
        )
        _check_int(self, "sequence_length", 1)
        _check_at_most(
            self, "sequence_length", MAX_SEQUENCE_LENGTH, "steps",
            "the LSTM is unrolled into the graph step by step; 1024 steps take ~1.5 minutes to build",
        )


@dataclass(frozen=True)
class NetworkSettings:
    """Network shape (``network_settings:``)."""

    normalize: bool = False
    """Normalise vector observations with running mean and variance."""
    hidden_units: int = 128
    """Units per hidden layer (> 0)."""
    num_layers: int = 2
    """Hidden layers after the encoders (> 0)."""
    vis_encode_type: EncoderType = "simple"
    """Visual encoder: simple, nature_cnn, resnet (Release 22's), resnet_tf (the TF-era ML-Agents
    ResNet, trainer-learn's ``resnet`` before this became R22's), match3 or fully_connected."""
    memory: Optional[MemorySettings] = None
    """LSTM settings; None: a feed-forward network."""
    activation: ActivationType = "swish"
    """Hidden-layer activation: swish, tanh or relu."""

    def __post_init__(self) -> None:
        _check_bool(self, "normalize")
        _check_int(self, "hidden_units", 1)
        _check_hidden_units(self, "hidden_units")
        _check_int(self, "num_layers", 1)
        _check_at_most(
            self, "num_layers", MAX_NUM_LAYERS, "layers",
            "every layer is built into the graph; 64 take ~16 s to build",
        )
        weights = self.num_layers * self.hidden_units**2
        if weights > MAX_BODY_WEIGHTS:
            raise _InvalidField(
                "num_layers",
                f"{self.num_layers} layers of {self.hidden_units} units are {weights} weights; "
                f"expected at most {MAX_BODY_WEIGHTS} (1 GiB of float32) per network",
            )
        _check_choice(self, "vis_encode_type", ENCODER_TYPES)
        _check_instance(self, "memory", MemorySettings, optional=True)
        _check_choice(self, "activation", ACTIVATION_TYPES)


@dataclass(frozen=True)
class RewardSignalSettings:
    """Settings every reward signal has (``reward_signals.<name>``)."""

    strength: float = 1.0
    """Scale of the signal's reward (>= 0)."""
    gamma: float = 0.99
    """Discount factor of the signal's value head, in [0, 1)."""

    def __post_init__(self) -> None:
        _check_number(self, "strength", 0.0)
        _check_number(self, "gamma", 0.0, 1.0, high_open=True)


@dataclass(frozen=True)
class ExtrinsicSettings(RewardSignalSettings):
    """The environment's reward (``reward_signals.extrinsic``)."""


@dataclass(frozen=True)
class CuriositySettings(RewardSignalSettings):
    """Intrinsic curiosity module (``reward_signals.curiosity``)."""

    encoding_size: int = 64
    """Size of the learned observation encoding (> 0); unused with network_settings."""
    learning_rate: float = 3e-4
    """Learning rate of the forward and inverse models (> 0)."""
    network_settings: Optional[NetworkSettings] = None
    """ML-Agents 2.0: the encoder's own network (hidden_units = encoding size, num_layers,
    normalize, vis_encode_type); None: encoding_size units, 2 layers, the policy's
    normalisation (the TF era)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_int(self, "encoding_size", 1)
        _check_hidden_units(self, "encoding_size")
        _check_number(self, "learning_rate", 0.0, low_open=True)
        _check_signal_network(self)


@dataclass(frozen=True)
class GAILSettings(RewardSignalSettings):
    """Generative adversarial imitation (``reward_signals.gail``)."""

    demo_path: str = field(kw_only=True)
    """The .demo file (or a directory of them) with the expert's demonstrations. Required."""
    encoding_size: int = 64
    """Hidden units of the discriminator (> 0)."""
    learning_rate: float = 3e-4
    """Learning rate of the discriminator (> 0)."""
    use_actions: bool = False
    """Discriminate on observations and actions (True) or observations only (False)."""
    use_vail: bool = False
    """Variational bottleneck in the discriminator (VAIL)."""
    network_settings: Optional[NetworkSettings] = None
    """ML-Agents 2.0: the discriminator's own network (hidden_units, num_layers, normalize,
    vis_encode_type); None: encoding_size units, 2 layers, the policy's normalisation
    (the TF era)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_str(self, "demo_path")
        _check_int(self, "encoding_size", 1)
        _check_hidden_units(self, "encoding_size")
        _check_number(self, "learning_rate", 0.0, low_open=True)
        _check_bool(self, "use_actions")
        _check_bool(self, "use_vail")
        _check_signal_network(self)


@dataclass(frozen=True)
class RNDSettings(RewardSignalSettings):
    """Random network distillation (``reward_signals.rnd``, ML-Agents 2.0)."""

    learning_rate: float = 1e-4
    """Learning rate of the predictor network (> 0)."""
    encoding_size: Optional[int] = None
    """Deprecated in ML-Agents: the networks' hidden units when network_settings is absent."""
    network_settings: Optional[NetworkSettings] = None
    """The target's and the predictor's network (hidden_units = the encoding compared,
    num_layers, normalize, vis_encode_type); None: ML-Agents' default network (128 units,
    2 layers, raw observations), or encoding_size units."""

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_int(self, "encoding_size", 1, optional=True)
        if self.encoding_size is not None:
            _check_hidden_units(self, "encoding_size")
        _check_number(self, "learning_rate", 0.0, low_open=True)
        _check_signal_network(self)


def _check_signal_network(signal: Any) -> None:
    _check_instance(signal, "network_settings", NetworkSettings, optional=True)
    if signal.network_settings is not None and signal.network_settings.memory is not None:
        raise _InvalidField(
            "network_settings.memory", "not supported in a reward signal's network (no LSTM there)"
        )


REWARD_SIGNAL_TYPES: Dict[str, Type[RewardSignalSettings]] = {
    "extrinsic": ExtrinsicSettings,
    "curiosity": CuriositySettings,
    "gail": GAILSettings,
    "rnd": RNDSettings,
}
"""Allowed ``reward_signals`` names and their settings classes."""


@dataclass(frozen=True)
class BehavioralCloningSettings:
    """Behavioral cloning from demonstrations (``behavioral_cloning:``, flat ``pretraining:``)."""

    demo_path: str
    """The .demo file (or a directory of them). Required."""
    strength: float = 1.0
    """BC learning rate relative to the policy's (>= 0)."""
    steps: int = 0
    """Agent steps over which the BC learning rate decays to 0; 0: constant."""
    batch_size: Optional[int] = None
    """Demo experiences per BC minibatch; None: the trainer's batch_size."""
    num_epoch: Optional[int] = None
    """Passes over the sampled demos per update; None: the trainer's num_epoch."""
    samples_per_update: int = 0
    """Demo experiences sampled per update; 0: the whole demo buffer."""

    def __post_init__(self) -> None:
        _check_str(self, "demo_path")
        _check_number(self, "strength", 0.0)
        _check_int(self, "steps", 0)
        _check_int(self, "batch_size", 1, optional=True)
        _check_int(self, "num_epoch", 1, optional=True)
        _check_int(self, "samples_per_update", 0)


@dataclass(frozen=True)
class EvaluationSettings:
    """Deterministic evaluation and the best model (``evaluation:``); absent: none.

    Every ``interval`` agent steps of training, the policy's mode (no sampling) plays
    ``episodes`` episodes on an env instance of its own (`trainers.loop.evaluation`); the
    mean return is ``Environment/Evaluation Reward``, and the best one so far keeps its
    model (``<Behavior>-best.onnx``/``.pb``) and checkpoint (``checkpoint-best``). Beyond
    ML-Agents (Stable-Baselines3's ``EvalCallback``, whose defaults these are)."""

    interval: int = 10000
    """Agent steps between evaluations (> 0)."""
    episodes: int = 5
    """Episodes per evaluation (> 0, at most MAX_EVALUATION_EPISODES)."""

    def __post_init__(self) -> None:
        _check_int(self, "interval", 1)
        _check_int(self, "episodes", 1)
        _check_at_most(
            self, "episodes", MAX_EVALUATION_EPISODES, "episodes",
            "training waits while an evaluation plays them, one env, one after another",
        )


@dataclass(frozen=True)
class SelfPlaySettings:
    """Self-play against past snapshots (``self_play:``; ML-Agents' ghost trainer); absent:
    none. Teams come from the environment's ``Name?team=N`` behavior ids; one team learns
    while the others play snapshots (`trainers.loop.self_play`). ML-Agents' defaults
    (its code's: its docs say swap_steps 10000, its code 2000)."""

    save_steps: int = 20000
    """Trainer steps (the learning team's) between snapshots of the policy (> 0)."""
    team_change: Optional[int] = None
    """Trainer steps before the learning team changes (> 0); None: 5 x save_steps."""
    swap_steps: int = 2000
    """Ghost steps (the other teams') between opponent swaps (> 0)."""
    window: int = 10
    """Snapshots kept to draw opponents from (> 0)."""
    play_against_latest_model_ratio: float = 0.5
    """Probability that a swap picks the latest policy instead of a past snapshot, in [0, 1]."""
    initial_elo: float = 1200.0
    """ELO rating of the initial policy (``Self-play/ELO``)."""

    def __post_init__(self) -> None:
        _check_int(self, "save_steps", 1)
        if self.team_change is None:
            # ML-Agents' default, resolved here so that configuration.yaml shows it.
            object.__setattr__(self, "team_change", 5 * self.save_steps if _is_int(self.save_steps) else None)
        _check_int(self, "team_change", 1)
        _check_int(self, "swap_steps", 1)
        _check_int(self, "window", 1)
        _check_at_most(
            self, "window", MAX_SELF_PLAY_WINDOW, "snapshots", "each is a copy of the actor's weights in memory"
        )
        _check_number(self, "play_against_latest_model_ratio", 0.0, 1.0)
        _check_number(self, "initial_elo")


def self_play_refusal(trainer_type: str) -> str:
    """Why a trainer type without self-play support cannot have ``self_play``."""
    supported = ", ".join(n for n, k in TRAINER_KINDS.items() if k.self_play)
    return f"not supported for trainer_type {trainer_type} (self-play is supported for {supported})"


def _default_reward_signals() -> Dict[str, RewardSignalSettings]:
    return {"extrinsic": ExtrinsicSettings()}


@dataclass(frozen=True)
class TrainerSettings:
    """Everything about training one behavior (one ``behaviors.<name>`` section)."""

    trainer_type: TrainerType = "ppo"
    """ppo, sac or poca."""
    hyperparameters: HyperparamSettings = field(default_factory=PPOSettings)
    """PPOSettings for ppo, SACSettings for sac, POCASettings for poca; left at the default:
    the trainer type's."""
    network_settings: NetworkSettings = field(default_factory=NetworkSettings)
    """Network shape, encoders and memory."""
    reward_signals: Mapping[str, RewardSignalSettings] = field(
        default_factory=_default_reward_signals
    )
    """Ordered name -> settings; names from REWARD_SIGNAL_TYPES; at least one."""
    behavioral_cloning: Optional[BehavioralCloningSettings] = None
    """Behavioral cloning; None: off."""
    keep_checkpoints: int = 5
    """Checkpoints kept on disk; older ones are deleted (>= 1)."""
    checkpoint_interval: int = 500000
    """Agent steps between checkpoints (> 0)."""
    max_steps: int = 500000
    """Agent steps to train for (>= 0; 0 is allowed for inference)."""
    time_horizon: int = 64
    """Steps per agent before a trajectory is cut and sent to the trainer (> 0)."""
    rollout_cuts: bool = False
    """False (ML-Agents): an agent's trajectory is cut ``time_horizon`` steps after it
    started (an episode's start or the last cut). True (Stable-Baselines3's rollouts of
    ``n_steps``): every agent of an env worker is cut at every ``time_horizon``-th env step
    of that worker, counted from its first step and not restarted by episode ends, so all
    agents' cuts line up; an episode's end still ends its trajectory. With
    ``time_horizon x agents == buffer_size`` and ``hyperparameters.update_when_full`` each
    update then takes exactly ``buffer_size`` rows, as SB3's ``n_steps x n_envs``."""
    summary_freq: int = 50000
    """Agent steps between summaries (console, TensorBoard, CSV) (> 0)."""
    init_path: Optional[str] = None
    """Checkpoint to initialise this behavior's weights from; None: fresh weights."""
    threaded: bool = False
    """Update in a thread while the envs keep stepping with the previous weights (PPO;
    trainers/threaded.py); with several env workers they also step out of lockstep
    (trainers/controller.py). False (default): updates stop the envs, workers step in
    lockstep, runs are reproducible."""
    evaluation: Optional[EvaluationSettings] = None
    """Deterministic evaluation on an env of its own every ``interval`` steps, keeping the
    best model; None: off (beyond ML-Agents)."""
    self_play: Optional[SelfPlaySettings] = None
    """Self-play (ML-Agents' ghost trainer) between the teams of ``Name?team=N``; None: off."""

    @property
    def kind(self) -> TrainerKind:
        """The trainer type's capabilities."""
        return TRAINER_KINDS[self.trainer_type]

    @property
    def updates_in_thread(self) -> bool:
        """``threaded`` where it is honoured: PPO only (SAC updates between env steps)."""
        return self.threaded and self.kind.threaded_updates

    def __post_init__(self) -> None:
        _check_choice(self, "trainer_type", TRAINER_TYPES)
        expected = HYPERPARAMETER_TYPES[self.trainer_type]
        if self.trainer_type == "sac" and self.hyperparameters == PPOSettings():
            # The field's default is PPO's; a SAC trainer left at the default gets SAC's.
            object.__setattr__(self, "hyperparameters", SACSettings())
        if self.trainer_type == "poca" and type(self.hyperparameters) is PPOSettings:
            # PPO's keys and values are POCA's: the same settings, as POCA's class.
            values = {f.name: getattr(self.hyperparameters, f.name) for f in fields(PPOSettings)}
            object.__setattr__(self, "hyperparameters", POCASettings(**values))
        if not isinstance(self.hyperparameters, expected):
            raise _InvalidField(
                "hyperparameters",
                f"expected {expected.__name__} for trainer_type {self.trainer_type}, "
                f"got {type(self.hyperparameters).__name__}",
            )
        _check_instance(self, "network_settings", NetworkSettings)
        if self.network_settings.memory is not None and not self.kind.recurrent:
            raise _InvalidField(
                "network_settings.memory",
                f"recurrent {self.trainer_type.upper()} (LSTM) is not supported yet; remove the memory "
                "section or use trainer_type: ppo",
            )
        memory = self.network_settings.memory
        if memory is not None and isinstance(self.hyperparameters, POCASettings) and self.hyperparameters.pack_sequences:
            raise _InvalidField(
                "hyperparameters.pack_sequences",
                "true is not supported with trainer_type poca and network_settings.memory (recurrent POCA "
                "pads its sequences); remove it",
            )
        if memory is not None and isinstance(self.hyperparameters, SACSettings):
            if self.hyperparameters.buffer_size < memory.sequence_length:
                # The replay buffer stores whole sequences.
                raise _InvalidField(
                    "hyperparameters.buffer_size",
                    f"must hold at least one sequence (network_settings.memory.sequence_length "
                    f"{memory.sequence_length}), got {self.hyperparameters.buffer_size}",
                )
        if not isinstance(self.reward_signals, Mapping):
            raise _InvalidField("reward_signals", "expected a mapping of name -> settings")
        object.__setattr__(self, "reward_signals", dict(self.reward_signals))
        if not self.reward_signals:
            raise _InvalidField(
                "reward_signals",
                f"expected at least one reward signal ({', '.join(REWARD_SIGNAL_TYPES)})",
            )
        for name, signal in self.reward_signals.items():
            if name not in REWARD_SIGNAL_TYPES:
                raise _InvalidField(
                    f"reward_signals.{name}",
                    f"unknown reward signal; expected one of {', '.join(REWARD_SIGNAL_TYPES)}"
                    f"{_suggestion(name, REWARD_SIGNAL_TYPES)}",
                )
            if type(signal) is not REWARD_SIGNAL_TYPES[name]:
                raise _InvalidField(
                    f"reward_signals.{name}",
                    f"expected {REWARD_SIGNAL_TYPES[name].__name__}, got {type(signal).__name__}",
                )
        if isinstance(self.hyperparameters, PPOSettings) and self.hyperparameters.normalize_reward:
            if "extrinsic" not in self.reward_signals:
                raise _InvalidField(
                    "hyperparameters.normalize_reward",
                    "true needs the extrinsic reward signal (it scales the environment's reward)",
                )
        _check_instance(self, "behavioral_cloning", BehavioralCloningSettings, optional=True)
        _check_int(self, "keep_checkpoints", 1)
        _check_int(self, "checkpoint_interval", 1)
        _check_int(self, "max_steps", 0)
        _check_int(self, "time_horizon", 1)
        _check_bool(self, "rollout_cuts")
        _check_int(self, "summary_freq", 1)
        _check_str(self, "init_path", optional=True)
        _check_bool(self, "threaded")
        _check_instance(self, "evaluation", EvaluationSettings, optional=True)
        _check_instance(self, "self_play", SelfPlaySettings, optional=True)
        if self.self_play is not None and not self.kind.self_play:
            raise _InvalidField("self_play", self_play_refusal(self.trainer_type))


@dataclass(frozen=True)
class RunOptions:
    """A whole run: per-behavior trainer settings, environment, checkpoints, devices."""

    behaviors: Mapping[str, TrainerSettings] = field(default_factory=dict)
    """Behavior name (as the environment reports it) -> its settings."""
    default_settings: Optional[TrainerSettings] = None
    """Settings for behaviors not named in `behaviors`; None: TrainerSettings()."""
    env_settings: EnvSettings = field(default_factory=EnvSettings)
    """The environment."""
    engine_settings: EngineSettings = field(default_factory=EngineSettings)
    """Unity engine settings (ignored, with a warning, for built-in and Gymnasium envs)."""
    environment_parameters: Mapping[str, EnvironmentParameterSettings] = field(default_factory=dict)
    """Parameter name -> its curriculum (a constant or a sampler: one lesson); see
    `trainers.config.environment_parameters`."""
    checkpoint_settings: CheckpointSettings = field(default_factory=CheckpointSettings)
    """Run id, results directory, resume/force/initialize/inference."""
    device_settings: DeviceSettings = field(default_factory=DeviceSettings)
    """Tower devices."""
    cluster_settings: ClusterSettings = field(default_factory=ClusterSettings)
    """Towers on a TensorFlow cluster's workers instead of local devices."""
    debug: bool = False
    """Verbose logging and tracebacks."""

    def __post_init__(self) -> None:
        if not isinstance(self.behaviors, Mapping):
            raise _InvalidField("behaviors", "expected a mapping of behavior name -> settings")
        object.__setattr__(self, "behaviors", dict(self.behaviors))
        for name, settings in self.behaviors.items():
            if not isinstance(name, str) or not name:
                raise _InvalidField("behaviors", f"expected behavior names, got {_describe(name)}")
            if not isinstance(settings, TrainerSettings):
                raise _InvalidField(f"behaviors.{name}", "expected TrainerSettings")
        _check_instance(self, "default_settings", TrainerSettings, optional=True)
        _check_instance(self, "env_settings", EnvSettings)
        _check_instance(self, "engine_settings", EngineSettings)
        _check_instance(self, "checkpoint_settings", CheckpointSettings)
        _check_instance(self, "device_settings", DeviceSettings)
        _check_instance(self, "cluster_settings", ClusterSettings)
        _check_bool(self, "debug")
        parameters = check_environment_parameters(
            self.environment_parameters, self.behaviors, self.default_settings is not None
        )
        object.__setattr__(self, "environment_parameters", parameters)
        if self.cluster_settings.enabled:
            sections = [(f"behaviors.{n}", s) for n, s in self.behaviors.items()]
            if self.default_settings is not None:
                sections.append(("default_settings", self.default_settings))
            for section, settings in sections:
                if not settings.kind.cluster:
                    raise _InvalidField(f"{section}.trainer_type", cluster_refusal(settings.trainer_type))

    def behavior_settings(self, name: str) -> TrainerSettings:
        """Settings of a behavior: its own section, else default_settings, else defaults."""
        if name in self.behaviors:
            return self.behaviors[name]
        if self.default_settings is not None:
            return self.default_settings
        return TrainerSettings()

    @property
    def run_dir(self) -> str:
        """<results_dir>/<run_id>: where this run's checkpoints, summaries and logs go."""
        return os.path.join(self.checkpoint_settings.results_dir, self.checkpoint_settings.run_id)
