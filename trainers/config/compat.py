"""Keys of other ML-Agents releases, translated, warned about or refused (and the other
warnings given once a section is built)."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional

from trainers.config._fields import _choice_message, _describe, _is_int
from trainers.config.builder import _as_mapping, _coerce, _fail, _Source, _unknown_key, _Where
from trainers.config.schema import RunOptions, TrainerSettings


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
    "offline_bc": "not supported (the offline behavioral cloning trainer of ML-Agents 0.x); "
    "use ppo with behavioral_cloning",
    "online_bc": "not supported (the online behavioral cloning trainer of ML-Agents 0.x); "
    "use ppo with behavioral_cloning",
    "imitation": "not supported (the imitation trainer of ML-Agents 0.x); "
    "use ppo with behavioral_cloning",
}

_UNSUPPORTED_SIGNALS: Dict[str, str] = {
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
    ray = raw.get("ray")
    if "max_lifetime_restarts" in raw and isinstance(ray, Mapping) and "max_lifetime_restarts" not in ray:
        # Honoured by Ray rollout workers (trainers.loop.ray_rollouts): their restarts.
        raw["ray"] = {**ray, "max_lifetime_restarts": raw.pop("max_lifetime_restarts")}
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
        # them as {args: [...]} (envs/unity/options.py); other envs take keyword arguments.
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
