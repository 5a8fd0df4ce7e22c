"""Environment parameters and curricula end to end through ``trainer-learn`` on the built-in
Simple env (seed 1): lessons change at their threshold once ``min_lesson_length`` episodes
were played, the env takes the new values (episode lengths), ``--resume`` continues in the
lesson and with the measure it left, ML-Agents 0.x's ``--curriculum`` file runs the same
lessons, a Unity game gets the parameter messages and the reset, and bad input is one line."""
from __future__ import annotations

import csv
import json
import os
import textwrap

from envs.unity.fake_game import free_port, write_fake_build

SIMPLE = """
behaviors:
  Simple:
    trainer_type: ppo
    hyperparameters: {batch_size: 16, buffer_size: 64, learning_rate: 5.0e-3, learning_rate_schedule: constant}
    network_settings: {hidden_units: 32, num_layers: 1}
    max_steps: 600
    time_horizon: 64
    summary_freq: 100
env_settings: {env_path: builtin:Simple, seed: 1}
"""


def write(tmp_path, text: str, name: str = "c.yaml") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def rows(results, run_id: str, tag: str, behavior: str = "Simple"):
    with open(os.path.join(results, run_id, behavior, "stats.csv")) as f:
        return [(int(r["step"]), float(r["mean"])) for r in csv.DictReader(f) if r["tag"] == tag]


def curriculum_status(results, run_id: str):
    with open(os.path.join(results, run_id, "run_logs", "training_status.json")) as f:
        return json.load(f)["environment_parameters"]


def error_line(err: str) -> str:
    lines = [line for line in err.strip().splitlines() if line.startswith("trainer-learn")]
    assert len(lines) == 1, err
    return lines[0]


PROGRESS = SIMPLE + """
environment_parameters:
  goal_distance:
    curriculum:
      - name: Near
        completion_criteria: {behavior: Simple, measure: progress, threshold: 0.3, min_lesson_length: 5,
                              require_reset: true}
        value: 0.2
      - name: Far
        value: 1.0
"""


def test_a_progress_lesson_ends_at_its_threshold_and_the_env_takes_the_value(run_cli, tmp_path):
    code, out, err = run_cli(write(tmp_path, PROGRESS), "--run-id=progress")
    assert code == 0, err
    assert "[INFO] Parameter 'goal_distance' is in lesson 'Near' and has value 0.2." in out
    # 600 x 0.3 = 180: the first check past it is at step 181 (one agent, one step each).
    assert ("[INFO] Simple. Step: 181. Lesson 'Near' of 'goal_distance' is complete (progress 0.3017 > 0.3, "
            "5 episodes counted). Parameter 'goal_distance' is in lesson 'Far' and has value 1.") in out
    lessons = rows(run_cli.results, "progress", "Environment/Lesson Number/goal_distance")
    assert lessons == [(100, 0.0), (200, 1.0), (300, 1.0), (400, 1.0), (500, 1.0), (600, 1.0)]
    # Near (0.2): one step of 0.2 ends an episode; Far (1.0): at least 5 (the reset at the
    # change started every episode anew at 1.0).
    lengths = dict(rows(run_cli.results, "progress", "Environment/Episode Length"))
    assert lengths[100] < 2.5 and all(lengths[step] >= 5 for step in (300, 400, 500, 600)), lengths
    assert curriculum_status(run_cli.results, "progress")["parameters"] == {
        "goal_distance": {"lesson_num": 1, "smoothed_value": 0.0}
    }
    with open(os.path.join(run_cli.results, "progress", "configuration.yaml")) as f:
        assert "environment_parameters:\n  goal_distance:\n    curriculum:\n    - name: Near" in f.read()


REWARD = SIMPLE.replace("max_steps: 600", "max_steps: 2500").replace("summary_freq: 100", "summary_freq: 500") + """
environment_parameters:
  goal_distance:
    curriculum:
      - name: Near
        completion_criteria: {behavior: Simple, threshold: 0.9, min_lesson_length: 20}
        value: 0.2
      - name: Far
        value: 1.0
  step_size: {uniform: {min_value: 0.15, max_value: 0.25, seed: 3}}
"""


