"""``environment_parameters``: ML-Agents Release 22's forms and rules, its example configs,
the resolved config reading back equal, one error line per mistake, and the 0.11-0.15
``--curriculum`` / ``--sampler`` files giving the settings of their nested form."""
from __future__ import annotations

import json
import os
import textwrap

import pytest

from envs.unity.side_channels import EnvironmentParametersChannel
from trainers.config import load_settings, write_resolved_config
from trainers.config.environment_parameters import (
    CompletionCriteriaSettings,
    ConstantSettings,
    EnvironmentParameterSettings,
    GaussianSettings,
    Lesson,
    MultiRangeUniformSettings,
    UniformSettings,
)
from trainers.exceptions import ConfigError
from trainers.loop.curriculum import EnvironmentParameterManager

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "..", "data", "configs")


def write(tmp_path, text: str, name: str = "c.yaml") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def load(path: str, **cli):
    warnings: list = []
    return load_settings(path, cli or None, on_warning=warnings.append), warnings


def messages(parameters, seed: int):
    """The EnvironmentParametersChannel payloads a run with ``seed`` sends first."""
    channel = EnvironmentParametersChannel()
    for name, value in EnvironmentParameterManager(parameters, seed, log=lambda s: None).values().items():
        channel.set_parameter(name, value)
    return channel.take_outgoing()


# ------------------------------------------------------------------ Release 22 examples
def test_release_22_3dball_randomize_loads_and_sends_ml_agents_sampler_messages():
    options, warnings = load(os.path.join(FIXTURES, "mlagents_r22_3DBall_randomize.yaml"))
    assert warnings == []
    assert options.environment_parameters == {
        "mass": EnvironmentParameterSettings((Lesson("mass", UniformSettings(0.5, 10.0)),)),
        "scale": EnvironmentParameterSettings((Lesson("scale", UniformSettings(0.75, 3.0)),)),
    }
    # Seeds -1 become the run's seed + 0, + 1 (ML-Agents' _set_sampler_seeds); bytes by hand:
    # key, SAMPLER (1), seed, UNIFORM (0), min, max as float32.
    assert messages(options.environment_parameters, 1) == [
        bytes.fromhex("04000000" "6d617373" "01000000" "01000000" "00000000" "0000003f" "00002041"),
        bytes.fromhex("05000000" "7363616c65" "01000000" "02000000" "00000000" "0000403f" "00004040"),
    ]


def test_release_22_walljump_curriculum_loads_as_ml_agents_reads_it():
    options, warnings = load(os.path.join(FIXTURES, "mlagents_r22_WallJump_curriculum.yaml"))
    assert warnings == []
    big = options.environment_parameters["big_wall_height"].curriculum
    assert [lesson.name for lesson in big] == ["Lesson0", "Lesson1", "Lesson2", "Lesson3"]
    assert [lesson.value for lesson in big] == [
        UniformSettings(0.0, 4.0), UniformSettings(4.0, 7.0), UniformSettings(6.0, 8.0), ConstantSettings(8.0)
    ]
    assert [lesson.completion_criteria for lesson in big[:3]] == [
        CompletionCriteriaSettings("BigWallJump", "progress", 100, True, threshold, False)
        for threshold in (0.1, 0.3, 0.5)
    ]
    assert big[3].completion_criteria is None
    small = options.environment_parameters["small_wall_height"].curriculum
    assert [lesson.value.value for lesson in small] == [1.5, 2.0, 2.5, 4.0]
    assert {lesson.completion_criteria.behavior for lesson in small[:3]} == {"SmallWallJump"}
    # First lessons: a uniform sampler (seed 7 + 0) and a float (FLOAT 0, 1.5).
    assert messages(options.environment_parameters, 7) == [
        bytes.fromhex("0f000000") + b"big_wall_height" + bytes.fromhex("01000000" "07000000" "00000000" "00000000" "00008040"),
        bytes.fromhex("11000000") + b"small_wall_height" + bytes.fromhex("00000000" "0000c03f"),
    ]


