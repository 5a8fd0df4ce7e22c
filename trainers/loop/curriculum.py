"""Environment parameters during a run (``environment_parameters:``): ML-Agents Release
22's ``EnvironmentParameterManager`` and ``CompletionCriteriaSettings.need_increment``,
with the lessons kept across ``--resume``.

Per parameter the manager knows its current lesson, whose value (a constant or a sampler)
the environments get (`values`; `envs.parameters` for how they apply and draw it). After
every env step of the controller (`update`) each parameter whose lesson has completion
criteria and a next lesson is checked, as ML-Agents' ``update_lessons`` does:

* the criteria's behavior must have finished ``min_lesson_length`` episodes since the
  lesson started (its *reward buffer*: the returns of its last episodes, at most the
  largest ``min_lesson_length`` of any lesson naming it, emptied whenever any lesson
  changes, as ML-Agents clears every trainer's);
* ``progress``: ``step / max_steps`` of the behavior > ``threshold``;
* ``reward``: the buffer's mean, smoothed when ``signal_smoothing``
  (``smoothed = 0.25 x smoothed + 0.75 x mean``, updated at every check once the buffer is
  long enough, so it follows the mean within a few steps, as in ML-Agents) > ``threshold``.

A lesson that ends moves its parameter to the next lesson (one per check) and says so on
the console; its ``require_reset`` asks the controller to reset every env. The lesson of
each parameter goes to every behavior's summaries as ``Environment/Lesson Number/<name>``
(ML-Agents' tag).

Seeds: a sampler without a seed (-1) gets the run's seed plus its index among the run's
lessons without one, in the order of the parameters and their lessons (ML-Agents'
``_set_sampler_seeds``; constants take an index too).

Beyond ML-Agents: the lessons, the smoothed measures and the reward buffers are saved in
``training_status.json`` (`trainers.loop.status.CurriculumStatus`) with every status the
controller writes, so ``--resume`` goes on in the lesson (and with the episodes) it left;
ML-Agents restores the lesson alone. With ``--inference`` lessons do not advance (the
policy plays in the lesson its run reached).

Without TensorFlow (numpy at most): imported by the controller.
"""
from __future__ import annotations

import math
from collections import deque
from typing import Callable, Deque, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from envs.parameters import Constant, Gaussian, MultiRangeUniform, ParameterValue, Uniform, describe
from trainers.config.environment_parameters import (
    CompletionCriteriaSettings,
    ConstantSettings,
    EnvironmentParameterSettings,
    GaussianSettings,
    SamplerSettings,
    UniformSettings,
)
from trainers.loop.status import CurriculumStatus

LESSON_TAG = "Environment/Lesson Number/{}"


def _int32(value: int) -> int:
    """``value`` wrapped into an int32 (sent to Unity as one): a run seed near 2**31 plus
    an index would not fit."""
    return (int(value) + 2**31) % 2**32 - 2**31


def env_value(settings: SamplerSettings, seed: int) -> ParameterValue:
    """A lesson's value as the environments take it (`envs.parameters`), with ``seed``."""
    if isinstance(settings, ConstantSettings):
        return Constant(settings.value)
    if isinstance(settings, UniformSettings):
        return Uniform(settings.min_value, settings.max_value, seed)
    if isinstance(settings, GaussianSettings):
        return Gaussian(settings.mean, settings.st_dev, seed)
    return MultiRangeUniform(tuple(settings.intervals), seed)


def need_increment(
    criteria: CompletionCriteriaSettings, progress: float, rewards: Sequence[float], smoothed: float
) -> Tuple[bool, float]:
    """ML-Agents' ``CompletionCriteriaSettings.need_increment``: whether the lesson ends, and
    the new smoothed measure.

    Args:
      criteria: the lesson's completion criteria.
      progress: the behavior's ``step / max_steps``.
      rewards: the behavior's reward buffer (returns of its last episodes).
      smoothed: the parameter's smoothed measure so far.
    """
    if len(rewards) < criteria.min_lesson_length:
        return False, smoothed
    if criteria.measure == "progress":
        return progress > criteria.threshold, smoothed
    if len(rewards) < 1:
        return False, smoothed
    measure = float(np.mean(rewards))
    if math.isnan(measure):
        return False, smoothed
    if criteria.signal_smoothing:
        measure = 0.25 * smoothed + 0.75 * measure
        smoothed = measure
    return measure > criteria.threshold, smoothed