def test_a_reward_lesson_ends_once_the_smoothed_reward_passes_after_enough_episodes(run_cli, tmp_path):
    """From a random policy (mean return about 0 at distance 0.2: +-1.06 by direction) to one
    that reaches the goal (1.06): the lesson ends on the smoothed mean of the last 20
    episodes, then the agent goes on learning at distance 1."""
    code, out, err = run_cli(write(tmp_path, REWARD), "--run-id=reward")
    assert code == 0, err
    ended = [line for line in out.splitlines() if "Lesson 'Near' of 'goal_distance' is complete" in line]
    assert len(ended) == 1, out
    smoothed = float(ended[0].split("smoothed reward ")[1].split(" ")[0])
    assert 0.9 < smoothed <= 1.06 and ", 20 episodes counted)" in ended[0]
    assert "[INFO] Parameter 'step_size' is in lesson 'step_size' and has value uniform [0.15, 0.25) seed 3." in out
    rewards = rows(run_cli.results, "reward", "Environment/Cumulative Reward")
    assert rewards[-1][1] > 0.8, rewards  # learnt at distance 1 too (optimum about 1.0)


RESUME = SIMPLE + """
environment_parameters:
  level:
    curriculum:
      - name: L0
        completion_criteria: {behavior: Simple, threshold: -10, min_lesson_length: 5}
        value: 0.2
      - name: L1
        completion_criteria: {behavior: Simple, threshold: 100, min_lesson_length: 5}
        value: 0.5
      - name: L2
        value: 1.0
""".replace("level", "goal_distance")


def test_resume_goes_on_in_the_lesson_with_its_smoothed_measure(run_cli, tmp_path):
    config = write(tmp_path, RESUME)
    code, out, err = run_cli(config, "--run-id=resume", "--max-steps=300")
    assert code == 0, err
    assert "Lesson 'L0' of 'goal_distance' is complete" in out
    first = curriculum_status(run_cli.results, "resume")
    assert first["parameters"]["goal_distance"]["lesson_num"] == 1
    smoothed = first["parameters"]["goal_distance"]["smoothed_value"]
    assert smoothed != 0.0 and len(first["reward_buffers"]["Simple"]) == 5
    code, out, err = run_cli(config, "--run-id=resume", "--max-steps=600", "--resume")
    assert code == 0, err
    # In L1 from the start, with the smoothed measure and the 5 episodes counted so far
    # (ML-Agents restores the lesson alone).
    assert (f"[INFO] Curricula resumed: 'goal_distance' in lesson 1 (smoothed measure {smoothed:.6g}); "
            "episodes counted in the lessons: Simple 5.") in out
    assert "[INFO] Parameter 'goal_distance' is in lesson 'L1' and has value 0.5." in out
    assert "Lesson 'L0'" not in out
    assert [lesson for step, lesson in rows(run_cli.results, "resume", "Environment/Lesson Number/goal_distance")
            if step > 300] == [1.0, 1.0, 1.0]
    assert curriculum_status(run_cli.results, "resume")["parameters"]["goal_distance"]["lesson_num"] == 1
    # --inference plays in the lesson the run reached, and ends none.
    code, out, err = run_cli(config, "--run-id=resume", "--max-steps=200", "--inference")
    assert code == 0, err
    assert "[INFO] Parameter 'goal_distance' is in lesson 'L1' and has value 0.5." in out
    assert "is complete" not in out


OLD_CURRICULUM = """
Simple:
  measure: progress
  thresholds: [0.3]
  min_lesson_length: 5
  signal_smoothing: true
  parameters:
    goal_distance: [0.2, 1.0]
"""


