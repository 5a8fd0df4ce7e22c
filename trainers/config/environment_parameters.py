"""Environment parameters and curricula (``environment_parameters:``), ML-Agents Release
22's keys and rules (``settings.py``: ``EnvironmentParameterSettings``, ``Lesson``,
``CompletionCriteriaSettings``, the samplers), as frozen dataclasses that validate
themselves, and the loader's reading of the section with a YAML path in every error.

A parameter is a constant (a number), a sampler, or a curriculum::

    environment_parameters:
      mass: 2.0                                   # a constant
      scale: {uniform: {min_value: 0.75, max_value: 3}}       # a sampler, short spelling
      gravity:                                    # ML-Agents' spelling of a sampler
        sampler_type: gaussian
        sampler_parameters: {mean: 9.8, st_dev: 0.5, seed: 3}
      wall_height:
        curriculum:                               # lessons, in order
          - name: Low
            completion_criteria: {behavior: Jumper, measure: progress, threshold: 0.1}
            value: 1.5
          - name: High                            # the last lesson needs no criteria
            value: {uniform: {min_value: 3, max_value: 4}}

Every parameter becomes a curriculum (a constant or a sampler: one lesson named after the
parameter, as ML-Agents). ``configuration.yaml`` writes each in the curriculum form with
ML-Agents' sampler spelling (`to_config`), which reads back equal. The 0.11-0.15 files of
``--curriculum`` / ``--sampler`` are converted in `trainers.config.curriculum_files`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from trainers.config._fields import (
    _InvalidField,
    _check_bool,
    _check_choice,
    _check_int,
    _check_number,
    _check_str,
    _choice_message,
    _describe,
    _is_number,
    _suggestion,
)
from trainers.config.builder import _as_mapping, _build, _fail, _Source, _Where

SAMPLER_TYPES: Tuple[str, ...] = ("constant", "uniform", "gaussian", "multirangeuniform")
MEASURES: Tuple[str, ...] = ("reward", "progress")
MAX_LESSONS = 10_000
"""Lessons of one curriculum (ML-Agents' configs have at most 4)."""
MAX_INTERVALS = 10_000
"""Intervals of one multi-range sampler (each is two float32s in the Unity message)."""
_INT32 = (-(2**31), 2**31 - 1)


def _check_seed(obj: Any) -> None:
    """A sampler's seed: an int32 (it is sent to Unity as one); -1: from the run's seed."""
    _check_int(obj, "seed")
    if not _INT32[0] <= obj.seed <= _INT32[1]:
        raise _InvalidField("seed", f"expected a 32-bit integer (-1: from the run's seed), got {_describe(obj.seed)}")


def _as_float(obj: Any, key: str) -> None:
    _check_number(obj, key)
    object.__setattr__(obj, key, float(getattr(obj, key)))


@dataclass(frozen=True)
class _Sampler:
    sampler_type: ClassVar[str]

    def to_config(self) -> Dict[str, Any]:
        """ML-Agents' spelling (what its ``configuration.yaml`` writes)."""
        parameters = {f.name: _listed(getattr(self, f.name)) for f in dataclasses.fields(self)}
        return {"sampler_type": self.sampler_type, "sampler_parameters": parameters}


def _listed(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_listed(v) for v in value]
    return value


@dataclass(frozen=True)
class ConstantSettings(_Sampler):
    """A fixed value (a number in the YAML)."""

    sampler_type: ClassVar[str] = "constant"
    value: float = 0.0
    seed: int = -1
    """Unused (ML-Agents keeps it on every sampler)."""

    def __post_init__(self) -> None:
        _as_float(self, "value")
        _check_seed(self)


@dataclass(frozen=True)
class UniformSettings(_Sampler):
    """Uniform in [min_value, max_value)."""

    sampler_type: ClassVar[str] = "uniform"
    min_value: float = 0.0
    max_value: float = 1.0
    seed: int = -1
    """The sampler's seed; -1: the run's seed plus the lesson's index among the run's
    samplers without a seed (ML-Agents' rule)."""

    def __post_init__(self) -> None:
        _as_float(self, "min_value")
        _as_float(self, "max_value")
        if self.min_value > self.max_value:
            raise _InvalidField(
                "min_value", f"expected at most max_value ({self.max_value:g}), got {self.min_value:g}"
            )
        _check_seed(self)


@dataclass(frozen=True)
class GaussianSettings(_Sampler):
    """Normal with mean ``mean`` and standard deviation ``st_dev``."""

    sampler_type: ClassVar[str] = "gaussian"
    mean: float = 1.0
    st_dev: float = 1.0
    seed: int = -1

    def __post_init__(self) -> None:
        _as_float(self, "mean")
        _check_number(self, "st_dev", 0.0)
        object.__setattr__(self, "st_dev", float(self.st_dev))
        _check_seed(self)


@dataclass(frozen=True)
class MultiRangeUniformSettings(_Sampler):
    """Uniform over the union of ``intervals`` ([min, max] each), an interval picked with
    probability proportional to its width."""

    sampler_type: ClassVar[str] = "multirangeuniform"
    intervals: Tuple[Tuple[float, float], ...] = ((0.0, 1.0),)
    seed: int = -1

    def __post_init__(self) -> None:
        raw = self.intervals
        if isinstance(raw, (str, bytes)) or not isinstance(raw, (list, tuple)) or not raw:
            raise _InvalidField("intervals", f"expected a list of [min, max] pairs, got {_describe(raw)}")
        if len(raw) > MAX_INTERVALS:
            raise _InvalidField("intervals", f"expected at most {MAX_INTERVALS} intervals, got {len(raw)}")
        out = []
        for i, pair in enumerate(raw):
            if isinstance(pair, (str, bytes)) or not isinstance(pair, (list, tuple)):
                raise _InvalidField(f"intervals[{i}]", f"expected [min, max], got {_describe(pair)}")
            if len(pair) != 2:
                values = f"{len(pair)} value{'' if len(pair) == 1 else 's'}"
                raise _InvalidField(f"intervals[{i}]", f"expected [min, max], got {values}")
            low, high = pair
            for bound in (low, high):
                if not _is_number(bound) or bound != bound or bound in (float("inf"), float("-inf")):
                    raise _InvalidField(f"intervals[{i}]", f"expected finite numbers, got {_describe(bound)}")
            if low > high:
                raise _InvalidField(f"intervals[{i}]", f"the minimum {low:g} is greater than the maximum {high:g}")
            out.append((float(low), float(high)))
        object.__setattr__(self, "intervals", tuple(out))
        _check_seed(self)


SamplerSettings = Union[ConstantSettings, UniformSettings, GaussianSettings, MultiRangeUniformSettings]
SAMPLER_SETTINGS: Dict[str, type] = {
    cls.sampler_type: cls
    for cls in (ConstantSettings, UniformSettings, GaussianSettings, MultiRangeUniformSettings)
}


@dataclass(frozen=True)
class CompletionCriteriaSettings:
    """When a lesson ends (``completion_criteria:``; ML-Agents' defaults)."""

    behavior: str
    """The behavior whose progress or reward counts; it must be one the run trains."""
    measure: str = "reward"
    """reward: the mean return of the behavior's last episodes (at most the largest
    min_lesson_length of its lessons), smoothed if signal_smoothing; progress: step / max_steps."""
    min_lesson_length: int = 0
    """Episodes of the behavior the lesson lasts at least (counted from the lesson's start)."""
    signal_smoothing: bool = True
    """The measure becomes ``0.25 x previous + 0.75 x reward`` at each check (reward only)."""
    threshold: float = 0.0
    """The lesson ends once the measure is greater than this (progress: in [0, 1])."""
    require_reset: bool = False
    """Reset every environment when the lesson ends (else the next episodes get the value)."""

    def __post_init__(self) -> None:
        _check_str(self, "behavior")
        _check_choice(self, "measure", MEASURES)
        _check_int(self, "min_lesson_length", 0)
        _check_bool(self, "signal_smoothing")
        _check_number(self, "threshold")
        object.__setattr__(self, "threshold", float(self.threshold))
        if self.measure == "progress" and not 0.0 <= self.threshold <= 1.0:
            raise _InvalidField(
                "threshold", f"expected a number in [0, 1] for measure progress, got {_describe(self.threshold)}"
            )
        _check_bool(self, "require_reset")


@dataclass(frozen=True)
class Lesson:
    """One lesson of a curriculum: its value and when it ends."""

    name: str
    value: SamplerSettings
    """A constant or a sampler."""
    completion_criteria: Optional[CompletionCriteriaSettings] = None
    """None: the last lesson (every other lesson needs criteria)."""

    def __post_init__(self) -> None:
        _check_str(self, "name")
        if not isinstance(self.value, tuple(SAMPLER_SETTINGS.values())):
            raise _InvalidField("value", f"expected a number or a sampler, got {type(self.value).__name__}")
        if self.completion_criteria is not None and not isinstance(
            self.completion_criteria, CompletionCriteriaSettings
        ):
            raise _InvalidField("completion_criteria", "expected CompletionCriteriaSettings")


@dataclass(frozen=True)
class EnvironmentParameterSettings:
    """One parameter: its lessons in order (one lesson: a constant or a sampler)."""

    curriculum: Tuple[Lesson, ...]

    def __post_init__(self) -> None:
        lessons = self.curriculum
        if isinstance(lessons, (str, bytes)) or not isinstance(lessons, (list, tuple)) or not lessons:
            raise _InvalidField("curriculum", "expected a non-empty list of lessons")
        if len(lessons) > MAX_LESSONS:
            raise _InvalidField("curriculum", f"expected at most {MAX_LESSONS} lessons, got {len(lessons)}")
        object.__setattr__(self, "curriculum", tuple(lessons))
        for i, lesson in enumerate(self.curriculum):
            if not isinstance(lesson, Lesson):
                raise _InvalidField(f"curriculum[{i}]", f"expected a Lesson, got {type(lesson).__name__}")
            if lesson.completion_criteria is None and i < len(self.curriculum) - 1:
                raise _InvalidField(
                    f"curriculum[{i}].completion_criteria",
                    f"required for every lesson but the last (lesson {lesson.name!r}, {i + 1} of "
                    f"{len(self.curriculum)})",
                )

    @property
    def behaviors(self) -> List[str]:
        """The behaviors its completion criteria name (in lesson order, no repeats)."""
        named = [lesson.completion_criteria.behavior for lesson in self.curriculum if lesson.completion_criteria]
        return list(dict.fromkeys(named))


def check_environment_parameters(
    parameters: Any, behaviors: Mapping[str, Any], has_default: bool
) -> Dict[str, EnvironmentParameterSettings]:
    """`RunOptions`' check of ``environment_parameters``: name -> settings, each name a
    non-empty ASCII string (Unity reads it as ASCII), each criteria's behavior one of
    ``behaviors`` unless ``has_default`` (default_settings: any behavior the env has; the
    trainer checks it when the env is known). Returns a dict copy."""
    if not isinstance(parameters, Mapping):
        raise _InvalidField("environment_parameters", "expected a mapping of parameter name -> settings")
    out: Dict[str, EnvironmentParameterSettings] = {}
    for name, settings in parameters.items():
        _check_parameter_name(name)
        if not isinstance(settings, EnvironmentParameterSettings):
            raise _InvalidField(f"environment_parameters.{name}", "expected EnvironmentParameterSettings")
        if not has_default:
            for i, lesson in enumerate(settings.curriculum):
                criteria = lesson.completion_criteria
                if criteria is not None and criteria.behavior not in behaviors:
                    raise _InvalidField(
                        f"environment_parameters.{name}.curriculum[{i}].completion_criteria.behavior",
                        _unknown_behavior(criteria.behavior, behaviors),
                    )
        out[name] = settings
    return out


def _check_parameter_name(name: Any) -> None:
    if not isinstance(name, str) or not name.strip():
        raise _InvalidField("environment_parameters", f"expected parameter names, got {_describe(name)}")
    if not name.isascii():
        raise _InvalidField(f"environment_parameters.{name}", "a parameter name must be ASCII (Unity reads it so)")


def _unknown_behavior(behavior: str, behaviors: Mapping[str, Any]) -> str:
    configured = ", ".join(behaviors) if behaviors else "none"
    return (
        f"{_describe(behavior)} is not a configured behavior (behaviors: {configured})"
        f"{_suggestion(behavior, list(behaviors))}"
    )


# --------------------------------------------------------------------------------------
# Reading the YAML section.
# --------------------------------------------------------------------------------------


def build_value(raw: Any, where: _Where, key: str) -> SamplerSettings:
    """A lesson's value at ``where.key(key)``: a number, ``{<sampler type>: {...}}`` or
    ML-Agents' ``{sampler_type: ..., sampler_parameters: {...}}``."""
    location = where.key(key)
    if _is_number(raw):
        return _build(ConstantSettings, {"value": raw}, where.child(key))
    if not isinstance(raw, Mapping):
        raise _fail(location, f"expected a number or a sampler, got {_describe(raw)}")
    data = dict(raw)
    if "sampler_type" in data or "sampler_parameters" in data:
        for extra in data:
            if extra not in ("sampler_type", "sampler_parameters"):
                hint = _suggestion(extra, ("sampler_type", "sampler_parameters"))
                raise _fail(f"{location}.{extra}", f"unknown key{hint}")
        kind = data.get("sampler_type")
        if kind not in SAMPLER_SETTINGS:
            raise _fail(f"{location}.sampler_type", _choice_message(kind, SAMPLER_TYPES))
        if "sampler_parameters" not in data:  # required by ML-Agents too
            raise _fail(f"{location}.sampler_parameters", "required key is missing")
        return _build(SAMPLER_SETTINGS[kind], data["sampler_parameters"], where.child(key).child("sampler_parameters"))
    if len(data) == 1:
        kind, parameters = next(iter(data.items()))
        if kind in SAMPLER_SETTINGS:
            return _build(SAMPLER_SETTINGS[kind], parameters, where.child(key).child(kind))
        if kind == "curriculum":
            raise _fail(f"{location}.curriculum", "a lesson's value is a number or a sampler, not a curriculum")
        raise _fail(
            f"{location}.{kind}",
            f"unknown sampler type; expected one of {', '.join(SAMPLER_TYPES)}{_suggestion(kind, SAMPLER_TYPES)}",
        )
    raise _fail(
        location,
        "expected a number or one sampler: {uniform: {min_value, max_value}}, {gaussian: {mean, st_dev}}, "
        "{multirangeuniform: {intervals}} or sampler_type/sampler_parameters",
    )


def _lesson_where(where: _Where, index: int) -> _Where:
    return _Where(where.source, f"{where.dotted('curriculum')}[{index}]")


def _build_curriculum(raw: Any, where: _Where, source: _Source) -> EnvironmentParameterSettings:
    if isinstance(raw, (str, bytes)) or not isinstance(raw, (list, tuple)) or not raw:
        got = "an empty list" if isinstance(raw, (list, tuple)) else _describe(raw)
        raise _fail(where.key("curriculum"), f"expected a non-empty list of lessons, got {got}")
    if len(raw) > MAX_LESSONS:
        raise _fail(where.key("curriculum"), f"expected at most {MAX_LESSONS} lessons, got {len(raw)}")
    lessons = []
    for i, item in enumerate(raw):
        at = _lesson_where(where, i)
        data = _as_mapping(item, at)
        if len(data) == 1 and "name" not in data and isinstance(next(iter(data.values())), Mapping):
            # `- Lesson0: {...}`: what ML-Agents' own upgrade script writes, which its
            # Release 22 loader refuses too.
            raise _fail(at.here(), f"expected a lesson with name, value and completion_criteria; "
                        f"did you mean '- name: {next(iter(data))}'?")
        if "value" not in data:
            raise _fail(at.key("value"), "required key is missing")
        value = build_value(data["value"], at, "value")
        criteria = None
        if data.get("completion_criteria") is not None:
            criteria = _build(CompletionCriteriaSettings, data["completion_criteria"], at.child("completion_criteria"))
        lesson = _build(Lesson, data, at, prebuilt={"value": value, "completion_criteria": criteria})
        if criteria is None and i < len(raw) - 1:
            raise _fail(
                at.key("completion_criteria"),
                f"required for every lesson but the last (lesson {lesson.name!r}, {i + 1} of {len(raw)})",
            )
        if criteria is not None and i == len(raw) - 1:
            source.warn(at.key("completion_criteria"), "ignored: the last lesson never ends (as in ML-Agents)")
        lessons.append(lesson)
    return EnvironmentParameterSettings(tuple(lessons))


def build_parameter(name: str, raw: Any, parent: _Where, source: _Source) -> EnvironmentParameterSettings:
    """Parameter ``name``'s section, ``parent.key(name)``."""
    if isinstance(raw, Mapping) and "curriculum" in raw:
        where = parent.child(name)
        for extra in raw:
            if extra != "curriculum":
                raise _fail(where.key(extra), "unknown key; a parameter with a curriculum has only curriculum:")
        return _build_curriculum(raw["curriculum"], where, source)
    return EnvironmentParameterSettings((Lesson(name, build_value(raw, parent, name)),))


def build_environment_parameters(
    raw: Any, where: _Where, source: _Source
) -> Tuple[Dict[str, EnvironmentParameterSettings], Dict[str, _Where]]:
    """The ``environment_parameters`` section: name -> settings, and name -> where each was
    given (for the errors of checks made later, such as behaviors)."""
    data = _as_mapping(raw, where)
    out: Dict[str, EnvironmentParameterSettings] = {}
    wheres: Dict[str, _Where] = {}
    for name, section in data.items():
        if not isinstance(name, str) or not name.strip():
            raise _fail(where.here(), f"expected parameter names, got {_describe(name)}")
        if not name.isascii():
            raise _fail(where.key(name), "a parameter name must be ASCII (Unity reads it so)")
        out[name] = build_parameter(name, section, where, source)
        wheres[name] = where.child(name)
    return out, wheres


def check_behaviors(
    parameters: Mapping[str, EnvironmentParameterSettings],
    wheres: Mapping[str, _Where],
    behaviors: Mapping[str, Any],
    has_default: bool,
) -> None:
    """Each completion criteria's behavior is configured (unless ``has_default``): the line
    names the file and lesson the parameter came from."""
    if has_default:
        return
    for name, settings in parameters.items():
        for i, lesson in enumerate(settings.curriculum):
            criteria = lesson.completion_criteria
            if criteria is not None and criteria.behavior not in behaviors:
                at = _lesson_where(wheres[name], i).child("completion_criteria")
                raise _fail(at.key("behavior"), _unknown_behavior(criteria.behavior, behaviors))


def merge_parameters(
    parts: Sequence[Tuple[Dict[str, EnvironmentParameterSettings], Dict[str, _Where]]]
) -> Tuple[Dict[str, EnvironmentParameterSettings], Dict[str, _Where]]:
    """The parameters of the config, ``--curriculum`` and ``--sampler`` together; a name
    given in two of them is an error naming both."""
    merged: Dict[str, EnvironmentParameterSettings] = {}
    wheres: Dict[str, _Where] = {}
    for parameters, part_wheres in parts:
        for name, settings in parameters.items():
            if name in merged:
                raise _fail(
                    part_wheres[name].here(), f"parameter {name!r} is also given in {wheres[name].here()}; give it once"
                )
            merged[name] = settings
            wheres[name] = part_wheres[name]
    return merged, wheres