# ---------------------------------------------------------------------------- forms
def test_every_form_of_a_value_and_ml_agents_defaults(tmp_path):
    path = write(tmp_path, """
        behaviors:
          fake_behavior: {max_steps: 100}
        environment_parameters:
          constant: 20
          short: {uniform: {min_value: 1, max_value: 3, seed: 5}}
          spelled: {sampler_type: gaussian, sampler_parameters: {mean: 4, st_dev: 5}}
          multi: {multirangeuniform: {intervals: [[1, 2], [3, 4.5]]}}
          as_constant: {sampler_type: constant, sampler_parameters: {value: 2}}
          defaults: {sampler_type: uniform, sampler_parameters: {}}
          param_1:
            curriculum:
              - name: Lesson1
                completion_criteria: {behavior: fake_behavior, threshold: 30, min_lesson_length: 100, require_reset: true}
                value: 1
              - name: Lesson2
                completion_criteria: {behavior: fake_behavior, measure: progress, threshold: 0.5}
                value: 2
              - name: Lesson3
                value: {sampler_type: uniform, sampler_parameters: {min_value: 1, max_value: 3}}
    """)
    options, warnings = load(path)
    assert warnings == []
    params = options.environment_parameters
    one = {name: params[name].curriculum for name in params}
    assert one["constant"] == (Lesson("constant", ConstantSettings(20.0)),)
    assert one["short"][0].value == UniformSettings(1.0, 3.0, 5)
    assert one["spelled"][0].value == GaussianSettings(4.0, 5.0)
    assert one["multi"][0].value == MultiRangeUniformSettings(((1.0, 2.0), (3.0, 4.5)))
    assert one["as_constant"][0].value == ConstantSettings(2.0)
    assert one["defaults"][0].value == UniformSettings(0.0, 1.0, -1)  # ML-Agents' defaults
    lessons = one["param_1"]
    # ML-Agents' test_curriculum_conversion: reward by default, smoothing on, reset off.
    assert lessons[0].completion_criteria == CompletionCriteriaSettings("fake_behavior", "reward", 100, True, 30.0, True)
    assert lessons[1].completion_criteria == CompletionCriteriaSettings("fake_behavior", "progress", 0, True, 0.5, False)
    assert lessons[2] == Lesson("Lesson3", UniformSettings(1.0, 3.0), None)


def test_resolved_config_reads_back_equal(tmp_path):
    options, _ = load(os.path.join(FIXTURES, "mlagents_r22_WallJump_curriculum.yaml"))
    out = str(tmp_path / "configuration.yaml")
    write_resolved_config(options, out)
    again, warnings = load(out)
    assert again == options and warnings == []
    text = open(out).read()
    assert "sampler_type: uniform" in text and "sampler_type: constant" in text  # ML-Agents' spelling


def test_last_lesson_criteria_are_ignored_with_a_warning(tmp_path):
    path = write(tmp_path, """
        behaviors: {B: {}}
        environment_parameters:
          p:
            curriculum:
              - {name: A, value: 1, completion_criteria: {behavior: B}}
              - {name: Z, value: 2, completion_criteria: {behavior: B}}
    """)
    options, warnings = load(path)
    assert warnings == [
        f"{path}: environment_parameters.p.curriculum[1].completion_criteria: ignored: the last lesson never ends "
        "(as in ML-Agents)"
    ]


def test_behaviors_of_default_settings_are_checked_when_the_env_is_known(tmp_path):
    path = write(tmp_path, """
        default_settings: {max_steps: 10}
        environment_parameters:
          p:
            curriculum:
              - {name: A, value: 1, completion_criteria: {behavior: AnyName}}
              - {name: Z, value: 2}
    """)
    assert load(path)[0].environment_parameters["p"].curriculum[0].completion_criteria.behavior == "AnyName"


