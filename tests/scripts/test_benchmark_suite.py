"""scripts/benchmark_suite.py: the metric definitions, the verdict, the budget caps, the
translation of our zoo configs into Stable-Baselines3's arguments, its output files and
bad input. Stable-Baselines3 itself is never imported or run here."""
from __future__ import annotations

import csv
import dataclasses
import json
import math
import os
import subprocess
import sys
import tempfile
from typing import Dict

import pytest
from script_loader import ROOT, load_script

SCRIPT = os.path.join(ROOT, "scripts", "benchmark_suite.py")
suite = load_script("benchmark_suite")


def test_sb3_episodes_count_within_the_budget() -> None:
    # SB3's PPO ends its last rollout past total_timesteps: those episodes are left out, as
    # ours stops at max_steps; a record without its step count (older runner) is kept.
    episodes = [[-900.0, 200, 800], [-500.0, 200, 100_000], [-150.0, 200, 100_800], [-160.0, 200]]
    assert suite.within_budget(episodes, 100_000) == [-900.0, -500.0, -160.0]


def test_final_return_is_the_mean_of_the_last_tenth_of_the_episodes() -> None:
    # 25 episodes: ceil(2.5) = 3 -> (23 + 24 + 25) / 3.
    assert suite.final_return([float(i) for i in range(1, 26)]) == pytest.approx(24.0)
    # 10 episodes: exactly 1 (no rounding up of 1.0 to 2).
    assert suite.final_return([float(i) for i in range(1, 11)]) == pytest.approx(10.0)
    # 11 episodes: ceil(1.1) = 2 -> (10 + 11) / 2.
    assert suite.final_return([float(i) for i in range(1, 12)]) == pytest.approx(10.5)
    # Fewer than 10 episodes: still the last one.
    assert suite.final_return([-3.0, 7.0]) == pytest.approx(7.0)
    assert math.isnan(suite.final_return([]))


def test_area_under_curve_is_the_mean_return_of_every_episode() -> None:
    assert suite.area_under_curve([1.0, 2.0, 3.0, 10.0]) == pytest.approx(4.0)
    assert suite.area_under_curve([-500.0]) == pytest.approx(-500.0)
    assert math.isnan(suite.area_under_curve([]))


def test_mean_std_is_the_sample_std() -> None:
    mean, std = suite.mean_std([1.0, 2.0, 3.0])
    assert (mean, std) == (pytest.approx(2.0), pytest.approx(1.0))  # sqrt((1 + 0 + 1) / 2)
    assert suite.mean_std([5.0]) == (5.0, 0.0)
    mean, std = suite.mean_std([2.0, math.nan, 4.0])  # a run without episodes is left out
    assert (mean, std) == (pytest.approx(3.0), pytest.approx(math.sqrt(2.0)))


def test_within_one_std_or_better() -> None:
    sb3 = [12.0, 10.0, 14.0]  # mean 12, sample std 2
    assert suite.within_one_std([10.0, 10.0, 10.0], sb3) is True  # exactly one std below
    assert suite.within_one_std([9.9], sb3) is False
    assert suite.within_one_std([100.0], sb3) is True  # better
    # Wall time: lower is better.
    assert suite.within_one_std([14.0], sb3, higher_is_better=False) is True
    assert suite.within_one_std([14.1], sb3, higher_is_better=False) is False
    assert suite.within_one_std([1.0], sb3, higher_is_better=False) is True
    assert suite.within_one_std([1.0], [math.nan]) is None


def test_parse_caps() -> None:
    names = [t.name for t in suite.TASKS]
    assert suite.parse_caps(None, names) == (None, {})
    assert suite.parse_caps("1000", names) == (1000, {})
    assert suite.parse_caps("CartPole=5000, acrobot=7,300", names) == (300, {"CartPole": 5000, "Acrobot": 7})
    for bad in ("0", "x", "CartPole=-1", "Walker=100", "CartPole="):
        with pytest.raises(ValueError, match="--max-steps"):
            suite.parse_caps(bad, names)


def _spec(name: str, cap: int = 0) -> Dict[str, object]:
    task = next(t for t in suite.TASKS if t.name == name)
    with tempfile.TemporaryDirectory() as results:
        options = suite.load_task(task, cap or None, 7, results, 4)
    spec, notes = suite.sb3_spec(options, 7, 4)
    # The zoo configs say nothing SB3 cannot express but ML-Agents' action mapping.
    assert [n for n in notes if not n.startswith("continuous actions reach the env as clip(a, -3, 3) / 3")] == []
    return spec


