"""The curriculum and sampler files of ML-Agents 0.11-0.15 (``--curriculum``,
``--sampler``), converted into the ``environment_parameters`` settings the nested format
gives (`trainers.config.environment_parameters`).

``--curriculum=<file|dir>``: per behavior, ``measure`` (reward or progress), ``thresholds``
(one per lesson but the last), ``min_lesson_length``, ``signal_smoothing`` and
``parameters`` (per parameter, one value per lesson). 0.11-0.13 took a directory of
``<Behavior>.json`` files; 0.14-0.15 one YAML file keyed by behavior; a single behavior's
file (``<Behavior>.json``) is read as that behavior's. Each parameter becomes a curriculum
whose lessons are ``Lesson0``, ``Lesson1``, ...: lesson ``i`` has the parameter's ``i``-th
value and ends when the behavior's measure passes ``thresholds[i]``, with
``require_reset: true``, as 0.x reset the environment at every lesson change (ML-Agents'
``mlagents-upgrade-config`` leaves it false). Every key is required, as 0.x's
``Curriculum`` required it. ``--lesson`` (0.x's starting lesson) is not taken.

``--sampler=<file>``: ``resampling-interval`` (required, > 0) and per parameter
``sampler-type`` (``uniform``: min_value, max_value; ``gaussian``: mean, st_dev;
``multirange_uniform``: intervals) with its arguments. Each becomes a sampler with the
run's seed rule (ML-Agents' ``seed: -1``). 0.x drew every sampler in the trainer every
``resampling-interval`` steps and reset the environment; Release 22 (and this trainer)
draws at each episode start instead, so the interval is checked, then reported unused by
one warning line (ML-Agents' upgrade script drops it too).
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Mapping, Optional, Tuple

from trainers.config._fields import _describe, _is_int, _is_number, _suggestion
from trainers.config.builder import _as_mapping, _build, _construct, _fail, _Source, _Where
from trainers.config.environment_parameters import (
    MEASURES,
    build_environment_parameters,
    check_behaviors,
    merge_parameters,
    CompletionCriteriaSettings,
    ConstantSettings,
    EnvironmentParameterSettings,
    GaussianSettings,
    Lesson,
    MultiRangeUniformSettings,
    UniformSettings,
)
from trainers.config.yaml_reader import _read_yaml

Parameters = Tuple[Dict[str, EnvironmentParameterSettings], Dict[str, _Where]]

_CURRICULUM_KEYS = ("measure", "thresholds", "min_lesson_length", "signal_smoothing", "parameters")
_CURRICULUM_SUFFIXES = (".json", ".yaml", ".yml")
#: 0.x's sampler types (``SamplerFactory.NAME_TO_CLASS``) -> settings and their arguments.
_SAMPLERS: Dict[str, Tuple[type, Tuple[str, ...]]] = {
    "uniform": (UniformSettings, ("min_value", "max_value")),
    "gaussian": (GaussianSettings, ("mean", "st_dev")),
    "multirange_uniform": (MultiRangeUniformSettings, ("intervals",)),
}


def _read(path: str, source: _Source) -> Any:
    read = _read_yaml(path)  # JSON is YAML: 0.11-0.13's files read the same
    for line, key in read.duplicates:
        source.warn(f"{path}: line {line}", f"duplicate key {_describe(key)}; the last value is used", (path, line))
    return read.doc


def read_curriculum(path: str, source: _Source) -> Parameters:
    """``--curriculum``: a directory of ``<Behavior>.json``, a YAML file keyed by behavior,
    or one behavior's file; returns the parameters and where each was given."""
    sections: List[Tuple[str, Any, _Where]] = []
    if os.path.isdir(path):
        names = sorted(n for n in os.listdir(path) if n.endswith(_CURRICULUM_SUFFIXES))
        if not names:
            raise _fail(f"--curriculum={path}", "the directory has no <Behavior>.json curriculum files")
        for file_name in names:
            file_path = os.path.join(path, file_name)
            sections.append((os.path.splitext(file_name)[0], _read(file_path, source), _Where(file_path)))
    else:
        doc = _read(path, source)
        if doc is None:
            raise _fail(path, "the file is empty; expected a curriculum per behavior")
        if not isinstance(doc, Mapping):
            raise _fail(path, f"expected a mapping of behavior -> curriculum, got {_describe(doc)}")
        if any(key in doc for key in _CURRICULUM_KEYS):  # one behavior's file, named after it
            sections.append((os.path.splitext(os.path.basename(path))[0], doc, _Where(path)))
        else:
            for behavior, section in doc.items():
                sections.append((str(behavior), section, _Where(path).child(behavior)))
    parameters: Dict[str, EnvironmentParameterSettings] = {}
    wheres: Dict[str, _Where] = {}
    for behavior, section, where in sections:
        for name, settings in _convert_curriculum(behavior, section, where).items():
            if name in parameters:
                raise _fail(
                    where.key("parameters"),
                    f"parameter {name!r} is also in the curriculum at {wheres[name].here()}; one curriculum per "
                    "parameter (0.x's result depended on the order)",
                )
            parameters[name] = settings
            wheres[name] = where  # the behavior's section: what an error about it names
    return parameters, wheres


