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
line each (see "Keys of other ML-Agents releases" in compat.py); warnings go to ``on_warning``
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

from trainers.config.limits import (
    MAX_BODY_WEIGHTS,
    MAX_BUFFER_SIZE,
    MAX_HIDDEN_UNITS,
    MAX_MEMORY_SIZE,
    MAX_NUM_LAYERS,
    MAX_SEQUENCE_LENGTH,
)
from trainers.config.loader import (
    CLI_FLAGS,
    load_cluster_file,
    load_settings,
    to_dict,
    write_resolved_config,
)
from trainers.config.schema import (
    ACTIVATION_TYPES,
    ENCODER_TYPES,
    HYPERPARAMETER_TYPES,
    REWARD_SIGNAL_TYPES,
    SCHEDULE_TYPES,
    TRAINER_TYPES,
    ActivationType,
    BehavioralCloningSettings,
    CheckpointSettings,
    ClusterSettings,
    CuriositySettings,
    DeviceSettings,
    EncoderType,
    EnvSettings,
    ExtrinsicSettings,
    GAILSettings,
    HyperparamSettings,
    MemorySettings,
    NetworkSettings,
    PPOSettings,
    RewardSignalSettings,
    RunOptions,
    SACSettings,
    ScheduleType,
    TrainerSettings,
    TrainerType,
)

__all__ = [
    "CLI_FLAGS",
    "load_settings",
    "to_dict",
    "load_cluster_file",
    "write_resolved_config",
    "TrainerType",
    "ScheduleType",
    "EncoderType",
    "ActivationType",
    "TRAINER_TYPES",
    "SCHEDULE_TYPES",
    "ENCODER_TYPES",
    "ACTIVATION_TYPES",
    "PPOSettings",
    "SACSettings",
    "HyperparamSettings",
    "HYPERPARAMETER_TYPES",
    "MemorySettings",
    "NetworkSettings",
    "RewardSignalSettings",
    "ExtrinsicSettings",
    "CuriositySettings",
    "GAILSettings",
    "REWARD_SIGNAL_TYPES",
    "BehavioralCloningSettings",
    "TrainerSettings",
    "EnvSettings",
    "CheckpointSettings",
    "DeviceSettings",
    "ClusterSettings",
    "RunOptions",
    "MAX_HIDDEN_UNITS",
    "MAX_NUM_LAYERS",
    "MAX_BODY_WEIGHTS",
    "MAX_MEMORY_SIZE",
    "MAX_SEQUENCE_LENGTH",
    "MAX_BUFFER_SIZE",
]
