"""The environment parameter manager against ML-Agents Release 22's own tests
(``ml-agents/mlagents/trainers/tests/test_env_param_manager.py``: seeds, lesson changes,
resets), the smoothing and episode-count rules in closed form, and the state kept in
``training_status.json`` for --resume."""
from __future__ import annotations

import textwrap

import pytest

from envs.parameters import Constant, Gaussian, Uniform
from trainers.config import load_settings
from trainers.config.environment_parameters import (
    CompletionCriteriaSettings,
    ConstantSettings,
    EnvironmentParameterSettings,
    Lesson,
)
from trainers.loop.curriculum import EnvironmentParameterManager, need_increment
from trainers.loop.status import CurriculumStatus, TrainingStatus

EVERYTHING = """
behaviors:
  fake_behavior: {max_steps: 1000}
environment_parameters:
    param_1:
      curriculum:
          - name: Lesson1
            completion_criteria:
                measure: reward
                behavior: fake_behavior
                threshold: 30
                min_lesson_length: 100
                require_reset: true
            value: 1
          - name: Lesson2
            completion_criteria:
                measure: progress
                behavior: fake_behavior
                threshold: 0.5
                min_lesson_length: 100
                require_reset: false
            value: 2
          - name: Lesson3
            value:
                sampler_type: uniform
                sampler_parameters:
                    min_value: 1
                    max_value: 3
    param_2:
        sampler_type: gaussian
        sampler_parameters:
            mean: 4
            st_dev: 5
    param_3: 20
"""


def manager_of(tmp_path, text: str, seed: int = 1337, restore=None) -> EnvironmentParameterManager:
    path = tmp_path / "c.yaml"
    path.write_text(textwrap.dedent(text))
    settings = load_settings(str(path), on_warning=lambda w: None).environment_parameters
    return EnvironmentParameterManager(settings, seed, restore, log=lambda s: None)


def feed(manager: EnvironmentParameterManager, returns, behavior: str = "fake_behavior") -> None:
    manager.record_episodes(behavior, returns)


def test_ml_agents_create_manager(tmp_path):
    """test_create_manager of ML-Agents Release 22, on our manager."""
    manager = manager_of(tmp_path, EVERYTHING)
    assert manager.lesson_numbers() == {"param_1": 0, "param_2": 0, "param_3": 0}
    # Seeds: 1337 + the index among the lessons without a seed (constants count too).
    assert manager.values() == {"param_1": Constant(1.0), "param_2": Gaussian(4.0, 5.0, 1337 + 3),
                                "param_3": Constant(20.0)}
    steps, max_steps = {"fake_behavior": 500}, {"fake_behavior": 1000}
    feed(manager, [1000] * 99)  # not enough episodes
    assert manager.update(steps, max_steps) == (False, False)
    manager.status.reward_buffers["fake_behavior"].clear()  # (the status holds the very buffers)
    feed(manager, [1] * 101)  # not enough reward (the buffer keeps the last 100)
    assert manager.update(steps, max_steps) == (False, False)
    feed(manager, [1000] * 101)
    assert manager.update(steps, max_steps) == (True, True)
    assert manager.lesson_numbers() == {"param_1": 1, "param_2": 0, "param_3": 0}
    assert manager.reward_buffer("fake_behavior") == []  # every buffer is cleared by a change
    feed(manager, [0] * 101)  # progress 0.7 > 0.5, no reset required
    assert manager.update({"fake_behavior": 700}, max_steps) == (True, False)
    assert manager.values() == {"param_1": Uniform(1.0, 3.0, 1337 + 2), "param_2": Gaussian(4.0, 5.0, 1337 + 3),
                                "param_3": Constant(20.0)}
    assert manager.update({"fake_behavior": 1000}, max_steps) == (False, False)  # the last lesson


def test_ml_agents_criteria_on_every_lesson(tmp_path):
    """test_curriculum_raises_all_completion_criteria_conversion: one lesson per check, then
    the last lesson's criteria are ignored."""
    lesson = ("          - {{name: L{0}, value: {0}, completion_criteria: {{behavior: fake_behavior, threshold: 30, "
              "min_lesson_length: 100, require_reset: true}}}}\n")
    text = ("behaviors: {fake_behavior: {}}\nenvironment_parameters:\n  param_1:\n      curriculum:\n"
            + "".join(lesson.format(i) for i in range(3)))
    manager = manager_of(tmp_path, text)
    for expected in ((True, True), (True, True), (False, False)):
        feed(manager, [1000] * 101)
        assert manager.update({"fake_behavior": 500}, {"fake_behavior": 1000}) == expected
    assert manager.lesson_numbers() == {"param_1": 2}


