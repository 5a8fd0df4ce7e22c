"""Environment parameters: the values a trainer gives an environment (ML-Agents'
``environment_parameters``), and how environments other than Unity games draw them.

A parameter's value is a constant or a sampler (ML-Agents' ``ConstantSettings``,
``UniformSettings``, ``GaussianSettings``, ``MultiRangeUniformSettings``, with the seed
already resolved). A Unity game gets them through ML-Agents' EnvironmentParametersChannel
(`envs.unity.side_channels`) and draws from a sampler each time its code reads the
parameter (``Academy.Instance.EnvironmentParameters.GetWithDefault``, usually at an
episode's start). The built-in and Gymnasium environments draw in Python instead, with
`ParameterDraws`: one value per parameter at each agent's episode start, from a generator
seeded with the sampler's seed and the environment's own seed (see `ParameterDraws`).

The draws follow the C# samplers of ML-Agents Release 22 (``Runtime/Sampler.cs``):
uniform ``min + u * (max - min)``; gaussian ``mean + st_dev * z``; multi-range uniform picks
an interval with probability proportional to its width, then draws uniformly in it. The
numbers differ from Unity's (numpy's generator, not .NET's ``System.Random``); the
distributions are the same.

Part of the bottom of ``envs``: imports only `envs.exceptions` and numpy.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterable, Mapping, Optional, Tuple, Union

import numpy as np

from envs.exceptions import EnvError


@dataclass(frozen=True)
class Constant:
    """A fixed value (ML-Agents sends it as a float parameter)."""

    value: float


@dataclass(frozen=True)
class Uniform:
    """Uniform in ``[min_value, max_value)``."""

    min_value: float
    max_value: float
    seed: int


@dataclass(frozen=True)
class Gaussian:
    """Normal with ``mean`` and standard deviation ``st_dev``."""

    mean: float
    st_dev: float
    seed: int


@dataclass(frozen=True)
class MultiRangeUniform:
    """Uniform over the union of ``intervals`` (each ``(min, max)``), an interval chosen
    with probability proportional to its width."""

    intervals: Tuple[Tuple[float, float], ...]
    seed: int


ParameterValue = Union[Constant, Uniform, Gaussian, MultiRangeUniform]
PARAMETER_VALUE_TYPES = (Constant, Uniform, Gaussian, MultiRangeUniform)


def describe(value: ParameterValue) -> str:
    """One line for logs: ``0.5``, ``uniform [1, 3) seed 7``, ..."""
    if isinstance(value, Constant):
        return f"{value.value:g}"
    if isinstance(value, Uniform):
        return f"uniform [{value.min_value:g}, {value.max_value:g}) seed {value.seed}"
    if isinstance(value, Gaussian):
        return f"gaussian mean {value.mean:g} st_dev {value.st_dev:g} seed {value.seed}"
    ranges = ", ".join(f"[{a:g}, {b:g})" for a, b in value.intervals)
    return f"multirangeuniform {ranges} seed {value.seed}"


def value_range(value: ParameterValue) -> Optional[Tuple[float, float]]:
    """The smallest and largest value ``value`` can take; None when unbounded (gaussian)."""
    if isinstance(value, Constant):
        return value.value, value.value
    if isinstance(value, Uniform):
        return value.min_value, value.max_value
    if isinstance(value, MultiRangeUniform):
        return min(a for a, _ in value.intervals), max(b for _, b in value.intervals)
    return None


def check_parameters(
    env: str, values: Mapping[str, ParameterValue], accepted: Mapping[str, Tuple[float, float]]
) -> None:
    """`EnvError` (one line naming ``env``) for a parameter ``env`` does not declare, a value
    of the wrong type, or a constant or sampler range outside the declared ``[low, high]``.

    A gaussian is not refused for its unbounded support: its draws are clipped to the range
    (`ParameterDraws.draw`), as a game would clamp them.
    """
    for name, value in values.items():
        if not isinstance(value, PARAMETER_VALUE_TYPES):
            raise EnvError(f"{env}: environment parameter {name!r}: expected a constant or a sampler, got {value!r}")
        if name not in accepted:
            have = ", ".join(accepted) if accepted else "none"
            raise EnvError(
                f"{env}: environment_parameters.{name}: not a parameter of this environment (it takes: {have})"
            )
        low, high = accepted[name]
        span = value_range(value)
        if span is not None and (span[0] < low or span[1] > high):
            raise EnvError(
                f"{env}: environment_parameters.{name}: {describe(value)} is outside the parameter's range "
                f"[{low:g}, {high:g}]"
            )


def _generator(seed: int, stream: int) -> np.random.Generator:
    # SeedSequence takes non-negative integers: a negative int32 seed maps to its bits.
    return np.random.default_rng([int(seed) & 0xFFFFFFFF, int(stream) & 0xFFFFFFFF])


class ParameterDraws:
    """The current value of each parameter of one environment, and its draws.

    Each sampler draws from its own generator, seeded with the sampler's seed and this
    environment's ``stream`` (its seed: worker ``i`` of a run has ``seed + i``), so a run is
    reproducible and two workers do not repeat each other's draws. (Unity games all get the
    sampler's seed as it is, as ML-Agents sends it: their draws repeat across workers.)
    A parameter whose value is unchanged by `update` keeps its generator.
    """

    def __init__(self, stream: int, values: Optional[Mapping[str, ParameterValue]] = None) -> None:
        self.stream = int(stream)
        self._values: Dict[str, ParameterValue] = {}
        self._rngs: Dict[str, np.random.Generator] = {}
        if values:
            self.update(values)

    @property
    def values(self) -> Dict[str, ParameterValue]:
        return dict(self._values)

    def __contains__(self, name: object) -> bool:
        return name in self._values

    def __bool__(self) -> bool:
        return bool(self._values)

    def update(self, values: Mapping[str, ParameterValue]) -> None:
        """Sets the parameters in ``values`` (the others keep theirs)."""
        for name, value in values.items():
            if self._values.get(name) == value:
                continue  # the same sampler goes on drawing where it was
            self._values[name] = value
            self._rngs.pop(name, None)
            if not isinstance(value, Constant):
                self._rngs[name] = _generator(value.seed, self.stream)

    def changed(self, values: Mapping[str, ParameterValue]) -> Iterable[str]:
        """The names whose value in ``values`` differs from the current one."""
        return [name for name, value in values.items() if self._values.get(name) != value]

    def draw(self, name: str, count: int, low: float = -np.inf, high: float = np.inf) -> np.ndarray:
        """``count`` values of ``name`` (one per agent starting an episode), float64 ``[count]``,
        clipped to ``[low, high]``."""
        value = self._values[name]
        if isinstance(value, Constant):
            out = np.full(count, float(value.value))
        else:
            rng = self._rngs[name]
            if isinstance(value, Uniform):
                out = value.min_value + rng.random(count) * (value.max_value - value.min_value)
            elif isinstance(value, Gaussian):
                out = value.mean + value.st_dev * rng.standard_normal(count)
            else:
                lows = np.array([a for a, _ in value.intervals], np.float64)
                widths = np.array([b - a for a, b in value.intervals], np.float64)
                total = widths.sum()
                p = widths / total if total > 0 else np.full(len(widths), 1.0 / len(widths))
                picked = rng.choice(len(widths), size=count, p=p)
                out = lows[picked] + rng.random(count) * widths[picked]
        return np.clip(out, low, high)

    def draw_one(self, name: str, low: float = -np.inf, high: float = np.inf) -> float:
        return float(self.draw(name, 1, low, high)[0])