def _check_curriculum_behaviors(parameters: Parameters, behaviors: Mapping[str, Any], has_default: bool) -> None:
    """A 0.x curriculum's behavior (its section's key, or its file's name) is configured."""
    if has_default:
        return
    settings, wheres = parameters
    for name, parameter in settings.items():
        behavior = parameter.behaviors[0] if parameter.behaviors else None
        if behavior is not None and behavior not in behaviors:
            configured = ", ".join(behaviors) if behaviors else "none"
            raise _fail(
                wheres[name].here(),
                f"{behavior!r} is not a configured behavior (behaviors: {configured})"
                f"{_suggestion(behavior, list(behaviors))}",
            )


def _convert_curriculum(behavior: str, raw: Any, where: _Where) -> Dict[str, EnvironmentParameterSettings]:
    """One behavior's 0.x curriculum -> its parameters' curricula."""
    data = _as_mapping(raw, where)
    for key in data:
        if key not in _CURRICULUM_KEYS:
            expected = ", ".join(_CURRICULUM_KEYS)
            raise _fail(where.key(key), f"unknown key{_suggestion(key, _CURRICULUM_KEYS)} (expected {expected})")
    for key in _CURRICULUM_KEYS:
        if key not in data:
            raise _fail(where.key(key), "required key is missing (0.x required every curriculum key)")
    measure = data["measure"]
    if measure not in MEASURES:
        raise _fail(where.key("measure"), f"expected one of {', '.join(MEASURES)}, got {_describe(measure)}")
    thresholds = data["thresholds"]
    if isinstance(thresholds, (str, bytes)) or not isinstance(thresholds, list):
        raise _fail(where.key("thresholds"), f"expected a list of numbers, got {_describe(thresholds)}")
    values = _as_mapping(data["parameters"], where.child("parameters"))
    if not values:
        raise _fail(where.key("parameters"), "expected at least one parameter with its values per lesson")
    criteria: List[CompletionCriteriaSettings] = []
    for i, threshold in enumerate(thresholds):
        locations = {
            "threshold": f"{where.key('thresholds')}[{i}]",
            "behavior": where.here(),
        }
        criteria.append(
            _construct(
                CompletionCriteriaSettings,
                dict(
                    behavior=behavior,
                    measure=measure,
                    threshold=threshold,
                    min_lesson_length=data["min_lesson_length"],
                    signal_smoothing=data["signal_smoothing"],
                    require_reset=True,  # 0.x reset the environment at every lesson change
                ),
                lambda key: locations.get(key, where.key(key)),
            )
        )
    out: Dict[str, EnvironmentParameterSettings] = {}
    for name, lesson_values in values.items():
        at = where.child("parameters").key(name)
        if isinstance(lesson_values, (str, bytes)) or not isinstance(lesson_values, list):
            raise _fail(
                at, f"expected a list of {len(thresholds) + 1} numbers (one per lesson), got {_describe(lesson_values)}"
            )
        if len(lesson_values) != len(thresholds) + 1:
            raise _fail(
                at,
                f"expected {len(thresholds) + 1} values (one per lesson: {len(thresholds)} thresholds + 1), "
                f"got {len(lesson_values)}",
            )
        lessons = []
        for i, value in enumerate(lesson_values):
            if not _is_number(value):
                raise _fail(f"{at}[{i}]", f"expected a number, got {_describe(value)}")
            lessons.append(Lesson(f"Lesson{i}", ConstantSettings(value), criteria[i] if i < len(criteria) else None))
        out[str(name)] = EnvironmentParameterSettings(tuple(lessons))
    return out


