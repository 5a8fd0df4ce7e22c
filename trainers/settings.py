"""Typed, frozen trainer configuration, loaded and validated once.

`load_settings(path, cli_overrides)` reads an ML-Agents trainer config in either format:

- the nested format (ML-Agents release 3 and later): ``behaviors:``, ``default_settings:``,
  ``env_settings:``, ``engine_settings:``, ``checkpoint_settings:``, ``device_settings:``,
  ``cluster_settings:``, ``debug:``;
- the flat TensorFlow-era format (0.9 to 0.16): a ``default:`` section, then one section
  per behavior whose keys override those of ``default`` (a shallow override, as ML-Agents
  did: a behavior's ``reward_signals:`` replaces the default's as a whole).

In the nested format a behavior's section is deep-merged over ``default_settings:`` (as
ML-Agents does), with two exceptions: ``hyperparameters`` are not inherited when the
behavior's ``trainer_type`` differs from the default's, and a behavior that lists
``reward_signals`` gets exactly the signals it lists (each one merged over the default's
signal of the same name; ML-Agents would also add the default's other signals, which would
make a resolved config read back differently). A behavior the file does not name gets
``default_settings`` (or, without them, `TrainerSettings()`).

Every problem is a `ConfigError` whose message is one line naming the file, the YAML path
and what was expected::

    config.yaml: behaviors.CartPole.hyperparameters.lr: unknown key; did you mean learning_rate?

Values given on the command line beat the file and are reported as
``command line: --num-envs: ...``.

YAML details handled here: ``5.0e4`` and ``3e-4`` are numbers (PyYAML reads them as strings
by default), a float that is a whole number is accepted where an integer is meant, booleans
are strictly ``true``/``false``, and a key given twice in one mapping keeps its last value
with one warning line naming the file, line and key. A file over 256 KiB, nested deeper
than 64 levels, expanding (aliases counted at each use) to more than 100,000 values, with
a recursive alias or an integer of more than 100 digits is refused before anything is
built from it; sizes that cannot be built or allocated (``hidden_units``, ``num_layers``,
``memory_size``, ``sequence_length``, ``buffer_size``, ``encoding_size``: the ``MAX_*``
constants) are refused with the YAML path and the limit. A value or key quoted in a
message is cut to about 80 characters.

Defaults follow the TensorFlow era of the nested format (ML-Agents release 3 to release 10,
our lineage): its settings.py had no ``beta_schedule``/``epsilon_schedule``, and its PPO
decayed beta and epsilon on ``learning_rate_schedule`` (``ppo/optimizer_tf.py``), so an
absent ``beta_schedule``/``epsilon_schedule`` follows ``learning_rate_schedule``. Given,
they are honoured (ML-Agents 2.x, where they default to ``linear`` on their own; the two
eras differ only for ``learning_rate_schedule: constant`` without them).

Keys of other ML-Agents releases (``framework``, ``even_checkpoints``,
``network_settings.deterministic``/``goal_conditioning_type``, a reward signal's
``network_settings``, ``env_settings.num_areas`` for a non-Unity env and the Unity process keys,
``checkpoint_settings.load_model``/``train_model``, ``torch_settings``,
``environment_parameters: null``, ``self_play: null``, the stray ``gamma`` of 0.10-0.16
flat SAC configs) are translated when we can honour them, else reported by one warning
line each (see "Keys of other ML-Agents releases" below); warnings go to ``on_warning``
of `load_settings`, by default stderr. In the flat format a section's ``trainer:`` is
checked before its keys, so an unsupported trainer (0.9's ``offline_bc``/``online_bc``) is
the line shown, not one of its own keys.

Relative ``demo_path`` values (GAIL, behavioral cloning) are resolved against the config
file's directory when the file exists there, else against the current working directory
when it exists there; an existing file becomes an absolute path, a missing one is kept as
written (the demo loader reports it).

The dataclasses validate themselves in ``__post_init__``, so settings built in code are
checked exactly like loaded ones. Derived values (resolved schedules, the run directory)
are properties and are never written back.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import math
import os
import re
import sys
from dataclasses import dataclass, field
from typing import (
    Any,
    Callable,
    Dict,
    Iterable,
    List,
    Literal,
    Mapping,
    Optional,
    Tuple,
    Type,
    TypeVar,
    Union,
    get_args,
    get_origin,
    get_type_hints,
)

import yaml

from trainers import __version__
from trainers.exceptions import SHOWN_CHARS, ConfigError, shorten

TrainerType = Literal["ppo", "sac"]
ScheduleType = Literal["linear", "constant"]
EncoderType = Literal["simple", "nature_cnn", "resnet", "match3", "fully_connected"]
ActivationType = Literal["swish", "tanh", "relu"]

TRAINER_TYPES: Tuple[str, ...] = get_args(TrainerType)
SCHEDULE_TYPES: Tuple[str, ...] = get_args(ScheduleType)
ENCODER_TYPES: Tuple[str, ...] = get_args(EncoderType)
ACTIVATION_TYPES: Tuple[str, ...] = get_args(ActivationType)


# --------------------------------------------------------------------------------------
# Field validation, shared by the dataclasses (settings built in code) and the loader.
# --------------------------------------------------------------------------------------


class _InvalidField(ConfigError):
    """A field of a settings dataclass is invalid; the loader adds the file and YAML path."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key
        self.message = message


_SHOWN_CHARS = SHOWN_CHARS
_shorten = shorten


def _describe(value: Any) -> str:
    """How a value is shown in an error message (YAML spelling for null and booleans).

    Every message that quotes a value goes through here, so none grows past about
    `_SHOWN_CHARS` characters for the value (see `_shorten`).
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    if _is_int(value) and value.bit_length() > 3 * _SHOWN_CHARS:
        # repr() of an int over 4300 digits raises ValueError (Python 3.11's limit).
        return f"an integer of about {int(value.bit_length() * math.log10(2)) + 1} digits"
    if isinstance(value, str):
        shown = repr(value)
        if len(shown) > _SHOWN_CHARS:
            shown = f"{shown[: _SHOWN_CHARS - 3]}... ({len(value)} characters)"
        return shown
    return _shorten(repr(value))


# Common spellings from other RL libraries and from the other ML-Agents format; a suggestion
# is only made when the target is a valid key where the typo was found.
_ALIASES: Dict[str, Tuple[str, ...]] = {
    "lr": ("learning_rate",),
    "lambda": ("lambd",),
    "gae_lambda": ("lambd",),
    "clip_range": ("epsilon",),
    "clip_param": ("epsilon",),
    "clip_epsilon": ("epsilon",),
    "ent_coef": ("beta", "init_entcoef"),
    "entropy_coef": ("beta", "init_entcoef"),
    "n_epochs": ("num_epoch",),
    "epochs": ("num_epoch",),
    "num_epochs": ("num_epoch",),
    "minibatch_size": ("batch_size",),
    "n_steps": ("time_horizon",),
    "total_timesteps": ("max_steps",),
    "trainer": ("trainer_type",),
    "trainer_type": ("trainer",),
    "use_recurrent": ("memory",),
    "pretraining": ("behavioral_cloning",),
    "recurrent": ("memory", "use_recurrent"),
    "layers": ("num_layers",),
    "hidden_size": ("hidden_units",),
    "behavior": ("behaviors",),
    "brains": ("behaviors",),
}


def _suggestion(word: Any, candidates: Iterable[str]) -> str:
    """'; did you mean X?' for the closest candidate, or '' when nothing is close."""
    names = list(candidates)
    text = str(word)
    lowered = {name.lower(): name for name in names}
    for target in _ALIASES.get(text.lower(), ()):
        if target in names:
            return f"; did you mean {target}?"
    if text.lower() in lowered:
        return f"; did you mean {lowered[text.lower()]}?"
    # Abbreviations made of initials: "lr" -> learning_rate.
    initials = [name for name in names if "".join(p[:1] for p in name.split("_")) == text]
    if len(initials) == 1 and len(text) > 1:
        return f"; did you mean {initials[0]}?"
    close = difflib.get_close_matches(text.lower(), list(lowered), n=1, cutoff=0.6)
    return f"; did you mean {lowered[close[0]]}?" if close else ""


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_int(
    obj: Any, key: str, minimum: Optional[int] = None, *, optional: bool = False
) -> None:
    value = getattr(obj, key)
    if value is None and optional:
        return
    if not _is_int(value):
        raise _InvalidField(key, f"expected an integer, got {_describe(value)}")
    if minimum is not None and value < minimum:
        raise _InvalidField(key, f"expected an integer >= {minimum}, got {_describe(value)}")


def _check_number(
    obj: Any,
    key: str,
    low: Optional[float] = None,
    high: Optional[float] = None,
    *,
    low_open: bool = False,
    high_open: bool = False,
    optional: bool = False,
) -> None:
    """A finite number within [low, high]; either bound may be open or absent."""
    value = getattr(obj, key)
    if value is None and optional:
        return
    if not _is_number(value):
        raise _InvalidField(key, f"expected a number, got {_describe(value)}")
    if not math.isfinite(value):
        raise _InvalidField(key, f"expected a finite number, got {_describe(value)}")
    too_low = low is not None and (value <= low if low_open else value < low)
    too_high = high is not None and (value >= high if high_open else value > high)
    if not (too_low or too_high):
        return
    if low is not None and high is not None:
        expected = f"{'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
        expected = f"a number in {expected}"
    elif low is not None:
        expected = f"a number {'>' if low_open else '>='} {low:g}"
    else:
        expected = f"a number {'<' if high_open else '<='} {high:g}"
    raise _InvalidField(key, f"expected {expected}, got {_describe(value)}")


def _check_bool(obj: Any, key: str) -> None:
    value = getattr(obj, key)
    if not isinstance(value, bool):
        raise _InvalidField(key, f"expected true or false, got {_describe(value)}")


def _check_str(obj: Any, key: str, *, optional: bool = False) -> None:
    value = getattr(obj, key)
    if value is None and optional:
        return
    if not isinstance(value, str):
        raise _InvalidField(key, f"expected a string, got {_describe(value)}")
    if not value.strip():
        raise _InvalidField(key, "expected a non-empty string")


def _check_choice(obj: Any, key: str, choices: Tuple[str, ...], *, optional: bool = False) -> None:
    value = getattr(obj, key)
    if value is None and optional:
        return
    if not isinstance(value, str) or value not in choices:
        raise _InvalidField(key, _choice_message(value, choices))


def _choice_message(value: Any, choices: Tuple[str, ...]) -> str:
    expected = ", ".join(choices)
    if isinstance(value, str):
        return f"unknown value {_describe(value)}; expected one of {expected}{_suggestion(value, choices)}"
    return f"expected one of {expected}, got {_describe(value)}"


def _check_instance(obj: Any, key: str, kind: type, *, optional: bool = False) -> None:
    value = getattr(obj, key)
    if value is None and optional:
        return
    if not isinstance(value, kind):
        raise _InvalidField(key, f"expected {kind.__name__}, got {type(value).__name__}")


# --------------------------------------------------------------------------------------
# Size limits (issue 30): refused when the settings are built, before any graph or buffer.
#
# Each limit is far above anything ML-Agents ships (the largest values in every config of
# its history, 0.9 to 1.1: hidden_units 512, num_layers 4, memory_size 256,
# sequence_length 64, encoding_size 256, buffer_size 2,000,000 for SAC Pyramids) or a real
# run needs, and low enough that what passes can be built: a larger value either cannot be
# allocated (a TensorFlow or numpy traceback) or builds for many minutes without a word.
# --------------------------------------------------------------------------------------

MAX_HIDDEN_UNITS = 8192
"""Units of one hidden layer (``hidden_units``, a signal's ``encoding_size``): one layer of
8192 x 8192 is already 64 M weights (256 MiB of float32; Adam keeps two more copies)."""
MAX_NUM_LAYERS = 64
"""Hidden layers of one network. Each is built into every network's graph (actor, critic,
each tower): 64 layers of 32 units build in 16 s on the 2-core machine, 256 in 80 s; the
attack round's 5000 would build for about half an hour."""
MAX_BODY_WEIGHTS = 2**28
"""Hidden weights of one network body (num_layers x hidden_units^2): 1 GiB of float32 per
network, before the critic's copy and Adam's two slots."""
MAX_MEMORY_SIZE = 8192
"""LSTM memory, concat(c, h): 4096 LSTM units; every step in the update buffer also keeps
its memory."""
MAX_SEQUENCE_LENGTH = 1024
"""Steps of one training sequence. The LSTM is unrolled into the update graph step by step
(trainers/tf/lstm.py): 64 steps build in 6 s on the 2-core machine, 256 in 24 s, 1024 in
85 s; the attack round's 100000 would build for hours."""
MAX_BUFFER_SIZE = 10**8
"""Experiences one buffer holds (PPO's update buffer; SAC's replay buffer, allocated whole
at its first trajectory). The smallest row is about 28 bytes (a 1-float observation and
its successor, one action, reward, done, mask): 10^8 rows need 2.8 GB at the least and
about 80 GB for a 100-float observation, so more cannot plausibly fit in memory."""