def test_sb3_spec_of_the_zoo_configs() -> None:
    """The SB3 arguments come from our resolved YAML: the zoo's values on both sides."""
    cart = _spec("CartPole", 5000)
    assert cart["env_id"] == "CartPole-v1" and cart["n_envs"] == 8 and cart["total_timesteps"] == 5000
    assert cart["seed"] == 7 and cart["eval_seed"] == 10_007 and cart["eval_episodes"] == 4
    assert cart["normalize"] is None
    kwargs = cart["kwargs"]
    assert isinstance(kwargs, dict)
    assert (kwargs["n_steps"], kwargs["batch_size"], kwargs["n_epochs"]) == (32, 256, 20)
    assert (kwargs["gamma"], kwargs["gae_lambda"], kwargs["ent_coef"]) == (0.98, 0.8, 0.0)
    assert kwargs["learning_rate"] == {"schedule": "linear", "start": 1e-3, "end": 1e-10}
    assert kwargs["clip_range"] == {"schedule": "linear", "start": 0.2, "end": 0.0}  # lin_0.2
    assert kwargs["clip_range_vf"] is None and kwargs["max_grad_norm"] == 0.5
    assert kwargs["normalize_advantage"] is True
    assert kwargs["policy_kwargs"] == {"activation": "Tanh", "net_arch": {"pi": [64, 64], "vf": [64, 64]},
                                       "log_std_init": 0.0, "optimizer_kwargs": {"eps": 1e-5}}

    acrobot = _spec("Acrobot")
    assert acrobot["n_envs"] == 16 and acrobot["total_timesteps"] == 1_000_000
    assert acrobot["normalize"] == {"obs": True, "reward": True, "gamma": 0.99}
    assert isinstance(acrobot["kwargs"], dict)
    assert (acrobot["kwargs"]["n_steps"], acrobot["kwargs"]["batch_size"], acrobot["kwargs"]["learning_rate"]) == (
        256, 64, 3e-4)

    # Continuous: SB3 gets the zoo's log_std_init in the env's units; ours reach the env as
    # clip(a, -3, 3) / 3 x half the action range (MountainCarContinuous 1, Pendulum 2).
    mcc = _spec("MountainCarContinuous")
    assert isinstance(mcc["kwargs"], dict)
    assert mcc["kwargs"]["policy_kwargs"]["log_std_init"] == pytest.approx(-3.29, abs=1e-5)
    pendulum = _spec("Pendulum")
    assert isinstance(pendulum["kwargs"], dict)
    assert pendulum["kwargs"]["policy_kwargs"]["log_std_init"] == pytest.approx(0.0, abs=1e-5)
    assert suite.action_half_range("Pendulum-v1", {}) == 2.0
    assert suite.action_half_range("CartPole-v1", {}) is None
    assert suite.sb3_log_std_init(0.0, 3.0, 3.0) == 0.0 and suite.sb3_log_std_init(0.5, None, 3.0) == 0.5
    assert suite.sb3_log_std_init(math.log(1.5), 2.0, 3.0) == pytest.approx(0.0)
    # With action_clip equal to the half range the mappings are one: nothing to convert.
    assert suite.sb3_log_std_init(-3.29, 1.0, 1.0) == -3.29 and suite.sb3_log_std_init(0.0, 2.0, 2.0) == 0.0
    assert mcc["kwargs"]["max_grad_norm"] == 5.0
    # gSDE where the zoo has it (Pendulum resamples every 4 steps, MountainCarContinuous
    # after each update), not elsewhere.
    assert (mcc["kwargs"]["use_sde"], mcc["kwargs"]["sde_sample_freq"]) == (True, -1)
    assert (pendulum["kwargs"]["use_sde"], pendulum["kwargs"]["sde_sample_freq"]) == (True, 4)
    assert kwargs["use_sde"] is False

    sac = _spec("PendulumSAC")
    assert sac["algo"] == "sac" and sac["total_timesteps"] == 20_000
    assert sac["kwargs"] == {
        "buffer_size": 1_000_000, "learning_starts": 100, "batch_size": 256, "tau": 0.005, "gamma": 0.99,
        "train_freq": 1, "gradient_steps": 1, "learning_rate": 1e-3, "ent_coef": "auto_1.0",
        "policy_kwargs": {"activation": "ReLU", "net_arch": [256, 256]},
    }


def _run(side: str, seed: int, wall: float, returns: list, eval_mean: float) -> object:
    return suite.Run("CartPole", side, seed, 1000, wall, returns, eval_mean)


def test_sb3_spec_hands_adams_epsilon_and_names_tfs_placement() -> None:
    """SB3 gets our ``adam_epsilon``; with TF's placement (our default) a note says SB3's
    differs (torch's Adam has no switch for it)."""
    task = next(t for t in suite.TASKS if t.name == "CartPole")
    with tempfile.TemporaryDirectory() as results:
        options = suite.load_task(task, 5000, 7, results, 4)
    name, s = next(iter(options.behaviors.items()))
    h = dataclasses.replace(s.hyperparameters, adam_epsilon=1e-8, adam_epsilon_placement="tf")
    options = dataclasses.replace(options, behaviors={name: dataclasses.replace(s, hyperparameters=h)})
    spec, notes = suite.sb3_spec(options, 7, 4)
    assert spec["kwargs"]["policy_kwargs"]["optimizer_kwargs"] == {"eps": 1e-8}
    assert [n for n in notes if "adam_epsilon_placement: torch" in n] == [
        "Adam's epsilon joins the raw second moment's root here, the bias-corrected one in SB3 (torch): "
        "set adam_epsilon_placement: torch"]