def test_a_0x_curriculum_file_runs_the_lessons_of_its_nested_form(run_cli, tmp_path):
    config = write(tmp_path, SIMPLE)
    old = write(tmp_path, OLD_CURRICULUM, "curriculum.yaml")
    code, out, err = run_cli(config, f"--curriculum={old}", "--run-id=old")
    assert code == 0, err
    # The converted lessons are PROGRESS's (Lesson0, Lesson1; 0.x reset at every change).
    assert "[INFO] Simple. Step: 181. Lesson 'Lesson0' of 'goal_distance' is complete (progress 0.3017 > 0.3" in out
    assert rows(run_cli.results, "old", "Environment/Lesson Number/goal_distance")[-1] == (600, 1.0)
    with open(os.path.join(run_cli.results, "old", "configuration.yaml")) as f:
        written = f.read()
    assert "- name: Lesson0" in written and "require_reset: true" in written


def test_bad_environment_parameters_are_one_line(run_cli, tmp_path):
    unknown = write(tmp_path, SIMPLE + "environment_parameters: {gravity: 9.8}\n", "unknown.yaml")
    code, _, err = run_cli(unknown, "--run-id=bad1")
    assert code == 1
    assert error_line(err) == (
        "trainer-learn: error: builtin:Simple: environment_parameters.gravity: not a parameter of this environment "
        "(it takes: step_size, goal_distance)"
    )
    out_of_range = write(tmp_path, SIMPLE + "environment_parameters: {step_size: {uniform: {min_value: 0.5, "
                         "max_value: 3}}}\n", "range.yaml")
    code, _, err = run_cli(out_of_range, "--run-id=bad2")
    assert code == 1 and "is outside the parameter's range [1e-06, 1]" in error_line(err)
    sampler = write(tmp_path, SIMPLE + "environment_parameters: {step_size: {sampler_type: beta, "
                    "sampler_parameters: {}}}\n", "sampler.yaml")
    code, _, err = run_cli(sampler, "--run-id=bad3")
    assert code == 1
    assert error_line(err) == (
        f"trainer-learn: error: {sampler}: environment_parameters.step_size.sampler_type: unknown value 'beta'; "
        "expected one of constant, uniform, gaussian, multirangeuniform"
    )
    behavior = write(tmp_path, PROGRESS.replace("behavior: Simple", "behavior: Simpel"), "behavior.yaml")
    code, _, err = run_cli(behavior, "--run-id=bad4")
    assert code == 1
    assert error_line(err) == (
        f"trainer-learn: error: {behavior}: environment_parameters.goal_distance.curriculum[0].completion_criteria"
        ".behavior: 'Simpel' is not a configured behavior (behaviors: Simple); did you mean Simple?"
    )
    with_default = write(tmp_path, PROGRESS.replace("behaviors:\n  Simple:", "default_settings:").replace(
        "behavior: Simple", "behavior: Nobody"), "default.yaml")
    code, _, err = run_cli(with_default, "--run-id=bad5")
    assert code == 1
    assert error_line(err) == (
        "trainer-learn: error: environment_parameters.goal_distance.curriculum[0].completion_criteria.behavior: "
        "'Nobody': the environment builtin:Simple has no such behavior (it has: Simple)"
    )
    assert not os.path.exists(os.path.join(run_cli.results, "bad1"))


UNITY = """
behaviors:
  Fake:
    trainer_type: ppo
    hyperparameters: {batch_size: 16, buffer_size: 64}
    network_settings: {hidden_units: 16, num_layers: 1}
    max_steps: 100
    summary_freq: 50
env_settings: {seed: 1, timeout_wait: 30}
environment_parameters:
  mass: {sampler_type: uniform, sampler_parameters: {min_value: 0.5, max_value: 10}}
  wall:
    curriculum:
      - name: Low
        completion_criteria: {behavior: Fake, measure: progress, threshold: 0.5, require_reset: true}
        value: 1.5
      - name: High
        value: 4.0
"""