def _check_at_most(obj: Any, key: str, limit: int, unit: str, why: str) -> None:
    """An integer field (already checked as one) at most `limit`; `why` explains it."""
    value = getattr(obj, key)
    if value > limit:
        raise _InvalidField(key, f"expected at most {limit} {unit}, got {_describe(value)} ({why})")


def _check_hidden_units(obj: Any, key: str) -> None:
    _check_at_most(
        obj, key, MAX_HIDDEN_UNITS, "units",
        f"one layer of {MAX_HIDDEN_UNITS} units is already 256 MiB of weights",
    )


def _check_buffer_size(obj: Any) -> None:
    _check_at_most(
        obj, "buffer_size", MAX_BUFFER_SIZE, "experiences",
        "the buffer is held in memory; 10^8 rows of the smallest observation already need 2.8 GB",
    )


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


HyperparamSettings = Union[PPOSettings, SACSettings]
HYPERPARAMETER_TYPES: Dict[str, Type[Any]] = {"ppo": PPOSettings, "sac": SACSettings}


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
    """Visual encoder: simple, nature_cnn, resnet, match3 or fully_connected."""
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


def _default_reward_signals() -> Dict[str, RewardSignalSettings]:
    return {"extrinsic": ExtrinsicSettings()}


@dataclass(frozen=True)
class TrainerSettings:
    """Everything about training one behavior (one ``behaviors.<name>`` section)."""

    trainer_type: TrainerType = "ppo"
    """ppo or sac."""
    hyperparameters: HyperparamSettings = field(default_factory=PPOSettings)
    """PPOSettings for ppo, SACSettings for sac; left at the default: the trainer type's."""
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
    summary_freq: int = 50000
    """Agent steps between summaries (console, TensorBoard, CSV) (> 0)."""
    init_path: Optional[str] = None
    """Checkpoint to initialise this behavior's weights from; None: fresh weights."""
    threaded: bool = False
    """Update in a thread while the envs keep stepping with the previous weights (PPO;
    trainers/threaded.py); with several env workers they also step out of lockstep
    (trainers/controller.py). False (default): updates stop the envs, workers step in
    lockstep, runs are reproducible."""

    @property
    def updates_in_thread(self) -> bool:
        """``threaded`` where it is honoured: PPO only (SAC updates between env steps)."""
        return self.threaded and self.trainer_type == "ppo"

    def __post_init__(self) -> None:
        _check_choice(self, "trainer_type", TRAINER_TYPES)
        expected = HYPERPARAMETER_TYPES[self.trainer_type]
        if self.trainer_type == "sac" and self.hyperparameters == PPOSettings():
            # The field's default is PPO's; a SAC trainer left at the default gets SAC's.
            object.__setattr__(self, "hyperparameters", SACSettings())
        if not isinstance(self.hyperparameters, expected):
            raise _InvalidField(
                "hyperparameters",
                f"expected {expected.__name__} for trainer_type {self.trainer_type}, "
                f"got {type(self.hyperparameters).__name__}",
            )
        _check_instance(self, "network_settings", NetworkSettings)
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
        _check_instance(self, "behavioral_cloning", BehavioralCloningSettings, optional=True)
        _check_int(self, "keep_checkpoints", 1)
        _check_int(self, "checkpoint_interval", 1)
        _check_int(self, "max_steps", 0)
        _check_int(self, "time_horizon", 1)
        _check_int(self, "summary_freq", 1)
        _check_str(self, "init_path", optional=True)
        _check_bool(self, "threaded")


@dataclass(frozen=True)
class EnvSettings:
    """Which environment to run and how many copies (``env_settings:``)."""

    env_path: Optional[str] = None
    """Env id: ``builtin:<Name>``, ``gym:<id>``, or a path to a Unity build; None: the editor."""
    env_args: Dict[str, Any] = field(default_factory=dict)
    """Keyword arguments for the environment's constructor."""
    num_envs: int = 1
    """Environment copies stepped in parallel (>= 1)."""
    agents_per_env: int = 1
    """Agents per environment copy, for environments that support several (>= 1)."""
    seed: int = -1
    """Random seed for environments and the trainer; -1: chosen at random."""
    base_port: int = 5005
    """First port for Unity environments (accepted for Unity; unused otherwise)."""
    # --- Unity (issue 12): the other Unity keys live in engine_settings, read by envs/unity.
    timeout_wait: int = 60
    """Seconds every env has to answer each reset and step; a Unity game also to connect."""
    num_areas: int = 1
    """Training areas each Unity build instantiates (sent in the handshake, as ML-Agents does)."""

    def __post_init__(self) -> None:
        _check_str(self, "env_path", optional=True)
        if not isinstance(self.env_args, Mapping) or not all(
            isinstance(k, str) for k in self.env_args
        ):
            raise _InvalidField("env_args", "expected a mapping with string keys")
        object.__setattr__(self, "env_args", dict(self.env_args))
        _check_int(self, "num_envs", 1)
        _check_int(self, "agents_per_env", 1)
        _check_int(self, "seed")
        _check_int(self, "base_port", 1)
        if self.base_port > 65535:
            raise _InvalidField("base_port", f"expected a port <= 65535, got {self.base_port}")
        _check_int(self, "timeout_wait", 1)
        _check_int(self, "num_areas", 1)


@dataclass(frozen=True)
class CheckpointSettings:
    """Where results go and how an existing run is treated (``checkpoint_settings:``)."""

    run_id: str = "ppo"
    """Name of the run; results go to <results_dir>/<run_id>."""
    results_dir: str = "results"
    """Directory holding every run."""
    resume: bool = False
    """Continue the run from its latest checkpoint (step, schedules, summaries)."""
    force: bool = False
    """Overwrite an existing run of the same run_id."""
    initialize_from: Optional[str] = None
    """run_id of a previous run whose weights initialise every behavior."""
    inference: bool = False
    """Run the policy without training."""

    def __post_init__(self) -> None:
        _check_str(self, "run_id")
        _check_str(self, "results_dir")
        _check_bool(self, "resume")
        _check_bool(self, "force")
        _check_str(self, "initialize_from", optional=True)
        _check_bool(self, "inference")
        if self.resume and self.force:
            raise _InvalidField("force", "cannot be combined with resume; give one of them")