def read_sampler_file(path: str, source: _Source) -> Parameters:
    """``--sampler``: 0.11-0.15's sampler file -> a sampler per parameter (see the module
    docstring for ``resampling-interval``)."""
    doc = _read(path, source)
    where = _Where(path)
    data = _as_mapping(doc, where)
    if "resampling-interval" not in data:
        raise _fail(where.key("resampling-interval"), "required key is missing (0.x required it with samplers)")
    interval = data["resampling-interval"]
    if not _is_int(interval) or interval <= 0:
        raise _fail(where.key("resampling-interval"), f"expected an integer > 0, got {_describe(interval)}")
    source.warn(
        where.key("resampling-interval"),
        f"{interval}: not used: every sampler is drawn at each episode start (ML-Agents since release 3), "
        "not every resampling-interval steps",
    )
    parameters: Dict[str, EnvironmentParameterSettings] = {}
    wheres: Dict[str, _Where] = {}
    for name, raw in data.items():
        if name == "resampling-interval":
            continue
        if not isinstance(name, str) or not name.strip() or not name.isascii():
            raise _fail(where.here(), f"expected ASCII parameter names, got {_describe(name)}")
        at = where.child(name)
        section = dict(_as_mapping(raw, at))
        kind = section.pop("sampler-type", None)
        if kind is None:
            raise _fail(at.key("sampler-type"), "required key is missing")
        if kind not in _SAMPLERS:
            raise _fail(
                at.key("sampler-type"),
                f"unknown sampler type {_describe(kind)}; expected one of {', '.join(_SAMPLERS)}"
                f"{_suggestion(kind, tuple(_SAMPLERS))}",
            )
        cls, arguments = _SAMPLERS[kind]
        for argument in arguments:  # 0.x's samplers had no defaults
            if argument not in section:
                takes = ", ".join(arguments)
                raise _fail(at.key(argument), f"required key is missing (a {kind} sampler takes {takes})")
        for key in section:
            if key not in arguments:
                takes = ", ".join(arguments)
                raise _fail(at.key(key), f"unknown key for a {kind} sampler{_suggestion(key, arguments)} (it takes {takes})")
        sampler: Any = _build(cls, section, at)
        parameters[name] = EnvironmentParameterSettings((Lesson(name, sampler),))
        wheres[name] = at
    if not parameters:
        raise _fail(path, "no sampler: expected parameters with a sampler-type besides resampling-interval")
    return parameters, wheres


def load_environment_parameters(
    raw: Any,
    where: _Where,
    source: _Source,
    curriculum_path: Optional[str],
    sampler_path: Optional[str],
    behaviors: Mapping[str, Any],
    has_default: bool,
) -> Dict[str, EnvironmentParameterSettings]:
    """The run's parameters: the config's ``environment_parameters`` section (``raw``, at
    ``where``), ``--curriculum`` and ``--sampler`` together (a name given twice is an error
    naming both places), each completion criteria naming a configured behavior (any one with
    default_settings: the trainer checks those against the environment's)."""
    parts: List[Parameters] = []
    if raw is not None:
        parts.append(build_environment_parameters(raw, where, source))
        check_behaviors(*parts[-1], behaviors, has_default)
    if curriculum_path is not None:
        parts.append(read_curriculum(curriculum_path, source))
        _check_curriculum_behaviors(parts[-1], behaviors, has_default)
    if sampler_path is not None:
        parts.append(read_sampler_file(sampler_path, source))
    return merge_parameters(parts)[0]