def test_summary_verdicts_speed_ratio_and_out_files(tmp_path: object) -> None:
    ours = [_run("ours", 1, 10.0, [1.0] * 9 + [10.0], 9.0), _run("ours", 2, 10.0, [3.0] * 9 + [20.0], 11.0)]
    sb3 = [_run("sb3", 1, 40.0, [2.0] * 9 + [30.0], 30.0), _run("sb3", 2, 40.0, [2.0] * 9 + [40.0], 40.0)]
    s = suite.summarise("CartPole", ours, sb3)
    # final: ours 10, 20 (15 +- 7.07); SB3 30, 40 (35 +- 7.07): 15 < 27.9 -> NO.
    assert s["final return (last 10%)"]["ours"] == (pytest.approx(15.0), pytest.approx(math.sqrt(50.0)))
    assert s["final return (last 10%)"]["ok"] is False
    # AUC: ours 1.9, 4.7 (mean 3.3); SB3 4.8, 5.8 (5.3 +- 0.707): NO. Wall 10 vs 40: yes.
    assert s["AUC (mean ep. return)"]["ours"][0] == pytest.approx(3.3)
    assert s["AUC (mean ep. return)"]["ok"] is False
    assert s["wall s"]["ok"] is True and s["env steps/s"]["ok"] is True
    assert s["speed_ratio"] == pytest.approx(4.0)
    lines = suite.format_summary(s)
    assert any(line.split()[:2] == ["final", "return"] and line.endswith("NO") for line in lines)
    assert lines[-1].strip() == "speed ratio ours/SB3 (env steps/s): 4.00x  (>= 3x: yes)"
    # Ours alone (no --sb3-python): no verdict, no ratio.
    alone = suite.summarise("CartPole", ours, [])
    assert alone["wall s"]["ok"] is None and math.isnan(alone["speed_ratio"])

    folder = str(tmp_path)
    suite.write_out(os.path.join(folder, "runs.csv"), ours + sb3, [s], {})
    with open(os.path.join(folder, "runs.csv")) as f:
        rows = list(csv.DictReader(f))
    assert [(r["side"], r["seed"]) for r in rows] == [("ours", "1"), ("ours", "2"), ("sb3", "1"), ("sb3", "2")]
    assert float(rows[2]["final_return"]) == pytest.approx(30.0) and float(rows[0]["auc"]) == pytest.approx(1.9)
    suite.write_out(os.path.join(folder, "runs.json"), ours + sb3, [s], {"seeds": [1, 2]})
    with open(os.path.join(folder, "runs.json")) as f:
        doc = json.load(f)
    assert doc["meta"] == {"seeds": [1, 2]} and doc["runs"][3]["returns"][-1] == 40.0
    assert doc["summaries"][0]["speed_ratio"] == pytest.approx(4.0)


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--max-steps=CartPole=0"], "--max-steps: 'CartPole=0' is not N or Task=N"),
        (["--tasks=Walker"], "--tasks: unknown task(s) ['Walker']"),
        (["--sb3-python=/nonexistent/python"], "--sb3-python=/nonexistent/python: cannot run it"),
        (["--sb3-python=" + sys.executable], "cannot import stable_baselines3"),
    ],
)
def test_bad_input_is_one_error_line(args: list, expected: str) -> None:
    done = subprocess.run([sys.executable, SCRIPT] + args, capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 2
    assert expected in done.stderr.strip().splitlines()[-1]
    assert "Traceback" not in done.stderr


def test_ours_alone_end_to_end(tmp_path: object) -> None:
    """A tiny capped run of our side (seed 1): every episode recorded, the deterministic
    evaluation read back, the budget and the cap stated."""
    out = os.path.join(str(tmp_path), "runs.json")
    done = subprocess.run(
        [sys.executable, SCRIPT, "--tasks=CartPole", "--seeds=1", "--max-steps=512", "--eval-episodes=2",
         f"--out={out}"],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "CartPole (CartPole-v1), 512 steps (capped: the zoo's budget is 100000)" in done.stdout
    with open(out) as f:
        run = json.load(f)["runs"][0]
    assert run["side"] == "ours" and run["steps"] == 512
    # 512 steps of 8 copies of a random-ish CartPole policy: episodes of ~10-60 steps.
    assert run["episodes"] == len(run["returns"]) >= 8
    assert run["final_return"] == pytest.approx(suite.final_return(run["returns"]))
    assert run["auc"] == pytest.approx(sum(run["returns"]) / len(run["returns"]))
    assert 1.0 <= run["eval_return"] <= 500.0  # CartPole's returns: 1 per step
    # The final checkpoint, the best one and their exports: timed apart, not in the wall time.
    assert run["save_s"] > 0 and run["wall_s"] > 0
    assert "s saving)" in done.stdout