BASE = "behaviors:\n  Jumper: {max_steps: 100}\nenvironment_parameters:\n"
BAD = [
    ("  p: {sampler_type: triangular, sampler_parameters: {min_value: 1}}\n",
     "environment_parameters.p.sampler_type: unknown value 'triangular'; expected one of constant, uniform, "
     "gaussian, multirangeuniform"),
    ("  p: {uniformm: {min_value: 1}}\n",
     "environment_parameters.p.uniformm: unknown sampler type; expected one of constant, uniform, gaussian, "
     "multirangeuniform; did you mean uniform?"),
    ("  p:\n    curriculum:\n      - {name: A, value: 1}\n      - {name: B, value: 2}\n",
     "environment_parameters.p.curriculum[0].completion_criteria: required for every lesson but the last "
     "(lesson 'A', 1 of 2)"),
    ("  p:\n    curriculum:\n      - {name: A, value: 1, completion_criteria: {behavior: Jumpr, threshold: 1}}\n"
     "      - {name: B, value: 2}\n",
     "environment_parameters.p.curriculum[0].completion_criteria.behavior: 'Jumpr' is not a configured behavior "
     "(behaviors: Jumper); did you mean Jumper?"),
    ("  p:\n    curriculum:\n      - {name: A, value: 1, completion_criteria: {threshold: 1}}\n      - {name: B, value: 2}\n",
     "environment_parameters.p.curriculum[0].completion_criteria.behavior: required key is missing"),
    ("  p: {uniform: {min_value: 3, max_value: 1}}\n",
     "environment_parameters.p.uniform.min_value: expected at most max_value (1), got 3"),
    ("  p:\n    curriculum:\n      - {name: A, value: 1, completion_criteria: {behavior: Jumper, measure: progress, "
     "threshold: 2}}\n      - {name: B, value: 2}\n",
     "environment_parameters.p.curriculum[0].completion_criteria.threshold: expected a number in [0, 1] for "
     "measure progress, got 2.0"),
    ("  p:\n    curriculum:\n      - Lesson0: {value: 1}\n",
     "environment_parameters.p.curriculum[0]: expected a lesson with name, value and completion_criteria; did "
     "you mean '- name: Lesson0'?"),
    ("  p: {gaussian: {mean: 1, st_dev: 1, seed: 9999999999}}\n",
     "environment_parameters.p.gaussian.seed: expected a 32-bit integer (-1: from the run's seed), got 9999999999"),
    ("  p\u00e9: 1\n", "environment_parameters.p\u00e9: a parameter name must be ASCII (Unity reads it so)"),
    ("  p: {sampler_type: uniform}\n", "environment_parameters.p.sampler_parameters: required key is missing"),
    ("  p: {multirangeuniform: {intervals: [[1, 2], [5]]}}\n",
     "environment_parameters.p.multirangeuniform.intervals[1]: expected [min, max], got 1 value"),
    ("  p: true\n", "environment_parameters.p: expected a number or a sampler, got true"),
    ("  p: {gaussian: {mean: 1, st_dev: -1}}\n", "environment_parameters.p.gaussian.st_dev: expected a number >= 0, got -1.0"),
    ("  p:\n    curriculum: []\n", "environment_parameters.p.curriculum: expected a non-empty list of lessons, got an empty list"),
    ("  p:\n    curriculum: [{value: 1}]\n", "environment_parameters.p.curriculum[0].name: required key is missing"),
]


@pytest.mark.parametrize("section, expected", BAD)
def test_bad_environment_parameters_are_one_line_with_the_yaml_path(tmp_path, section, expected):
    path = write(tmp_path, BASE + section)
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    assert str(info.value) == f"{path}: {expected}"
    assert "\n" not in str(info.value)