@dataclass(frozen=True)
class DeviceSettings:
    """Devices the towers are placed on (``device_settings:``); both None: the default device."""

    num_gpus: Optional[int] = None
    """Use GPUs 0..num_gpus-1, one tower each (0: CPU only)."""
    devices: Optional[Tuple[str, ...]] = None
    """Explicit tower devices, e.g. ("/cpu:0", "/cpu:1") or ("/gpu:0", "/gpu:1")."""

    def __post_init__(self) -> None:
        _check_int(self, "num_gpus", 0, optional=True)
        if self.devices is not None:
            if isinstance(self.devices, str) or not isinstance(self.devices, (list, tuple)):
                raise _InvalidField(
                    "devices", f"expected a list of device names, got {_describe(self.devices)}"
                )
            object.__setattr__(self, "devices", tuple(self.devices))
            if not self.devices:
                raise _InvalidField("devices", "expected at least one device name")
            for device in self.devices:
                if not isinstance(device, str) or not device.startswith("/"):
                    raise _InvalidField(
                        "devices",
                        f"expected device names such as /gpu:0 or /cpu:1, got {_describe(device)}",
                    )
        if self.num_gpus is not None and self.devices is not None:
            raise _InvalidField("devices", "cannot be combined with num_gpus; give one of them")


def _check_address(key: str, value: Any) -> str:
    """``host:port`` with a port in 1..65535 (YAML may read an unquoted ``a:b`` as a number)."""
    if not isinstance(value, str):
        raise _InvalidField(key, f"expected host:port (quote it), got {_describe(value)}")
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise _InvalidField(key, f"expected host:port with a port in 1..65535, got {_describe(value)}")
    return value


def _normalize_device(value: Any) -> Optional[str]:
    """'/gpu:1', 'GPU:1', '/device:GPU:1' -> 'GPU:1'; None when not a device name."""
    if not isinstance(value, str):
        return None
    kind, _, index = value.strip().lstrip("/").rpartition("device:")[2].partition(":")
    if kind.upper() not in ("GPU", "CPU") or not index.isdigit():
        return None
    return f"{kind.upper()}:{int(index)}"


@dataclass(frozen=True)
class ClusterSettings:
    """A TensorFlow cluster for the towers (``cluster_settings:``, or ``--cluster=<file>``
    whose top level has the same keys). No chief: towers on local devices."""

    chief: Optional[str] = None
    """host:port of the chief's server (the process that steps the envs and holds the variables)."""
    workers: Tuple[str, ...] = ()
    """host:port of each worker's server (``trainer-learn --worker --task-index=<i>``)."""
    worker_devices: Optional[Tuple[Any, ...]] = None
    """Per worker, its tower devices (e.g. [GPU:0, GPU:1]); None: all its GPUs, else its CPU."""
    startup_timeout: float = 60.0
    """Seconds the chief waits for every worker to answer at start-up."""

    def __post_init__(self) -> None:
        if self.chief is not None:
            _check_address("chief", self.chief)
        if isinstance(self.workers, str) or not isinstance(self.workers, (list, tuple)):
            raise _InvalidField("workers", f"expected a list of host:port, got {_describe(self.workers)}")
        object.__setattr__(self, "workers", tuple(self.workers))
        for address in self.workers:
            _check_address("workers", address)
        if len(set(self.workers) | {self.chief}) != len(self.workers) + 1 and self.chief is not None:
            raise _InvalidField("workers", "every server needs its own host:port (a duplicate was given)")
        if self.chief is None and self.workers:
            raise _InvalidField("chief", "workers are given but no chief host:port")
        if self.chief is not None and not self.workers:
            raise _InvalidField("workers", "expected at least one worker host:port")
        _check_number(self, "startup_timeout", 0.0, low_open=True)
        if self.worker_devices is not None:
            lists = self.worker_devices
            if isinstance(lists, str) or not isinstance(lists, (list, tuple)) or len(lists) != len(self.workers):
                raise _InvalidField(
                    "worker_devices", f"expected one device list per worker ({len(self.workers)} lists)"
                )
            normalized = []
            for i, devices in enumerate(lists):
                if isinstance(devices, str) or not isinstance(devices, (list, tuple)) or not devices:
                    raise _InvalidField("worker_devices", f"worker {i}: expected a list such as [GPU:0, GPU:1]")
                names = [_normalize_device(d) for d in devices]
                for raw, name in zip(devices, names):
                    if name is None:
                        raise _InvalidField(
                            "worker_devices", f"worker {i}: expected device names such as GPU:0 or CPU:1, got {_describe(raw)}"
                        )
                normalized.append(tuple(names))
            object.__setattr__(self, "worker_devices", tuple(normalized))

    @property
    def enabled(self) -> bool:
        return self.chief is not None


@dataclass(frozen=True)
class RunOptions:
    """A whole run: per-behavior trainer settings, environment, checkpoints, devices."""

    behaviors: Mapping[str, TrainerSettings] = field(default_factory=dict)
    """Behavior name (as the environment reports it) -> its settings."""
    default_settings: Optional[TrainerSettings] = None
    """Settings for behaviors not named in `behaviors`; None: TrainerSettings()."""
    env_settings: EnvSettings = field(default_factory=EnvSettings)
    """The environment."""
    engine_settings: Dict[str, Any] = field(default_factory=dict)
    """Unity engine settings; accepted and ignored."""
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
        if not isinstance(self.engine_settings, Mapping):
            raise _InvalidField("engine_settings", "expected a mapping")
        object.__setattr__(self, "engine_settings", dict(self.engine_settings))
        _check_instance(self, "checkpoint_settings", CheckpointSettings)
        _check_instance(self, "device_settings", DeviceSettings)
        _check_instance(self, "cluster_settings", ClusterSettings)
        _check_bool(self, "debug")

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


# --------------------------------------------------------------------------------------
# YAML reading.
# --------------------------------------------------------------------------------------


#: Deepest nesting of mappings and lists accepted. ML-Agents' own configs nest at most 6
#: levels (behaviors.X.reward_signals.gail.network_settings.memory); PyYAML composes and
#: constructs recursively, so a file nested thousands deep ended in a 2,999-line
#: RecursionError traceback (issue 30). 64 leaves room for any env_args a user writes.
_MAX_NESTING = 64

#: Most values (scalars, mappings and lists, every alias counted where it is used) one file
#: may expand to. ML-Agents' largest config has a few hundred; aliases that repeat aliases
#: ("billion laughs") would expand to billions when the resolved configuration is written.
_MAX_VALUES = 100_000

#: Largest config file read, in bytes: 37 times ML-Agents' largest shipped config (7 KB).
#: PyYAML's Python reader takes about 30 s a megabyte of short values, so a larger file is
#: refused before it is parsed (a 4.7 MB list took 86 s to be refused after parsing).
_MAX_FILE_BYTES = 256 * 1024

#: Longest integer literal accepted, in digits. Python refuses to read an int of more than
#: 4300 digits (a ValueError traceback from inside PyYAML); no setting needs more than 20.
_MAX_INT_DIGITS = 100


class _Refused(Exception):
    """A YAML document this loader will not build (too deep, too large); reported with
    the line it was found on."""

    def __init__(self, message: str, mark: Any) -> None:
        super().__init__(message)
        self.message = message
        self.line = mark.line + 1 if mark is not None else None


class _ConfigLoader(yaml.SafeLoader):
    """SafeLoader that reads ``5.0e4``/``3e-4`` as floats and records duplicate keys.

    A key given twice in one mapping keeps its last value, as PyYAML and ML-Agents do
    (Unity's own 0.10/0.12 configs repeat ``sequence_length`` and ``use_recurrent``);
    ``duplicates`` holds ``(line, key)`` of each repetition, for one warning line each.

    It refuses (`_Refused`) nesting deeper than `_MAX_NESTING` while composing, and an
    integer of more than `_MAX_INT_DIGITS` digits; `_check_expansion` refuses what aliases
    would expand to, between composing and constructing.
    """

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self.duplicates: List[Tuple[int, Any]] = []
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        # The composer recurses once per level; counting here refuses a deep document
        # before Python's own recursion limit is reached.
        self._depth += 1
        try:
            if self._depth > _MAX_NESTING:
                raise _Refused(
                    f"nesting too deep: more than {_MAX_NESTING} levels",
                    self.peek_event().start_mark,
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        """SafeConstructor's int, refused past `_MAX_INT_DIGITS` digits (Python's int()
        raises a ValueError over 4300 digits, which PyYAML does not catch)."""
        digits = sum(c.isdigit() for c in str(node.value))
        if digits > _MAX_INT_DIGITS:
            raise _Refused(
                f"an integer of {digits} digits: expected at most {_MAX_INT_DIGITS} digits",
                node.start_mark,
            )
        return super().construct_yaml_int(node)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> Dict[Any, Any]:
        seen = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:  # unhashable key: SafeConstructor reports it
                continue
            if duplicate:
                self.duplicates.append((key_node.start_mark.line + 1, key))
        return super().construct_mapping(node, deep=deep)


_ConfigLoader.add_constructor("tag:yaml.org,2002:int", _ConfigLoader.construct_yaml_int)

# YAML 1.1 (PyYAML) needs a dot and a signed exponent for a float; YAML 1.2 and every
# ML-Agents user do not ("5.0e4", "3e-4").
_ConfigLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"),
    list("-+0123456789."),
)