def criteria(**kwargs) -> CompletionCriteriaSettings:
    return CompletionCriteriaSettings("B", **kwargs)


def test_smoothing_in_closed_form():
    """smoothed = 0.25 x smoothed + 0.75 x mean at every check once the buffer is long enough:
    from 0 with a mean of 1: 0.75, 0.9375, 0.984375, ... (1 - 0.25^k)."""
    smooth = criteria(threshold=0.95, min_lesson_length=3)
    smoothed, checks = 0.0, []
    for _ in range(4):
        done, smoothed = need_increment(smooth, 0.0, [1.0, 1.0, 1.0], smoothed)
        checks.append((done, smoothed))
    assert checks == [(False, 0.75), (False, 0.9375), (True, 0.984375), (True, 0.99609375)]
    # Without smoothing the mean itself decides, at the first check; the smoothed value stays.
    assert need_increment(criteria(threshold=0.95, signal_smoothing=False), 0.0, [1.0], 0.5) == (True, 0.5)
    # Too few episodes: nothing changes, not even the smoothed value.
    assert need_increment(smooth, 0.0, [1.0, 1.0], 0.3) == (False, 0.3)
    # Strictly greater than the threshold.
    assert need_increment(criteria(threshold=1.0, signal_smoothing=False), 0.0, [1.0], 0.0) == (False, 0.0)
    assert need_increment(criteria(measure="progress", threshold=0.5), 0.5, [], 0.0) == (False, 0.0)
    assert need_increment(criteria(measure="progress", threshold=0.5), 0.5001, [], 0.0) == (True, 0.0)
    # min_lesson_length 0 and no episode: the reward measure waits for one.
    assert need_increment(criteria(threshold=-5.0), 0.0, [], 0.0) == (False, 0.0)


def test_the_buffer_keeps_the_largest_min_lesson_length_of_the_behavior():
    settings = {
        "a": EnvironmentParameterSettings((
            Lesson("a0", ConstantSettings(0.0), criteria(threshold=0.5, min_lesson_length=3, signal_smoothing=False)),
            Lesson("a1", ConstantSettings(1.0)),
        )),
        "b": EnvironmentParameterSettings((
            Lesson("b0", ConstantSettings(0.0), criteria(threshold=100.0, min_lesson_length=5)),
            Lesson("b1", ConstantSettings(1.0)),
        )),
    }
    manager = EnvironmentParameterManager(settings, 0, log=lambda s: None)
    manager.record_episodes("B", [0.0] * 5 + [1.0] * 2)
    assert manager.reward_buffer("B") == [0.0, 0.0, 0.0, 1.0, 1.0]  # at most 5, the newest
    assert manager.update({"B": 1}, {"B": 10}) == (False, False)  # mean 0.4: a stays
    manager.record_episodes("B", [1.0])
    assert manager.update({"B": 1}, {"B": 10}) == (True, False)  # mean of the last 5: 0.6 > 0.5
    assert manager.lesson_numbers() == {"a": 1, "b": 0}
    manager.record_episodes("Other", [1.0])  # a behavior no criteria name: ignored
    assert manager.behaviors == ["B"]


def test_lessons_smoothing_and_buffers_survive_the_status_file(tmp_path):
    manager = manager_of(tmp_path, EVERYTHING)
    feed(manager, [1000] * 101)
    manager.update({"fake_behavior": 500}, {"fake_behavior": 1000})
    feed(manager, [3.0, 4.0])
    status = TrainingStatus()
    status.curriculum = manager.status
    path = str(tmp_path / "training_status.json")
    status.save(path)
    loaded = TrainingStatus.load(path).curriculum
    assert loaded is not None
    assert loaded.lessons == {"param_1": 1, "param_2": 0, "param_3": 0}
    assert loaded.smoothed["param_1"] == pytest.approx(0.75 * 1000)
    resumed = manager_of(tmp_path, EVERYTHING, restore=loaded)
    assert resumed.lesson_numbers() == manager.lesson_numbers()
    assert resumed.smoothed() == manager.smoothed()
    assert resumed.reward_buffer("fake_behavior") == [3.0, 4.0]
    assert resumed.values() == manager.values()
    # A status without curricula (older runs) has none; a lesson the config no longer has:
    # the last lesson, with a warning.
    assert TrainingStatus.load(str(tmp_path / "missing.json")).curriculum is None
    lines: list = []
    shortened = EnvironmentParameterManager(
        {"param_1": EnvironmentParameterSettings((Lesson("only", ConstantSettings(5.0)),))}, 0,
        CurriculumStatus({"param_1": 3}), log=lines.append,
    )
    assert shortened.lesson_numbers() == {"param_1": 0} and "no longer has" in lines[0]