# -------------------------------------------------------------------- 0.11-0.15 files
WALL_JUMP_015 = """
BigWallJump:
  measure: progress
  thresholds: [0.1, 0.3, 0.5]
  min_lesson_length: 100
  signal_smoothing: true
  parameters:
    big_wall_min_height: [0.0, 4.0, 6.0, 8.0]
    big_wall_max_height: [4.0, 7.0, 8.0, 8.0]
SmallWallJump:
  measure: reward
  thresholds: [0.5]
  min_lesson_length: 20
  signal_smoothing: false
  parameters:
    small_wall_height: [1.5, 4.0]
"""
NESTED = """
behaviors: {BigWallJump: {max_steps: 100}, SmallWallJump: {max_steps: 100}}
environment_parameters:
  big_wall_min_height:
    curriculum:
      - {name: Lesson0, value: 0.0, completion_criteria: {behavior: BigWallJump, measure: progress, threshold: 0.1,
         min_lesson_length: 100, signal_smoothing: true, require_reset: true}}
      - {name: Lesson1, value: 4.0, completion_criteria: {behavior: BigWallJump, measure: progress, threshold: 0.3,
         min_lesson_length: 100, signal_smoothing: true, require_reset: true}}
      - {name: Lesson2, value: 6.0, completion_criteria: {behavior: BigWallJump, measure: progress, threshold: 0.5,
         min_lesson_length: 100, signal_smoothing: true, require_reset: true}}
      - {name: Lesson3, value: 8.0}
  big_wall_max_height:
    curriculum:
      - {name: Lesson0, value: 4.0, completion_criteria: {behavior: BigWallJump, measure: progress, threshold: 0.1,
         min_lesson_length: 100, signal_smoothing: true, require_reset: true}}
      - {name: Lesson1, value: 7.0, completion_criteria: {behavior: BigWallJump, measure: progress, threshold: 0.3,
         min_lesson_length: 100, signal_smoothing: true, require_reset: true}}
      - {name: Lesson2, value: 8.0, completion_criteria: {behavior: BigWallJump, measure: progress, threshold: 0.5,
         min_lesson_length: 100, signal_smoothing: true, require_reset: true}}
      - {name: Lesson3, value: 8.0}
  small_wall_height:
    curriculum:
      - {name: Lesson0, value: 1.5, completion_criteria: {behavior: SmallWallJump, measure: reward, threshold: 0.5,
         min_lesson_length: 20, signal_smoothing: false, require_reset: true}}
      - {name: Lesson1, value: 4.0}
"""
FLAT = "default: {trainer: ppo, max_steps: 100}\nBigWallJump: {}\nSmallWallJump: {}\n"


def test_a_0x_curriculum_file_gives_the_lessons_of_its_nested_form(tmp_path):
    nested, _ = load(write(tmp_path, NESTED, "nested.yaml"))
    config = write(tmp_path, "behaviors: {BigWallJump: {max_steps: 100}, SmallWallJump: {max_steps: 100}}\n")
    curriculum = write(tmp_path, WALL_JUMP_015, "wall_jump.yaml")
    options, warnings = load(config, curriculum=curriculum)
    assert options.environment_parameters == nested.environment_parameters and warnings == []
    # 0.11-0.13: a directory of <Behavior>.json (JSON is YAML), and one behavior's file.
    folder = tmp_path / "curricula"
    folder.mkdir()
    for behavior, section in __import__("yaml").safe_load(WALL_JUMP_015).items():
        (folder / f"{behavior}.json").write_text(json.dumps(section, indent=2))
    flat, _ = load(write(tmp_path, FLAT, "flat.yaml"), curriculum=str(folder))
    assert flat.environment_parameters == nested.environment_parameters
    single, _ = load(config, curriculum=str(folder / "SmallWallJump.json"))
    assert single.environment_parameters == {"small_wall_height": nested.environment_parameters["small_wall_height"]}
    # The converted form is what configuration.yaml records.
    out = str(tmp_path / "configuration.yaml")
    write_resolved_config(options, out)
    assert load(out)[0] == options