def _check_expansion(root: yaml.Node) -> None:
    """Refuses a recursive alias, and aliases that expand past `_MAX_VALUES` values or
    `_MAX_NESTING` levels (an alias of a deep list placed deep in another one).

    Measures the composed nodes, each shared node once (memoised), so the measure is cheap
    even where the expansion would not be; the walk is as deep as the composed nesting,
    which `_ConfigLoader.compose_node` has bounded.
    """
    measured: Dict[int, Tuple[int, int]] = {}  # id(node) -> (values, levels) it expands to
    open_nodes: set = set()

    def measure(node: yaml.Node) -> Tuple[int, int]:
        key = id(node)
        if key in measured:
            return measured[key]
        if key in open_nodes:
            raise _Refused("a recursive alias (a mapping or list that contains itself)", node.start_mark)
        open_nodes.add(key)
        if isinstance(node, yaml.MappingNode):
            children = [measure(n) for pair in node.value for n in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = [measure(n) for n in node.value]
        else:
            children = []
        open_nodes.discard(key)
        values = 1 + sum(v for v, _ in children)
        levels = 1 + max((d for _, d in children), default=0)
        if values > _MAX_VALUES:
            raise _Refused(
                f"more than {_MAX_VALUES} values, counting each use of an alias (ML-Agents' "
                "configs hold a few hundred)",
                node.start_mark,
            )
        if levels > _MAX_NESTING:
            raise _Refused(
                f"nesting too deep: more than {_MAX_NESTING} levels once aliases are expanded",
                node.start_mark,
            )
        measured[key] = (values, levels)
        return values, levels

    measure(root)


def _key_lines(root: Optional[yaml.Node]) -> Dict[Tuple[str, ...], int]:
    """Line (1-based) of every key of the top-level mapping and of its sections' mappings:
    ``("VisualHallway", "gamma") -> 229``, for warnings that name a line."""
    lines: Dict[Tuple[str, ...], int] = {}
    if not isinstance(root, yaml.MappingNode):
        return lines
    for key_node, value_node in root.value:
        if not isinstance(key_node, yaml.ScalarNode):
            continue
        lines[(key_node.value,)] = key_node.start_mark.line + 1
        if isinstance(value_node, yaml.MappingNode):
            for inner_key, _ in value_node.value:
                if isinstance(inner_key, yaml.ScalarNode):
                    lines[(key_node.value, inner_key.value)] = inner_key.start_mark.line + 1
    return lines


@dataclass
class _YamlFile:
    """A config file as read: the document, the ``(line, key)`` of every duplicate key, and
    the line of the keys of its top two levels (see `_key_lines`)."""

    doc: Any
    duplicates: List[Tuple[int, Any]]
    key_lines: Dict[Tuple[str, ...], int]


def _read_yaml(path: str) -> _YamlFile:
    """Reads and constructs a YAML file; every problem is one-line ConfigError."""
    try:
        with open(path, "r", encoding="utf-8") as stream:
            size = os.fstat(stream.fileno()).st_size
            if size > _MAX_FILE_BYTES:
                raise ConfigError(
                    f"{path}: {size} bytes: expected a trainer configuration of at most "
                    f"{_MAX_FILE_BYTES} bytes (256 KiB; ML-Agents' largest is 7 KB)"
                )
            loader = _ConfigLoader(stream)
            try:
                node = loader.get_single_node()
                if node is None:
                    return _YamlFile(None, [], {})
                _check_expansion(node)
                doc = loader.construct_document(node)
                return _YamlFile(doc, loader.duplicates, _key_lines(node))
            finally:
                loader.dispose()
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, expected a YAML file") from None
    except OSError as error:
        raise ConfigError(f"{path}: cannot read: {error.strerror or error}") from None
    except UnicodeDecodeError as error:
        raise ConfigError(f"{path}: not a text file ({error.reason})") from None
    except _Refused as error:
        where = f"line {error.line}: " if error.line is not None else ""
        raise ConfigError(f"{path}: {where}{error.message}") from None
    except RecursionError:
        # Not expected below _MAX_NESTING; kept so that no input gives a traceback.
        raise ConfigError(f"{path}: nesting too deep for this YAML reader") from None
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = _shorten(" ".join(str(error.problem or error.context or "syntax error").split()))
        raise ConfigError(f"{path}: {where}invalid YAML: {problem}") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: invalid YAML: {_shorten(' '.join(str(error).split()))}") from None


# --------------------------------------------------------------------------------------
# Building dataclasses from YAML values, with paths for error messages.
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Cli:
    """A value from the command line, reported as ``command line: <flag>``."""

    value: Any
    flag: str


class _Where:
    """Where a YAML value lives: the file and a dotted path, for error messages.

    ``remap`` gives the path of particular keys of this mapping when they live elsewhere
    (flat format: a behavior's key may come from the ``default:`` section).
    """

    def __init__(self, source: str, path: str = "", remap: Optional[Mapping[str, str]] = None):
        self.source = source
        self.path = path
        self.remap = dict(remap or {})

    def _join(self, key: Any) -> str:
        key = str(key)
        if key in self.remap:
            return self.remap[key]
        key = _shorten(key)  # a pasted 4 KB key must not make a 4 KB message
        return f"{self.path}.{key}" if self.path else key

    def dotted(self, key: Any) -> str:
        """'path.key' (no file)."""
        return self._join(key)

    def key(self, key: Any) -> str:
        """'file: path.key'."""
        return f"{self.source}: {self._join(key)}"

    def child(self, key: Any) -> "_Where":
        return _Where(self.source, self._join(key))

    def here(self) -> str:
        return f"{self.source}: {self.path}" if self.path else self.source


def _fail(where: str, message: str) -> ConfigError:
    return ConfigError(f"{where}: {message}")


def _as_mapping(raw: Any, where: _Where) -> Dict[Any, Any]:
    """A YAML section as a dict; an empty section (null) is an empty mapping."""
    if raw is None:
        return {}
    if isinstance(raw, _Cli):
        raw = raw.value
    if not isinstance(raw, Mapping):
        raise _fail(where.here(), f"expected a mapping, got {_describe(raw)}")
    return dict(raw)


def _unknown_key(key: Any, candidates: Iterable[str], where: _Where) -> ConfigError:
    if str(key) in _NOT_SUPPORTED:
        return _fail(where.key(key), _NOT_SUPPORTED[str(key)])
    return _fail(where.key(key), f"unknown key{_suggestion(key, candidates)}")


_NOT_SUPPORTED: Dict[str, str] = {
    "environment_parameters": "not supported (environment parameters and curricula)",
    "self_play": "not supported (self-play)",
}

_HINTS: Dict[type, Dict[str, Any]] = {}


def _hints(cls: type) -> Dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = get_type_hints(cls)
    return _HINTS[cls]


def _field_names(cls: type) -> List[str]:
    return [f.name for f in dataclasses.fields(cls)]


def _coerce(raw: Any, hint: Any, where: _Where, key: str) -> Tuple[Any, str]:
    """Converts a YAML (or command-line) value toward a field's type; returns (value, where).

    Only conversions are done here; the dataclass validates the result and reports wrong
    types and ranges.
    """
    location = where.key(key)
    from_cli = isinstance(raw, _Cli)
    if from_cli:
        location = f"command line: {raw.flag}"
        raw = raw.value
    if get_origin(hint) is Union:
        options = [a for a in get_args(hint) if a is not type(None)]
        if raw is None:
            return None, location
        hint = options[0]
    origin = get_origin(hint)
    if dataclasses.is_dataclass(hint):
        return _build(hint, raw, where.child(key)), location
    if hint is int:
        if from_cli and isinstance(raw, str):
            try:
                raw = int(raw.strip())
            except ValueError:
                pass
        if isinstance(raw, float) and raw.is_integer():
            raw = int(raw)
    elif hint is float:
        if from_cli and isinstance(raw, str):
            try:
                raw = float(raw.strip())
            except ValueError:
                pass
        if _is_int(raw):
            raw = float(raw)
    elif hint is bool:
        if from_cli and isinstance(raw, str):
            raw = {"true": True, "false": False}.get(raw.strip().lower(), raw)
    elif origin is tuple:
        if isinstance(raw, str):
            raw = tuple(part.strip() for part in raw.split(",") if part.strip())
        elif isinstance(raw, list):
            raw = tuple(raw)
    elif origin in (dict, Mapping) or hint is dict:
        if raw is None:
            raw = {}
        if not isinstance(raw, Mapping):
            raise _fail(location, f"expected a mapping, got {_describe(raw)}")
        raw = copy.deepcopy(dict(raw))
    return raw, location


_T = TypeVar("_T")


def _construct(cls: Type[_T], kwargs: Mapping[str, Any], locate: Callable[[str], str]) -> _T:
    """cls(**kwargs), with a field's validation error reported at that field's location."""
    try:
        return cls(**kwargs)
    except _InvalidField as error:
        raise _fail(locate(error.key), error.message) from None


def _build(
    cls: Type[_T],
    raw: Any,
    where: _Where,
    prebuilt: Optional[Mapping[str, Any]] = None,
) -> _T:
    """Builds a settings dataclass from a YAML mapping, field by field.

    Args:
      cls: the dataclass.
      raw: the YAML value (a mapping, or null for all defaults).
      where: location of `raw`, for error messages.
      prebuilt: fields already built by the caller (special cases); their keys are allowed.
    """
    data = _as_mapping(raw, where)
    prebuilt = prebuilt or {}
    names = _field_names(cls)
    for key in data:
        if key not in names and key not in prebuilt:
            raise _unknown_key(key, names, where)
    hints = _hints(cls)
    kwargs: Dict[str, Any] = {}
    locations: Dict[str, str] = {}
    for f in dataclasses.fields(cls):
        if f.name in prebuilt:
            kwargs[f.name] = prebuilt[f.name]
        elif f.name in data:
            kwargs[f.name], locations[f.name] = _coerce(data[f.name], hints[f.name], where, f.name)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise _fail(where.key(f.name), "required key is missing")
    return _construct(cls, kwargs, lambda key: locations.get(key, where.key(key)))


class _Source:
    """The config file: its name as given (for messages), its directory (for demos), and
    the warnings of this load (emitted once the whole file has loaded)."""

    def __init__(self, path: str) -> None:
        self.name = path
        self.dir = os.path.dirname(os.path.abspath(path))
        self.warnings: List[str] = []
        self._warned: set = set()
        # Line of each key of the top two levels (`_key_lines`), for warnings naming a line.
        self.key_lines: Dict[Tuple[str, ...], int] = {}
        # Locations of `network_settings.deterministic: true`, refused unless --inference.
        self.deterministic_at: List[str] = []

    def warn(self, location: str, message: str, once: Any = None) -> None:
        """Records ``'<location>: <message>'``; ``once`` (default: the message) keys the
        de-duplication, so a key that default_settings gives every behavior warns once."""
        token = message if once is None else once
        if token not in self._warned:
            self._warned.add(token)
            self.warnings.append(f"{location}: {message}")

    def resolve_demo(self, demo_path: str) -> str:
        """Config-relative if the file exists there, else CWD-relative if it exists there."""
        path = os.path.expanduser(demo_path)
        if os.path.isabs(path):
            return path
        beside_config = os.path.join(self.dir, path)
        if os.path.exists(beside_config):
            return os.path.abspath(beside_config)
        if os.path.exists(path):
            return os.path.abspath(path)
        return demo_path


def _build_reward_signals(raw: Any, where: _Where, source: _Source) -> Dict[str, Any]:
    if raw is None:
        return _default_reward_signals()
    data = _as_mapping(raw, where)
    if not data:
        raise _fail(
            where.here(), f"expected at least one reward signal ({', '.join(REWARD_SIGNAL_TYPES)})"
        )
    signals: Dict[str, Any] = {}
    for name, section in data.items():
        if str(name) in _UNSUPPORTED_SIGNALS:
            raise _fail(where.key(name), _UNSUPPORTED_SIGNALS[str(name)])
        if name not in REWARD_SIGNAL_TYPES:
            raise _fail(
                where.key(name),
                f"unknown reward signal; expected one of {', '.join(REWARD_SIGNAL_TYPES)}"
                f"{_suggestion(name, REWARD_SIGNAL_TYPES)}",
            )
        section = _compat_signal(name, section, where.child(name), source)
        signal = _build(REWARD_SIGNAL_TYPES[name], section, where.child(name))
        if isinstance(signal, GAILSettings):
            signal = dataclasses.replace(signal, demo_path=source.resolve_demo(signal.demo_path))
        signals[name] = signal
    return signals


def _build_behavioral_cloning(
    raw: Any, where: _Where, source: _Source
) -> Optional[BehavioralCloningSettings]:
    if raw is None:
        return None
    bc = _build(BehavioralCloningSettings, raw, where)
    return dataclasses.replace(bc, demo_path=source.resolve_demo(bc.demo_path))


def _trainer_type(raw: Any, where: _Where, key: str) -> str:
    value, location = _coerce(raw, str, where, key)
    if isinstance(value, str) and value in _UNSUPPORTED_TRAINERS:
        raise _fail(location, f"{value}: {_UNSUPPORTED_TRAINERS[value]}")
    if value not in TRAINER_TYPES:
        raise _fail(location, _choice_message(value, TRAINER_TYPES))
    return value


def _build_hyperparameters(trainer_type: str, data: Mapping[str, Any], where: _Where) -> Any:
    cls = HYPERPARAMETER_TYPES[trainer_type]
    own = set(_field_names(cls))
    for other_type, other_cls in HYPERPARAMETER_TYPES.items():
        for key in data:
            if key not in own and key in _field_names(other_cls):
                raise _fail(
                    where.key(key),
                    f"is a {other_type} hyperparameter, but the trainer type is {trainer_type}",
                )
    return _build(cls, data, where)


# Where the flat format's keys live in the nested format.
_NESTED_HOMES: Dict[str, str] = {
    **{k: f"hyperparameters.{k}" for k in _field_names(PPOSettings) + _field_names(SACSettings)},
    **{k: f"network_settings.{k}" for k in _field_names(NetworkSettings)},
    **{k: f"network_settings.memory.{k}" for k in _field_names(MemorySettings)},
    "use_recurrent": "network_settings.memory",
    "pretraining": "behavioral_cloning",
}


def _trainer_from_nested(raw: Any, where: _Where, source: _Source) -> TrainerSettings:
    """A ``behaviors.<name>`` or ``default_settings`` section (already merged)."""
    data = _compat_trainer(_as_mapping(raw, where), where, source)
    # The trainer type first: a trainer we do not support has keys of its own, and the
    # line to show is "not supported", not "unknown key" for one of them.
    trainer_type = _trainer_type(data.get("trainer_type", "ppo"), where, "trainer_type")
    names = _field_names(TrainerSettings)
    for key in data:
        if key in _NESTED_HOMES:
            # A flat-format key in a nested section.
            raise _fail(where.key(key), f"unknown key; did you mean {_NESTED_HOMES[key]}?")
        if key not in names:
            raise _unknown_key(key, names, where)
    hyper_where = where.child("hyperparameters")
    prebuilt = {
        "trainer_type": trainer_type,
        "hyperparameters": _build_hyperparameters(
            trainer_type, _as_mapping(data.get("hyperparameters"), hyper_where), hyper_where
        ),
        "reward_signals": _build_reward_signals(
            data.get("reward_signals"), where.child("reward_signals"), source
        ),
        "behavioral_cloning": _build_behavioral_cloning(
            data.get("behavioral_cloning"), where.child("behavioral_cloning"), source
        ),
    }
    settings = _build(TrainerSettings, data, where, prebuilt=prebuilt)
    _check_signal_normalize(settings, where, source)
    _check_threaded(settings, where, source)
    return settings


def _deep_merge(base: Dict[Any, Any], override: Mapping[Any, Any]) -> Dict[Any, Any]:
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(merged.get(key), Mapping) and isinstance(value, Mapping):
            merged[key] = _deep_merge(dict(merged[key]), value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _merge_over_default(default: Dict[Any, Any], behavior: Dict[Any, Any]) -> Dict[Any, Any]:
    """A behavior's section deep-merged over default_settings.

    Two exceptions: hyperparameters are not inherited across trainer types, and a behavior
    that lists reward_signals gets exactly the signals it lists (each merged over the
    default's signal of the same name), so the resolved config reads back unchanged.
    """
    base = copy.deepcopy(default)
    default_type = base.get("trainer_type", "ppo")
    if behavior.get("trainer_type", default_type) != default_type:
        # PPO hyperparameters mean nothing to a SAC behavior (and vice versa).
        base.pop("hyperparameters", None)
    merged = _deep_merge(base, behavior)
    signals = behavior.get("reward_signals")
    default_signals = base.get("reward_signals")
    if isinstance(signals, Mapping):
        default_signals = default_signals if isinstance(default_signals, Mapping) else {}
        merged["reward_signals"] = {}
        for name, section in signals.items():
            inherited = default_signals.get(name)
            if isinstance(inherited, Mapping) and isinstance(section, Mapping):
                section = _deep_merge(dict(inherited), section)
            elif section is None:
                section = copy.deepcopy(inherited)
            merged["reward_signals"][name] = copy.deepcopy(section)
    return merged


# Flat (TF-era) format: keys of one section and where they go.
_FLAT_TRAINER_KEYS = (
    "trainer",
    "max_steps",
    "time_horizon",
    "summary_freq",
    "keep_checkpoints",
    "checkpoint_interval",
    "init_path",
    "threaded",
)
_FLAT_HYPER_KEYS = tuple(
    dict.fromkeys(_field_names(PPOSettings) + _field_names(SACSettings))
)
_FLAT_NETWORK_KEYS = tuple(k for k in _field_names(NetworkSettings) if k != "memory")
_FLAT_MEMORY_KEYS = ("use_recurrent", "memory_size", "sequence_length")
_FLAT_SECTION_KEYS = ("reward_signals", "pretraining", "behavioral_cloning")
# SAC of ML-Agents 0.10-0.13: `num_update` gradient steps every `train_interval` agent
# steps, replaced by `steps_per_update` (= train_interval / num_update) in 0.14.
_FLAT_LEGACY_SAC_KEYS = ("num_update", "train_interval")
_FLAT_KEYS = (
    _FLAT_TRAINER_KEYS + _FLAT_HYPER_KEYS + _FLAT_NETWORK_KEYS + _FLAT_MEMORY_KEYS
    + _FLAT_SECTION_KEYS + _FLAT_LEGACY_SAC_KEYS
)


def _legacy_steps_per_update(
    merged: Mapping[Any, Any], origin: Mapping[Any, str], name: str, trainer_type: str, where: _Where
) -> Optional[float]:
    """``train_interval / num_update`` from a 0.10-0.13 SAC section; None when absent."""
    present = [k for k in _FLAT_LEGACY_SAC_KEYS if k in merged]
    if not present:
        return None
    if trainer_type != "sac":
        own = [k for k in present if origin[k] == name]
        if own:
            raise _fail(where.key(own[0]), f"is a sac hyperparameter, but the trainer is {trainer_type}")
        return None  # inherited from a `default:` written for SAC
    if "steps_per_update" in merged:
        raise _fail(
            where.key(present[0]),
            "replaced by steps_per_update (= train_interval / num_update); give one or the other",
        )
    values = {}
    for key, low_ok in (("num_update", 1), ("train_interval", 1)):
        raw = merged.get(key, 1)
        value, location = _coerce(raw, int, where, key)
        if isinstance(value, bool) or not isinstance(value, int) or value < low_ok:
            raise _fail(location, f"expected an integer >= {low_ok}, got {_describe(value)}")
        values[key] = value
    return values["train_interval"] / values["num_update"]


# Keys that ML-Agents' own flat configs carry although no trainer of theirs read them:
# `gamma` directly in a behavior section of sac_trainer_config.yaml (VisualHallway,
# VisualPushBlock) from 0.10 (SAC's first release) to release_1 (0.16). Their trainers
# copied the section into a dict of parameters and read only the keys they knew
# (ml-agents/mlagents/trainers/trainer_util.py `initialize_trainer`); the discount is
# reward_signals.<signal>.gamma (sac/optimizer.py). Before 0.9 (no reward_signals) a
# top-level gamma *was* the discount, so it is only ignored beside reward_signals.
# Each maps to (the warning when ignored, the error's hint without reward_signals).
_FLAT_IGNORED_KEYS: Dict[str, Tuple[str, str]] = {
    "gamma": (
        "ignored, as ML-Agents 0.10 to 0.16 ignored it; the discount factor is "
        "reward_signals.<signal>.gamma",
        "unknown key; did you mean reward_signals.extrinsic.gamma?",
    ),
}


def _check_flat_section(
    section: Dict[Any, Any],
    name: str,
    default: Mapping[Any, Any],
    source: _Source,
) -> Dict[Any, Any]:
    """One section of the flat format checked: its ``trainer:`` first (an unsupported
    trainer is the line to show, not one of that trainer's own keys), then its keys.
    Returns the section without the keys ML-Agents ignored (`_FLAT_IGNORED_KEYS`), each
    reported by one warning line naming the file, line and key."""
    where = _Where(source.name).child(name)
    if "trainer" in section:
        _trainer_type(section["trainer"], where, "trainer")
    kept = dict(section)
    for key in section:
        if key in _FLAT_KEYS:
            continue
        if key in _FLAT_IGNORED_KEYS:
            ignored, hint = _FLAT_IGNORED_KEYS[key]
            if "reward_signals" in section or "reward_signals" in default:
                line = source.key_lines.get((str(name), str(key)))
                at = f"{source.name}: line {line}" if line is not None else source.name
                source.warn(f"{at}: {where.dotted(key)}", ignored, (name, key))
                del kept[key]
                continue
            raise _fail(where.key(key), hint)
        raise _unknown_key(key, _FLAT_KEYS, where)
    return kept


def _trainer_from_flat(
    default: Mapping[Any, Any],
    section: Mapping[Any, Any],
    name: str,
    source: _Source,
    max_steps: Optional[_Cli],
) -> TrainerSettings:
    """One behavior of the flat format: `section` overrides keys of `default` (shallow)."""
    merged = {**default, **section}
    origin = {key: (name if key in section else "default") for key in merged}
    remap = {str(key): f"{origin[key]}.{key}" for key in merged}
    remap["trainer_type"] = remap.get("trainer", f"{name}.trainer")
    where = _Where(source.name, name, remap)
    if max_steps is not None:
        merged["max_steps"] = max_steps

    trainer_type = _trainer_type(merged.get("trainer", "ppo"), where, "trainer")
    hyper_cls = HYPERPARAMETER_TYPES[trainer_type]
    own = _field_names(hyper_cls)
    hyper: Dict[str, Any] = {}
    for key in _FLAT_HYPER_KEYS:
        if key not in merged:
            continue
        if key in own:
            hyper[key] = merged[key]
        elif origin[key] == name:
            other = next(t for t, c in HYPERPARAMETER_TYPES.items() if key in _field_names(c))
            raise _fail(
                where.key(key), f"is a {other} hyperparameter, but the trainer is {trainer_type}"
            )
        # else: inherited from a `default:` written for the other trainer type; ignored.
    steps_per_update = _legacy_steps_per_update(merged, origin, name, trainer_type, where)
    if steps_per_update is not None:
        hyper["steps_per_update"] = steps_per_update

    memory: Optional[MemorySettings] = None
    use_recurrent, location = _coerce(
        merged.get("use_recurrent", False), bool, where, "use_recurrent"
    )
    if not isinstance(use_recurrent, bool):
        raise _fail(location, f"expected true or false, got {_describe(use_recurrent)}")
    if use_recurrent:
        # memory_size and sequence_length are ignored (as in ML-Agents) without use_recurrent.
        memory_keys = {k: merged[k] for k in ("memory_size", "sequence_length") if k in merged}
        memory = _build(MemorySettings, memory_keys, where)
    network_keys = {k: merged[k] for k in _FLAT_NETWORK_KEYS if k in merged}
    network = _build(NetworkSettings, network_keys, where, prebuilt={"memory": memory})

    if "pretraining" in merged and "behavioral_cloning" in merged:
        if origin["pretraining"] == origin["behavioral_cloning"]:
            raise _fail(
                where.key("pretraining"),
                "pretraining and behavioral_cloning are the same setting; give one of them",
            )
        # One comes from the behavior's own section, which overrides the default's.
        bc_key = "pretraining" if origin["pretraining"] == name else "behavioral_cloning"
    else:
        bc_key = "pretraining" if "pretraining" in merged else "behavioral_cloning"
    # pretraining (0.9-0.12) has the same keys as behavioral_cloning (0.13+).
    bc = _build_behavioral_cloning(merged.get(bc_key), where.child(bc_key), source)

    trainer_data = {k: merged[k] for k in _FLAT_TRAINER_KEYS if k in merged and k != "trainer"}
    prebuilt = {
        "trainer_type": trainer_type,
        "hyperparameters": _build(hyper_cls, hyper, where),
        "network_settings": network,
        "reward_signals": _build_reward_signals(
            merged.get("reward_signals"), where.child("reward_signals"), source
        ),
        "behavioral_cloning": bc,
    }
    return _build(TrainerSettings, trainer_data, where, prebuilt=prebuilt)


# --------------------------------------------------------------------------------------
# Command-line overrides.
# --------------------------------------------------------------------------------------

CLI_FLAGS: Dict[str, str] = {
    "env_path": "--env",
    "env_args": "--env-args",
    "num_envs": "--num-envs",
    "agents_per_env": "--agents-per-env",
    "seed": "--seed",
    "base_port": "--base-port",
    "timeout_wait": "--timeout-wait",
    "run_id": "--run-id",
    "results_dir": "--results-dir",
    "resume": "--resume",
    "force": "--force",
    "initialize_from": "--initialize-from",
    "inference": "--inference",
    "max_steps": "--max-steps",
    "num_gpus": "--num-gpus",
    "devices": "--devices",
    "debug": "--debug",
}
"""cli_overrides keys accepted by load_settings, and the flag each is reported as."""

# On/off flags: False means "not given" (a flag can only switch a setting on).
_CLI_SWITCHES = ("resume", "force", "inference", "debug")
_ENV_KEYS = ("env_path", "env_args", "num_envs", "agents_per_env", "seed", "base_port", "timeout_wait")
_CHECKPOINT_KEYS = ("run_id", "results_dir", "resume", "force", "initialize_from", "inference")


def _cli_values(cli_overrides: Optional[Mapping[str, Any]]) -> Dict[str, _Cli]:
    given: Dict[str, _Cli] = {}
    for key, value in (cli_overrides or {}).items():
        if key not in CLI_FLAGS:
            raise ValueError(
                f"unknown cli_overrides key {key!r}; expected one of {', '.join(CLI_FLAGS)}"
            )
        if value is None or (key in _CLI_SWITCHES and value is False):
            continue
        given[key] = _Cli(value, CLI_FLAGS[key])
    return given


def _overlay(raw: Dict[Any, Any], cli: Mapping[str, _Cli], keys: Iterable[str]) -> Dict[Any, Any]:
    out = dict(raw)
    for key in keys:
        if key in cli:
            out[key] = cli[key]
    return out


# --------------------------------------------------------------------------------------
# Loading.
# --------------------------------------------------------------------------------------

_NESTED_KEYS = (
    "behaviors",
    "default_settings",
    "env_settings",
    "engine_settings",
    "checkpoint_settings",
    "device_settings",
    "cluster_settings",
    "debug",
)


def _run_sections(
    doc: Mapping[Any, Any], where: _Where, cli: Mapping[str, _Cli], source: _Source
) -> Dict[str, Any]:
    """env, engine, checkpoint and device settings and debug, with CLI values on top."""
    env_where = where.child("env_settings")
    env_raw = _overlay(
        _compat_env(_as_mapping(doc.get("env_settings"), env_where), env_where, source),
        cli,
        _ENV_KEYS,
    )
    checkpoint_where = where.child("checkpoint_settings")
    checkpoint_raw = _overlay(
        _compat_checkpoint(_as_mapping(doc.get("checkpoint_settings"), checkpoint_where), checkpoint_where),
        cli,
        _CHECKPOINT_KEYS,
    )
    device_raw = _as_mapping(doc.get("device_settings"), where.child("device_settings"))
    if "num_gpus" in cli or "devices" in cli:
        # The command line's device choice replaces the file's as a whole.
        device_raw = _overlay({}, cli, ("num_gpus", "devices"))
    engine, _ = _coerce(doc.get("engine_settings"), Dict[str, Any], where, "engine_settings")
    env_settings = _build(EnvSettings, env_raw, env_where)
    _check_engine(engine, env_settings.env_path, where, source)
    debug, debug_at = _coerce(cli.get("debug", doc.get("debug", False)), bool, where, "debug")
    if not isinstance(debug, bool):
        raise _fail(debug_at, f"expected true or false, got {_describe(debug)}")
    return {
        "env_settings": env_settings,
        "engine_settings": engine,
        "checkpoint_settings": _build(
            CheckpointSettings, checkpoint_raw, where.child("checkpoint_settings")
        ),
        "device_settings": _build(DeviceSettings, device_raw, where.child("device_settings")),
        "cluster_settings": _build(
            ClusterSettings, doc.get("cluster_settings"), where.child("cluster_settings")
        ),
        "debug": debug,
    }


def _load_nested(doc: Mapping[Any, Any], source: _Source, cli: Mapping[str, _Cli]) -> RunOptions:
    where = _Where(source.name)
    doc = _compat_top_level(doc, where, source)
    for key in doc:
        if key not in _NESTED_KEYS:
            raise _unknown_key(key, _NESTED_KEYS, where)
    max_steps = {"max_steps": cli["max_steps"]} if "max_steps" in cli else {}

    default_where = where.child("default_settings")
    default_raw = _as_mapping(doc.get("default_settings"), default_where)
    default_settings: Optional[TrainerSettings] = None
    if doc.get("default_settings") is not None or max_steps:
        # --max-steps must reach unnamed behaviors too, so it creates default_settings.
        default_settings = _trainer_from_nested({**default_raw, **max_steps}, default_where, source)

    behaviors_where = where.child("behaviors")
    behaviors: Dict[str, TrainerSettings] = {}
    for name, raw in _as_mapping(doc.get("behaviors"), behaviors_where).items():
        behavior_where = behaviors_where.child(name)
        section = _as_mapping(raw, behavior_where)
        merged = {**_merge_over_default(default_raw, section), **max_steps}
        behaviors[str(name)] = _trainer_from_nested(merged, behavior_where, source)
    if not behaviors and doc.get("default_settings") is None and max_steps:
        # Which behaviors the environment has is known only once it runs. Without a
        # section or default_settings, trainers/learn.py refuses each of them, as ML-Agents
        # does since release 17 (settings.py `DefaultTrainerDict.__missing__`); here
        # --max-steps made default_settings, so they would all train with the defaults.
        source.warn(
            behaviors_where.here(),
            "no behavior is configured and there is no default_settings: every behavior the "
            "environment reports trains with the default settings (and --max-steps)",
        )

    options = _construct(
        RunOptions,
        dict(
            behaviors=behaviors,
            default_settings=default_settings,
            **_run_sections(doc, where, cli, source),
        ),
        where.key,
    )
    _check_deterministic(options, source)
    return options


def _load_flat(doc: Mapping[Any, Any], source: _Source, cli: Mapping[str, _Cli]) -> RunOptions:
    where = _Where(source.name)
    default = _as_mapping(doc["default"], where.child("default"))
    default = _check_flat_section(default, "default", default, source)
    max_steps = cli.get("max_steps")
    default_settings = _trainer_from_flat(default, {}, "default", source, max_steps)
    behaviors: Dict[str, TrainerSettings] = {}
    for name, raw in doc.items():
        if name == "default":
            continue
        section = _as_mapping(raw, where.child(name))
        section = _check_flat_section(section, str(name), default, source)
        behaviors[str(name)] = _trainer_from_flat(default, section, str(name), source, max_steps)
    return _construct(
        RunOptions,
        dict(
            behaviors=behaviors,
            default_settings=default_settings,
            **_run_sections({}, where, cli, source),
        ),
        where.key,
    )


def _print_warning(message: str) -> None:
    print(f"[WARNING] {message}", file=sys.stderr, flush=True)


def load_settings(
    path: str,
    cli_overrides: Optional[Mapping[str, Any]] = None,
    on_warning: Optional[Callable[[str], None]] = None,
) -> RunOptions:
    """Reads, validates and resolves a trainer config (nested or flat format).

    Args:
      path: the YAML file.
      cli_overrides: command-line values (keys in CLI_FLAGS); None or absent: not given;
        False for an on/off flag (resume, force, inference, debug): not given. Strings are
        parsed where numbers or booleans are meant. ``max_steps`` applies to every behavior
        and to default_settings; ``num_gpus``/``devices`` replace the file's device choice.
      on_warning: called with each warning line (a duplicate key, a key of another
        ML-Agents release that is ignored or done differently), once the file has loaded;
        None: printed to stderr as ``[WARNING] <file>: <path>: <message>``.

    Returns:
      The frozen RunOptions.

    Raises:
      ConfigError: one line naming the file (or the flag), the YAML path and the problem.
    """
    cli = _cli_values(cli_overrides)
    source = _Source(path)
    read = _read_yaml(path)
    doc = read.doc
    source.key_lines = read.key_lines
    for line, key in read.duplicates:
        source.warn(
            f"{path}: line {line}", f"duplicate key {_describe(key)}; the last value is used", (line, key)
        )
    if doc is None:
        raise ConfigError(f"{path}: the file is empty; expected a trainer configuration")
    if not isinstance(doc, Mapping):
        raise ConfigError(f"{path}: expected a mapping at the top level, got {_describe(doc)}")
    nested = [k for k in doc if k in _NESTED_KEYS or k in _NOT_SUPPORTED or k == "torch_settings"]
    if "default" in doc and nested:
        raise ConfigError(
            f"{path}: mixes the flat format (default:) with the nested format "
            f"({nested[0]}:); use one of them"
        )
    if nested or "default" in doc:
        options = _load_nested(doc, source, cli) if nested else _load_flat(doc, source, cli)
        for message in source.warnings:
            (on_warning or _print_warning)(message)
        return options
    first = next(iter(doc), None)
    hint = _suggestion(first, _NESTED_KEYS + ("default",)) if first is not None else ""
    raise ConfigError(
        f"{path}: not a trainer configuration: expected a behaviors: section (nested format) "
        f"or a default: section (flat format), found {_describe(first)}{hint}"
    )


# --------------------------------------------------------------------------------------
# Keys of other ML-Agents releases (issues 14 and 15).
#
# Rule: a key we honour is translated; a key we cannot honour gives one warning line
# naming it and what we do instead, unless its value asks for nothing (null, false, or
# ML-Agents' own default where that default is what we do anyway); a key that would change
# learning in a way we cannot reproduce refuses the file. Applied to the raw YAML mapping
# before the dataclasses are built, so a resolved config holds only our own keys.
# --------------------------------------------------------------------------------------

_UNSUPPORTED_TRAINERS: Dict[str, str] = {
    "poca": "not supported (MA-POCA, the cooperative multi-agent trainer of ML-Agents 2.0); "
    "use ppo or sac",
    "offline_bc": "not supported (the offline behavioral cloning trainer of ML-Agents 0.x); "
    "use ppo with behavioral_cloning",
    "online_bc": "not supported (the online behavioral cloning trainer of ML-Agents 0.x); "
    "use ppo with behavioral_cloning",
    "imitation": "not supported (the imitation trainer of ML-Agents 0.x); "
    "use ppo with behavioral_cloning",
}

_UNSUPPORTED_SIGNALS: Dict[str, str] = {
    "rnd": "not supported (random network distillation, ML-Agents 2.0); use curiosity",
}

# env_settings keys that manage Unity processes, with ML-Agents' defaults.
# (timeout_wait is a field of EnvSettings: the Unity communicator honours it.)
_UNITY_PROCESS_KEYS: Dict[str, Any] = {
    "max_lifetime_restarts": 10,
    "restarts_rate_limit_n": 1,
    "restarts_rate_limit_period_s": 60,
}


def _pop_network_extras(network: Any, where: _Where, source: _Source, signal: bool = False) -> Any:
    """``network_settings`` keys of ML-Agents 2.x that are not fields of NetworkSettings
    (``signal``: a reward signal's network, where ``deterministic`` means nothing)."""
    if not isinstance(network, Mapping):
        return network
    network = dict(network)
    if "goal_conditioning_type" in network:
        value = network.pop("goal_conditioning_type")
        if value not in ("hyper", "none"):
            raise _fail(where.key("goal_conditioning_type"), _choice_message(value, ("hyper", "none")))
        # Only goal-signal observations are conditioned on, and no environment we run
        # produces them: either value gives the same network, as in ML-Agents.
    if "deterministic" in network:
        value = network.pop("deterministic")
        if not isinstance(value, bool):
            raise _fail(where.key("deterministic"), f"expected true or false, got {_describe(value)}")
        if value and not signal:
            source.deterministic_at.append(where.key("deterministic"))
    return network


def _compat_trainer(data: Dict[Any, Any], where: _Where, source: _Source) -> Dict[Any, Any]:
    """A nested ``behaviors.<name>`` / ``default_settings`` section with the keys of other
    ML-Agents releases translated, warned about or refused."""
    data = dict(data)
    if "framework" in data:
        # release_7 to release_10 (ML-Agents 0.20-0.23): tensorflow or pytorch.
        value = data.pop("framework")
        if value not in ("tensorflow", "pytorch"):
            raise _fail(where.key("framework"), _choice_message(value, ("tensorflow", "pytorch")))
        if value == "pytorch":
            source.warn(
                where.key("framework"),
                "pytorch: ignored; trainer-learn trains the same algorithm with TensorFlow",
                "framework",
            )
    if "even_checkpoints" in data:
        # ML-Agents 2.x: checkpoint_interval = max_steps // keep_checkpoints.
        value = data.pop("even_checkpoints")
        if not isinstance(value, bool):
            raise _fail(where.key("even_checkpoints"), f"expected true or false, got {_describe(value)}")
        if value:
            max_steps, _ = _coerce(data.get("max_steps", 500000), int, where, "max_steps")
            keep, _ = _coerce(data.get("keep_checkpoints", 5), int, where, "keep_checkpoints")
            if _is_int(max_steps) and _is_int(keep) and keep > 0:
                data["checkpoint_interval"] = max(max_steps // keep, 1)
    if "self_play" in data and data["self_play"] is None:
        del data["self_play"]  # ML-Agents writes `self_play: null` into every resolved config
    if "network_settings" in data:
        data["network_settings"] = _pop_network_extras(
            data["network_settings"], where.child("network_settings"), source
        )
    return data


def _compat_signal(name: str, section: Any, where: _Where, source: _Source) -> Any:
    """``reward_signals.<name>`` of ML-Agents 2.0: its ``network_settings`` and the
    ``encoding_size: null`` it writes beside them."""
    if not isinstance(section, Mapping):
        return section
    section = dict(section)
    if name == "extrinsic":
        # ML-Agents 2.0 gives every signal a network_settings; the extrinsic signal has no
        # network, and ML-Agents ignores it there too.
        section.pop("network_settings", None)
        return section
    if "network_settings" not in section:
        if "encoding_size" in section and section["encoding_size"] is None:
            del section["encoding_size"]
        return section
    network = section["network_settings"]
    if network is None:
        del section["network_settings"]
        return section
    section["network_settings"] = _pop_network_extras(
        network, where.child("network_settings"), source, signal=True
    )
    if section.get("encoding_size") is not None:
        source.warn(
            where.key("encoding_size"),
            "ignored: network_settings.hidden_units sets the encoding size (as in ML-Agents 2.0)",
            f"{name}.encoding_size",
        )
    section.pop("encoding_size", None)
    return section


def _compat_env(raw: Dict[Any, Any], where: _Where, source: _Source) -> Dict[Any, Any]:
    raw = dict(raw)
    if "num_areas" in raw:
        value = raw["num_areas"]
        if not _is_int(value) or value < 1:
            raise _fail(where.key("num_areas"), f"expected an integer >= 1, got {_describe(value)}")
        env_path = raw.get("env_path")
        if value != 1 and isinstance(env_path, str) and env_path.startswith(("builtin:", "gym:")):
            source.warn(
                where.key("num_areas"),
                f"{value}: ignored (training areas are instantiated by a Unity build, and "
                f"{env_path} is not one); use agents_per_env for more agents per environment",
            )
    for key, default in _UNITY_PROCESS_KEYS.items():
        if key in raw:
            value = raw.pop(key)
            if value != default:
                source.warn(
                    where.key(key),
                    f"{_describe(value)}: ignored (Unity process restarts and timeouts); "
                    "a crashed environment ends the run",
                )
    args = raw.get("env_args")
    if isinstance(args, (list, tuple)):
        # ML-Agents: command-line arguments for the Unity executable. A Unity build reads
        # them as {args: [...]} (envs/unity/manager.py); other envs take keyword arguments.
        env_path = raw.get("env_path")
        if env_path is None or (isinstance(env_path, str) and not env_path.startswith(("builtin:", "gym:"))):
            raw["env_args"] = {"args": list(args)}
        else:
            del raw["env_args"]
            source.warn(
                where.key("env_args"),
                "a list (arguments for a Unity executable): ignored; env_args is a mapping of "
                "the environment's keyword arguments here",
            )
    return raw


def _compat_checkpoint(raw: Dict[Any, Any], where: _Where) -> Dict[Any, Any]:
    raw = dict(raw)
    if "load_model" in raw:
        # ML-Agents' old spelling of --resume (--load).
        value = raw.pop("load_model")
        if not isinstance(value, bool):
            raise _fail(where.key("load_model"), f"expected true or false, got {_describe(value)}")
        if value and not raw.get("resume"):
            raw["resume"] = True
    if "train_model" in raw:
        # ML-Agents' old --train: training is the default (--inference plays only), and
        # ML-Agents itself ignores it since release 3.
        value = raw.pop("train_model")
        if not isinstance(value, bool):
            raise _fail(where.key("train_model"), f"expected true or false, got {_describe(value)}")
    return raw


def _compat_top_level(doc: Mapping[Any, Any], where: _Where, source: _Source) -> Dict[Any, Any]:
    """The top-level keys of ML-Agents 2.x resolved configs."""
    doc = dict(doc)
    if "environment_parameters" in doc and doc["environment_parameters"] is None:
        del doc["environment_parameters"]
    if "torch_settings" in doc:
        torch = doc.pop("torch_settings")
        torch_map = _as_mapping(torch, where.child("torch_settings"))
        for key in torch_map:
            if key != "device":
                raise _unknown_key(key, ("device",), where.child("torch_settings"))
        if torch_map.get("device") is not None:
            source.warn(
                where.child("torch_settings").key("device"),
                f"{_describe(torch_map['device'])}: ignored; trainer-learn trains with "
                "TensorFlow: choose devices with device_settings or --devices",
            )
    return doc


def _check_engine(engine: Mapping[str, Any], env_path: Optional[str], where: _Where, source: _Source) -> None:
    if engine and env_path is not None and env_path.startswith(("builtin:", "gym:")):
        source.warn(
            where.key("engine_settings"),
            f"{', '.join(map(str, engine))}: ignored; they configure a Unity build, and "
            f"{env_path} is not one",
        )


def _check_threaded(settings: TrainerSettings, where: _Where, source: _Source) -> None:
    """``threaded: true`` runs PPO's buffer updates in a thread (trainers/threaded.py); SAC
    updates every few steps from its replay buffer, between environment steps."""
    if settings.threaded and not settings.updates_in_thread:
        source.warn(
            where.key("threaded"),
            f"true: ignored for trainer_type {settings.trainer_type}; its updates run between "
            "environment steps",
            ("threaded", settings.trainer_type),
        )


def _check_signal_normalize(settings: TrainerSettings, where: _Where, source: _Source) -> None:
    """A signal's ``network_settings.normalize: true`` reads through the policy's running
    normalisation; without one (the behavior's ``normalize: false``) it reads raw values."""
    if settings.network_settings.normalize:
        return
    for name, signal in settings.reward_signals.items():
        network = getattr(signal, "network_settings", None)
        if network is not None and network.normalize:
            source.warn(
                where.child("reward_signals").child(name).child("network_settings").key("normalize"),
                "true: the signal reads raw observations, because the behavior's "
                "network_settings.normalize is false (its running normalisation is the one "
                "signals share)",
                f"{name}.network_settings.normalize",
            )


def _check_deterministic(options: RunOptions, source: _Source) -> None:
    """``network_settings.deterministic: true`` (ML-Agents 2.2): the policy acts with its
    mode even while training. Honoured by --inference (which always acts so); training
    with it would need the log-probabilities of the modes, so it is refused there."""
    if source.deterministic_at and not options.checkpoint_settings.inference:
        raise _fail(
            source.deterministic_at[0],
            "true is supported with --inference only (deterministic actions while training "
            "are not); remove it to train",
        )


# --------------------------------------------------------------------------------------
# Writing.
# --------------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def to_dict(options: Any) -> Dict[str, Any]:
    """RunOptions (or any settings dataclass) as plain dicts, lists and scalars.

    For RunOptions this is the nested YAML format with every default filled in.
    """
    if not dataclasses.is_dataclass(options) or isinstance(options, type):
        raise TypeError(f"expected a settings dataclass, got {type(options).__name__}")
    return _plain(options)


def load_cluster_file(path: str) -> ClusterSettings:
    """Reads ``--cluster=<file>``: a cluster file (``chief:``, ``workers:``, ...) or a
    trainer config with a ``cluster_settings:`` section."""
    read = _read_yaml(path)
    doc = read.doc
    for line, key in read.duplicates:
        print(
            f"[WARNING] {path}: line {line}: duplicate key {_describe(key)}; the last value is used",
            file=sys.stderr,
        )
    if not isinstance(doc, Mapping):
        raise ConfigError(f"{path}: expected a mapping with chief: and workers:, got {_describe(doc)}")
    where = _Where(path)
    if "cluster_settings" in doc:
        doc, where = doc["cluster_settings"], where.child("cluster_settings")
    settings = _build(ClusterSettings, doc, where)
    if not settings.enabled:
        raise ConfigError(f"{where.key('chief')}: expected the chief's host:port")
    return settings


def write_resolved_config(options: RunOptions, path: str) -> None:
    """Writes `options` as a nested-format YAML file that `load_settings` reads back equal."""
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    text = yaml.safe_dump(to_dict(options), sort_keys=False, default_flow_style=False)
    temporary = f"{path}.tmp"
    with open(temporary, "w", encoding="utf-8") as stream:
        stream.write(
            f"# Resolved configuration (trainer-learn {__version__}); every default filled in.\n"
        )
        stream.write(text)
    os.replace(temporary, path)