class EnvironmentParameterManager:
    """The run's environment parameters and their lessons (see the module docstring)."""

    def __init__(
        self,
        settings: Mapping[str, EnvironmentParameterSettings],
        run_seed: int,
        restore: Optional[CurriculumStatus] = None,
        log: Callable[[str], None] = lambda line: print(line, flush=True),
    ) -> None:
        """
        Args:
          settings: ``environment_parameters`` (parameter name -> its lessons).
          run_seed: the run's seed (resolved, not -1): seeds the samplers without one.
          restore: the status of a resumed run: its lessons, smoothed measures and reward
            buffers (a lesson beyond the curriculum, which the config shortened, becomes
            its last, with a warning).
          log: where lesson changes are reported.
        """
        self.settings = dict(settings)
        self._log = log
        self._values: Dict[str, List[ParameterValue]] = {}
        offset = 0
        for name, parameter in self.settings.items():
            values = []
            for lesson in parameter.curriculum:
                seed = lesson.value.seed
                if seed == -1:
                    seed = _int32(run_seed + offset)
                    offset += 1
                values.append(env_value(lesson.value, seed))
            self._values[name] = values
        # Per behavior: the longest min_lesson_length of a lesson naming it (at least 1).
        sizes: Dict[str, int] = {}
        for parameter in self.settings.values():
            for lesson in parameter.curriculum:
                if lesson.completion_criteria is not None:
                    behavior = lesson.completion_criteria.behavior
                    sizes[behavior] = max(sizes.get(behavior, 1), lesson.completion_criteria.min_lesson_length)
        restored = restore or CurriculumStatus()
        self._lessons: Dict[str, int] = {}
        self._smoothed: Dict[str, float] = {}
        for name, parameter in self.settings.items():
            number = int(restored.lessons.get(name, 0))
            if not 0 <= number < len(parameter.curriculum):
                last = len(parameter.curriculum) - 1
                log(f"[WARNING] Parameter '{name}': the run was in lesson {number}, which its curriculum no "
                    f"longer has; going on in its last lesson ({last})")
                number = min(max(number, 0), last)
            self._lessons[name] = number
            self._smoothed[name] = float(restored.smoothed.get(name, 0.0))
        self._buffers: Dict[str, Deque[float]] = {
            behavior: deque(restored.reward_buffers.get(behavior, ()), maxlen=size) for behavior, size in sizes.items()
        }
        # What training_status.json saves: these very dicts (updated in place).
        self.status = CurriculumStatus(self._lessons, self._smoothed, self._buffers)
        self._stat_tags = {name: LESSON_TAG.format(name) for name in self.settings}

    # ------------------------------------------------------------------ queries

    @property
    def behaviors(self) -> List[str]:
        """The behaviors the completion criteria name."""
        return list(self._buffers)

    def lesson_numbers(self) -> Dict[str, int]:
        """Parameter -> its current lesson (0 for a constant or a sampler)."""
        return dict(self._lessons)

    def smoothed(self) -> Dict[str, float]:
        """Parameter -> its smoothed measure."""
        return dict(self._smoothed)

    def reward_buffer(self, behavior: str) -> List[float]:
        """The returns of ``behavior``'s episodes that count for its lessons, oldest first."""
        return list(self._buffers.get(behavior, ()))

    def values(self) -> Dict[str, ParameterValue]:
        """Parameter -> the value of its current lesson, as the environments take it."""
        return {name: self._values[name][lesson] for name, lesson in self._lessons.items()}

    def resumed(self) -> str:
        """One line on the state a resumed run goes on from."""
        lessons = ", ".join(
            f"'{name}' in lesson {number} (smoothed measure {self._smoothed[name]:.6g})"
            for name, number in self._lessons.items()
        )
        counted = ", ".join(f"{behavior} {len(buffer)}" for behavior, buffer in self._buffers.items())
        return f"Curricula resumed: {lessons}; episodes counted in the lessons: {counted or 'none'}."

    def describe(self, name: str) -> str:
        lesson = self.settings[name].curriculum[self._lessons[name]]
        value = describe(self._values[name][self._lessons[name]])
        return f"Parameter '{name}' is in lesson '{lesson.name}' and has value {value}."

    # ------------------------------------------------------------------ feeding

    def record_episodes(self, behavior: str, returns: Iterable[float]) -> None:
        """The returns of ``behavior``'s episodes that just ended (in the order they ended)."""
        buffer = self._buffers.get(behavior)
        if buffer is not None:
            buffer.extend(float(r) for r in returns)

    def update(self, steps: Mapping[str, int], max_steps: Mapping[str, int]) -> Tuple[bool, bool]:
        """One check of every lesson (ML-Agents' ``update_lessons``).

        Args:
          steps: behavior -> its step; a behavior absent here is not checked.
          max_steps: behavior -> its max_steps (progress = step / max_steps; a max_steps of
            0 counts as done).

        Returns:
          (some lesson changed, one that changed requires an env reset).
        """
        updated = must_reset = False
        for name, parameter in self.settings.items():
            number = self._lessons[name]
            lesson = parameter.curriculum[number]
            criteria = lesson.completion_criteria
            if criteria is None or number + 1 >= len(parameter.curriculum) or criteria.behavior not in steps:
                continue
            most = max_steps[criteria.behavior]
            progress = steps[criteria.behavior] / most if most > 0 else 1.0
            buffer = self._buffers[criteria.behavior]
            increment, self._smoothed[name] = need_increment(criteria, progress, buffer, self._smoothed[name])
            if increment:
                if criteria.measure == "progress":
                    measure = f"progress {progress:.4f}"
                elif criteria.signal_smoothing:
                    measure = f"smoothed reward {self._smoothed[name]:.4f}"
                else:
                    measure = f"reward {float(np.mean(buffer)):.4f}"
                self._lessons[name] = number + 1
                updated = True
                must_reset = must_reset or criteria.require_reset
                self._log(
                    f"[INFO] {criteria.behavior}. Step: {steps[criteria.behavior]}. Lesson '{lesson.name}' of "
                    f"'{name}' is complete ({measure} > {criteria.threshold:g}, "
                    f"{len(buffer)} episodes counted). {self.describe(name)}"
                )
        if updated:
            for buffer in self._buffers.values():  # ML-Agents clears every trainer's reward buffer
                buffer.clear()
        return updated, must_reset

    def lesson_stats(self) -> List[Tuple[str, float]]:
        """``(Environment/Lesson Number/<name>, lesson)`` for every parameter."""
        return [(self._stat_tags[name], float(lesson)) for name, lesson in self._lessons.items()]
