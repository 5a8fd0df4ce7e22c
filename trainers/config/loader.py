"""`load_settings`: reads a trainer config (nested or flat format), applies the command
line's values and resolves it into frozen `RunOptions`; `write_resolved_config` and
`load_cluster_file`. The rules are documented in docs/config.md."""

from __future__ import annotations

import copy
import dataclasses
import os
import sys
from typing import Any, Callable, Dict, Iterable, Mapping, Optional, Tuple

import yaml

from trainers import __version__
from trainers.config._fields import _choice_message, _describe, _suggestion
from trainers.config.builder import (
    _NOT_SUPPORTED,
    _as_mapping,
    _build,
    _Cli,
    _coerce,
    _construct,
    _fail,
    _field_names,
    _Source,
    _unknown_key,
    _Where,
)
from trainers.config.compat import (
    _UNSUPPORTED_SIGNALS,
    _UNSUPPORTED_TRAINERS,
    _check_deterministic,
    _check_engine,
    _check_signal_normalize,
    _check_threaded,
    _compat_checkpoint,
    _compat_env,
    _compat_signal,
    _compat_top_level,
    _compat_trainer,
)
from trainers.config.run import RaySettings
from trainers.config.schema import (
    HYPERPARAMETER_TYPES,
    REWARD_SIGNAL_TYPES,
    TRAINER_TYPES,
    BehavioralCloningSettings,
    CheckpointSettings,
    ClusterSettings,
    DeviceSettings,
    EngineSettings,
    EnvSettings,
    GAILSettings,
    MemorySettings,
    NetworkSettings,
    PPOSettings,
    RunOptions,
    SACSettings,
    TrainerSettings,
    _default_reward_signals,
)
from trainers.config.curriculum_files import load_environment_parameters
from trainers.config.yaml_reader import _read_yaml
from trainers.exceptions import ConfigError


# --------------------------------------------------------------------------------------
# Building a behavior's sections.
# --------------------------------------------------------------------------------------


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
    "evaluation",
    "self_play",
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
    "width": "--width",
    "height": "--height",
    "quality_level": "--quality-level",
    "time_scale": "--time-scale",
    "target_frame_rate": "--target-frame-rate",
    "capture_frame_rate": "--capture-frame-rate",
    "no_graphics": "--no-graphics",
    "no_graphics_monitor": "--no-graphics-monitor",
    # ML-Agents 0.11-0.15's files, converted into environment_parameters (curriculum_files).
    "curriculum": "--curriculum",
    "sampler": "--sampler",
    # Ray rollout workers (env_settings.ray.address / num_workers).
    "ray": "--ray",
    "ray_workers": "--ray-workers",
}
"""cli_overrides keys accepted by load_settings, and the flag each is reported as."""

# On/off flags: False means "not given" (a flag can only switch a setting on).
_CLI_SWITCHES = ("resume", "force", "inference", "debug", "no_graphics", "no_graphics_monitor")
_ENV_KEYS = ("env_path", "env_args", "num_envs", "agents_per_env", "seed", "base_port", "timeout_wait")
_CHECKPOINT_KEYS = ("run_id", "results_dir", "resume", "force", "initialize_from", "inference")
_ENGINE_KEYS = (
    "width",
    "height",
    "quality_level",
    "time_scale",
    "target_frame_rate",
    "capture_frame_rate",
    "no_graphics",
    "no_graphics_monitor",
)


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


def _with_ray_cli(env: Mapping[Any, Any], cli: Mapping[str, _Cli], where: _Where) -> Dict[Any, Any]:
    """``env_settings`` with ``--ray`` / ``--ray-workers`` laid over its ``ray:`` section
    (either flag asks for Ray rollout workers)."""
    out = dict(env)
    if "ray" in cli or "ray_workers" in cli:
        ray = dict(_as_mapping(out.get("ray"), where.child("ray")))
        if "ray" in cli:
            ray["address"] = cli["ray"]
        if "ray_workers" in cli:
            ray["num_workers"] = cli["ray_workers"]
        out["ray"] = ray
    return out


def _build_env(raw: Mapping[Any, Any], where: _Where) -> EnvSettings:
    """EnvSettings with its ``ray:`` section built as `RaySettings` (null: no Ray)."""
    ray_raw = raw.get("ray")
    ray = _build(RaySettings, ray_raw, where.child("ray")) if ray_raw is not None else None
    return _build(EnvSettings, {k: v for k, v in raw.items() if k != "ray"}, where, prebuilt={"ray": ray})


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
    "environment_parameters",
)


def _run_sections(
    doc: Mapping[Any, Any], where: _Where, cli: Mapping[str, _Cli], source: _Source
) -> Dict[str, Any]:
    """env, engine, checkpoint and device settings and debug, with CLI values on top."""
    env_where = where.child("env_settings")
    env_raw = _overlay(
        _compat_env(_with_ray_cli(_as_mapping(doc.get("env_settings"), env_where), cli, env_where), env_where, source),
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
    engine_where = where.child("engine_settings")
    engine_raw = _as_mapping(doc.get("engine_settings"), engine_where)
    env_settings = _build_env(env_raw, env_where)
    # Only the file's keys are warned about for non-Unity envs (a flag says what it sets).
    _check_engine(engine_raw, env_settings.env_path, where, source)
    engine = _build(EngineSettings, _overlay(engine_raw, cli, _ENGINE_KEYS), engine_where)
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
            environment_parameters=_environment_parameters(doc, where, cli, source, behaviors, default_settings),
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
            environment_parameters=_environment_parameters({}, where, cli, source, behaviors, default_settings),
            **_run_sections({}, where, cli, source),
        ),
        where.key,
    )


def _environment_parameters(
    doc: Mapping[Any, Any],
    where: _Where,
    cli: Mapping[str, _Cli],
    source: _Source,
    behaviors: Mapping[str, TrainerSettings],
    default_settings: Optional[TrainerSettings],
) -> Dict[str, Any]:
    """``environment_parameters`` with ``--curriculum`` / ``--sampler`` (trainers.config.curriculum_files)."""
    paths = {key: str(cli[key].value) if key in cli else None for key in ("curriculum", "sampler")}
    return load_environment_parameters(
        doc.get("environment_parameters"), where.child("environment_parameters"), source,
        paths["curriculum"], paths["sampler"], behaviors, default_settings is not None,
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
# Writing.
# --------------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    if isinstance(value, EngineSettings):
        return value.given()  # what was set: the build's own defaults are not ours to write
    if hasattr(value, "to_config"):  # a sampler: ML-Agents' sampler_type/sampler_parameters
        return value.to_config()
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