def test_a_0x_sampler_file_gives_samplers_and_reports_the_interval(tmp_path):
    sampler = write(tmp_path, """
        resampling-interval: 5000
        mass: {sampler-type: uniform, min_value: 0.5, max_value: 10}
        gravity: {sampler-type: multirange_uniform, intervals: [[7, 10], [15, 20]]}
        scale: {sampler-type: gaussian, mean: 2, st_dev: .3}
    """, "sampler.yaml")
    options, warnings = load(write(tmp_path, FLAT), sampler=sampler)
    assert options.environment_parameters == {
        "mass": EnvironmentParameterSettings((Lesson("mass", UniformSettings(0.5, 10.0)),)),
        "gravity": EnvironmentParameterSettings((Lesson("gravity", MultiRangeUniformSettings(((7.0, 10.0), (15.0, 20.0)))),)),
        "scale": EnvironmentParameterSettings((Lesson("scale", GaussianSettings(2.0, 0.3)),)),
    }
    assert warnings == [
        f"{sampler}: resampling-interval: 5000: not used: every sampler is drawn at each episode start "
        "(ML-Agents since release 3), not every resampling-interval steps"
    ]


@pytest.mark.parametrize(
    "flag, text, expected",
    [
        ("curriculum", "B: {measure: progress, thresholds: [0.1], min_lesson_length: 1, signal_smoothing: true, "
         "parameters: {h: [1, 2, 3]}}\n",
         "B.parameters.h: expected 2 values (one per lesson: 1 thresholds + 1), got 3"),
        ("curriculum", "B: {measure: progress, thresholds: [0.1], signal_smoothing: true, parameters: {h: [1, 2]}}\n",
         "B.min_lesson_length: required key is missing (0.x required every curriculum key)"),
        ("curriculum", "B: {measure: progress, thresholds: [2], min_lesson_length: 1, signal_smoothing: true, "
         "parameters: {h: [1, 2]}}\n",
         "B.thresholds[0]: expected a number in [0, 1] for measure progress, got 2.0"),
        ("curriculum", "Nobody: {measure: reward, thresholds: [1], min_lesson_length: 1, signal_smoothing: true, "
         "parameters: {h: [1, 2]}}\n",
         "Nobody: 'Nobody' is not a configured behavior (behaviors: B)"),
        ("sampler", "mass: {sampler-type: uniform, min_value: 1, max_value: 2}\n",
         "resampling-interval: required key is missing (0.x required it with samplers)"),
        ("sampler", "resampling-interval: 10\nmass: {sampler-type: triangle, min_value: 1}\n",
         "mass.sampler-type: unknown sampler type 'triangle'; expected one of uniform, gaussian, multirange_uniform"),
        ("sampler", "resampling-interval: 10\nmass: {sampler-type: gaussian, mean: 1}\n",
         "mass.st_dev: required key is missing (a gaussian sampler takes mean, st_dev)"),
    ],
)
def test_bad_0x_files_are_one_line_naming_the_file(tmp_path, flag, text, expected):
    config = write(tmp_path, "behaviors: {B: {max_steps: 10}}\n")
    old = write(tmp_path, text, "old.yaml")
    with pytest.raises(ConfigError) as info:
        load_settings(config, {flag: old})
    assert str(info.value) == f"{old}: {expected}"


def test_a_parameter_given_twice_is_one_line_naming_both(tmp_path):
    config = write(tmp_path, "behaviors: {B: {max_steps: 10}}\nenvironment_parameters: {mass: 1}\n")
    sampler = write(tmp_path, "resampling-interval: 10\nmass: {sampler-type: uniform, min_value: 1, max_value: 2}\n", "s.yaml")
    with pytest.raises(ConfigError) as info:
        load_settings(config, {"sampler": sampler})
    assert str(info.value) == f"{sampler}: mass: parameter 'mass' is also given in {config}: environment_parameters.mass; give it once"