def test_a_unity_game_gets_ml_agents_messages_and_a_reset_at_the_lesson_change(run_cli, tmp_path):
    build = write_fake_build(str(tmp_path / "Game.x86_64"), [{"name": "Fake"}],
                             ["--record", str(tmp_path / "game-{port}.json")])
    port = free_port()
    code, out, err = run_cli(write(tmp_path, UNITY), f"--env={build}", f"--base-port={port}", "--run-id=unity")
    assert code == 0, err
    with open(tmp_path / f"game-{port}.json") as f:
        game = json.load(f)
    # With the first reset: the sampler (seed 1 + 0: run seed 1) and lesson Low's float; at
    # the change (step 51), with the reset (command 1, between steps: 0), every parameter
    # again, as ML-Agents sends them (the game's mass sampler restarts from its seed).
    mass = "04000000" "6d617373" "01000000" "01000000" "00000000" "0000003f" "00002041"
    low, high = ("04000000" + b"wall".hex() + "00000000" + value for value in ("0000c03f", "00008040"))
    assert game["parameter_messages"] == [mass, low, mass, high]
    assert game["parameters"] == {"mass": ["uniform", 1, 0.5, 10.0], "wall": 4.0}
    commands = game["commands"]
    assert commands[0] == 1 and commands.count(1) == 2 and commands[commands.index(1, 1) - 1] == 0
    assert "Lesson 'Low' of 'wall' is complete (progress 0.5100 > 0.5" in out


FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "configs")


def on_look_alike(tmp_path, fixture: str, env_args: str) -> str:
    """A Release 22 example config trained on `builtin:LookAlike` with its game's behavior
    names, spaces and parameter names (``env_args``)."""
    with open(os.path.join(FIXTURES, fixture)) as f:
        text = f.read()
    return write(tmp_path, text + f"env_settings: {{env_path: builtin:LookAlike, seed: 1, env_args: {env_args}}}\n",
                 fixture)


def test_release_22_3dball_randomize_trains_on_a_look_alike(run_cli, tmp_path):
    config = on_look_alike(tmp_path, "mlagents_r22_3DBall_randomize.yaml",
                           "{behaviors: {3DBall: {vector: [8], continuous: 2}}, parameters: [mass, scale]}")
    code, out, err = run_cli(config, "--run-id=ball", "--max-steps=300")
    assert code == 0, err
    assert "[INFO] Parameter 'mass' is in lesson 'mass' and has value uniform [0.5, 10) seed 1." in out
    assert "[INFO] Parameter 'scale' is in lesson 'scale' and has value uniform [0.75, 3) seed 2." in out


def test_release_22_walljump_curriculum_runs_its_lessons_on_a_look_alike(run_cli, tmp_path):
    """Both behaviors' progress lessons (0.1, 0.3, 0.5 of max_steps, 100 episodes each) end
    in order (16 agents per behavior with 2-step episodes: 8 episodes per step of 16)."""
    spaces = "{vector: [74], discrete: [3, 3, 3, 2]}"
    config = on_look_alike(
        tmp_path, "mlagents_r22_WallJump_curriculum.yaml",
        f"{{behaviors: {{BigWallJump: {spaces}, SmallWallJump: {spaces}}}, num_agents: 16, episode_length: 2, "
        "parameters: [big_wall_height, small_wall_height]}",
    )
    code, out, err = run_cli(config, "--run-id=walljump", "--max-steps=2000")
    assert code == 0, err
    ended = [line.split(". Lesson ")[1].split(" is complete")[0] for line in out.splitlines() if "is complete" in line]
    assert ended == [f"'Lesson{i}' of '{name}'" for i in range(3) for name in ("big_wall_height", "small_wall_height")]
    steps = [int(line.split("Step: ")[1].split(".")[0]) for line in out.splitlines() if "is complete" in line]
    # Lesson 0 waits for 100 episodes: 112 have ended after 14 steps of 16 agents, counted at
    # the 15th (step 240); the others end at the first multiple of 16 past 600 and 1000.
    assert steps == [240, 240, 608, 608, 1008, 1008]
    assert curriculum_status(run_cli.results, "walljump")["parameters"] == {
        "big_wall_height": {"lesson_num": 3, "smoothed_value": 0.0},
        "small_wall_height": {"lesson_num": 3, "smoothed_value": 0.0},
    }
