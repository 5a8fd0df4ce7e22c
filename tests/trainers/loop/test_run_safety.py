"""Operator mistakes that used to lose data or give a traceback (issue "Hardening 3"), end to
end through ``trainer-learn``: run ids that are paths, ``--force`` before the input is
checked, two processes on one run, resuming a copied run, the last update at ``max_steps``,
exit codes of a stopped run, and ``--inference`` with nothing to play."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
import yaml
from trainer_test_utils import config_path

from envs.base_env import BehaviorId, behavior_ids
from trainers.loop.run_dir import RunLock

SIMPLE = config_path("Simple_discrete.yaml")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def one_line(err: str) -> str:
    lines = [line for line in err.strip().splitlines() if line.startswith("trainer-learn")]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def config(tmp_path, name: str = "cfg.yaml", **behavior) -> str:
    cfg = yaml.safe_load(open(SIMPLE))
    cfg["behaviors"]["Simple"].update(behavior)
    path = tmp_path / name
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


def checkpoints(run_dir) -> list:
    return sorted(f for f in os.listdir(os.path.join(run_dir, "Simple")) if f.endswith(".index"))


def test_behavior_id_splits_the_team_suffix_as_ml_agents():
    assert BehaviorId.parse("3DBall?team=0") == BehaviorId("3DBall", 0, "3DBall?team=0")
    assert BehaviorId.parse("Striker?team=1").team == 1
    assert BehaviorId.parse("CartPole-v1") == BehaviorId("CartPole-v1", 0, "CartPole-v1")
    assert BehaviorId.parse("odd?team=x").name == "odd?team=x"  # not a suffix: kept whole
    assert behavior_ids(["Goalie?team=1", "Striker?team=0", "Striker?team=1"]) == {
        "Goalie": ["Goalie?team=1"], "Striker": ["Striker?team=0", "Striker?team=1"]}


@pytest.mark.parametrize("run_id", ["/tmp/abs", "../outside", ".", "..", "a/b", "x" * 256])
def test_run_ids_are_names_and_force_deletes_nothing_outside(run_cli, tmp_path, run_id):
    # A folder the bad ids would reach (beside the results folder, or the results folder).
    victim = tmp_path / "outside"
    victim.mkdir()
    (victim / "keep.txt").write_text("precious")
    run_cli.results.mkdir()
    (run_cli.results / "other_run").mkdir()
    code, _, err = run_cli(SIMPLE, f"--run-id={run_id}", "--force", "--max-steps=10")
    assert code == 1
    assert "--run-id" in one_line(err) and len(one_line(err)) < 300
    assert (victim / "keep.txt").read_text() == "precious"
    assert (run_cli.results / "other_run").is_dir()


def test_force_checks_everything_before_it_deletes(run_cli, tmp_path):
    code, _, err = run_cli(SIMPLE, "--run-id=old", "--max-steps=200")
    assert code == 0, err
    run_dir = run_cli.results / "old"
    before = checkpoints(run_dir)
    bad_env = tmp_path / "bad_env.yaml"
    cfg = yaml.safe_load(open(SIMPLE))
    cfg["env_settings"]["env_path"] = "builtin:Simpel"
    bad_env.write_text(yaml.safe_dump(cfg))
    bad_behavior = tmp_path / "bad_behavior.yaml"
    cfg = yaml.safe_load(open(SIMPLE))
    cfg["behaviors"]["Simpel"] = cfg["behaviors"].pop("Simple")
    bad_behavior.write_text(yaml.safe_dump(cfg))
    bad_demo = config(tmp_path, "bad_demo.yaml", behavioral_cloning={"demo_path": str(tmp_path / "no.demo"),
                                                                      "strength": 0.5})
    for args in ([str(bad_env)], [str(bad_behavior)], [bad_demo], [SIMPLE, "--devices=/gpu:7"],
                 [SIMPLE, "--initialize-from=nope"]):
        code, _, err = run_cli(*args, "--run-id=old", "--force", "--max-steps=100")
        assert code == 1, (args, err)
        one_line(err)
        assert checkpoints(run_dir) == before, args
        assert (run_dir / "configuration.yaml").exists()
    # --initialize-from the run being overwritten: its weights are read before it is deleted.
    code, _, err = run_cli(SIMPLE, "--run-id=old", "--force", "--initialize-from=old", "--max-steps=100")
    assert code == 0, err
    assert checkpoints(run_dir) == ["checkpoint-100.index"]


def test_a_second_process_on_a_run_is_refused(run_cli):
    code, _, err = run_cli(SIMPLE, "--run-id=busy", "--max-steps=100")
    assert code == 0, err
    run_dir = run_cli.results / "busy"
    lock = RunLock(str(run_dir))  # as a training process holds it
    try:
        for extra in (["--resume", "--max-steps=200"], ["--force"], ["--inference", "--max-steps=10"]):
            code, _, err = run_cli(SIMPLE, "--run-id=busy", *extra)
            assert code == 1, extra
            assert "another trainer-learn process" in one_line(err)
        assert checkpoints(run_dir) == ["checkpoint-100.index"]
    finally:
        lock.release()
    # A fresh id that another process holds: refused too, and the folder stays that process's.
    lock = RunLock(str(run_cli.results / "fresh"))
    try:
        code, _, err = run_cli(SIMPLE, "--run-id=fresh", "--max-steps=10")
        assert code == 1 and "another trainer-learn process" in one_line(err)
    finally:
        lock.release()
    code, _, err = run_cli(SIMPLE, "--run-id=busy", "--resume", "--max-steps=200")
    assert code == 0, err


@pytest.mark.parametrize("absolute_paths", [False, True], ids=["as-written-now", "older-absolute-status"])
def test_resuming_a_copied_run_never_deletes_the_original(run_cli, tmp_path, absolute_paths):
    cfg = config(tmp_path, checkpoint_interval=100, keep_checkpoints=2)
    code, _, err = run_cli(cfg, "--run-id=orig", "--max-steps=300")
    assert code == 0, err
    original = run_cli.results / "orig"
    kept = checkpoints(original)
    assert kept == ["checkpoint-200.index", "checkpoint-300.index"]
    shutil.copytree(original, run_cli.results / "copy")
    status_path = run_cli.results / "copy" / "run_logs" / "training_status.json"
    status = json.loads(status_path.read_text())
    entries = status["behaviors"]["Simple"]["checkpoints"]
    assert [e["file_path"] for e in entries] == [os.path.join("Simple", "checkpoint-200"),
                                                 os.path.join("Simple", "checkpoint-300")]
    if absolute_paths:  # what earlier versions wrote: paths into the run it was copied from
        for e in entries:
            e["file_path"] = str(original / "Simple" / os.path.basename(e["file_path"]))
        status_path.write_text(json.dumps(status))
    code, _, err = run_cli(cfg, "--run-id=copy", "--resume", "--max-steps=500")
    assert code == 0, err
    assert checkpoints(original) == kept
    assert checkpoints(run_cli.results / "copy") == ["checkpoint-400.index", "checkpoint-500.index"]


def test_the_buffer_that_fills_at_max_steps_is_learned_from(run_cli, tmp_path):
    # time_horizon 1: every step is a trajectory, so the buffer holds exactly the steps taken;
    # ML-Agents updates once it holds more than buffer_size rows, while step <= max_steps:
    # at step 32 and at step 64 (the last one was skipped).
    cfg = config(tmp_path, time_horizon=1, max_steps=64, hyperparameters={
        "batch_size": 8, "buffer_size": 31, "learning_rate": 5.0e-3, "learning_rate_schedule": "constant"})
    code, _, err = run_cli(cfg, "--run-id=last", "--seed=3")
    assert code == 0, err
    timers = json.loads((run_cli.results / "last" / "run_logs" / "timers.json").read_text())
    assert len(timers["update_durations"]) == 2


def test_inference_with_nothing_to_play_is_refused(run_cli):
    code, _, err = run_cli(SIMPLE, "--run-id=ghost", "--inference", "--max-steps=10")
    assert code == 1 and "no such run to play" in one_line(err)
    assert not (run_cli.results / "ghost").exists()
    code, _, err = run_cli(SIMPLE, "--run-id=broken", "--max-steps=100")
    assert code == 0, err
    behavior_dir = run_cli.results / "broken" / "Simple"
    for name in os.listdir(behavior_dir):
        if name.startswith("checkpoint-100."):
            (behavior_dir / name).write_bytes(b"garbage")
    code, _, err = run_cli(SIMPLE, "--run-id=broken", "--inference", "--max-steps=10")
    assert code == 1 and "no checkpoint of behavior Simple restores" in one_line(err)
    assert "Graph execution error" not in err


def test_results_folder_mistakes_are_one_line(tmp_path, capsys):
    from trainers.cli.learn import main

    a_file = tmp_path / "a_file"
    a_file.write_text("")
    for results in (a_file, a_file / "below"):
        code = main([SIMPLE, "--run-id=r", "--max-steps=10", f"--results-dir={results}"])
        err = capsys.readouterr().err
        assert code == 1, err
        assert str(a_file) in one_line(err)


def test_a_behavior_the_config_does_not_name_needs_default_settings(run_cli, tmp_path):
    # ML-Agents: "The behavior name X has not been specified in the trainer configuration".
    path = tmp_path / "two.yaml"
    cfg = yaml.safe_load(open(SIMPLE))
    cfg["env_settings"]["env_args"] = {"continuous": 0, "discrete": 1, "behavior_names": ["Simple", "Other"]}
    path.write_text(yaml.safe_dump(cfg))
    code, _, err = run_cli(str(path), "--run-id=two")
    assert code == 1 and "behaviors.Other" in one_line(err) and "default_settings" in one_line(err)
    assert not (run_cli.results / "two").exists()


def test_misspelled_option_is_named(run_cli):
    code, _, err = run_cli(SIMPLE, "--max-stpes=10")
    assert code == 2
    assert "unknown option --max-stpes; did you mean --max-steps?" in err


def test_a_run_stopped_by_a_signal_exits_128_plus_the_signal(tmp_path):
    results = tmp_path / "results"
    cmd = [sys.executable, "-m", "trainers.learn", SIMPLE, "--run-id=sig", "--max-steps=10000000",
           f"--results-dir={results}"]
    for signum, code in ((signal.SIGTERM, 143), (signal.SIGINT, 130)):
        proc = subprocess.Popen(cmd + (["--resume"] if code == 130 else []), cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            deadline = time.time() + 120
            # Training has started once the first checkpoint interval's summary is printed.
            while proc.poll() is None and time.time() < deadline:
                line = proc.stdout.readline()
                if "Step:" in line:
                    break
            assert proc.poll() is None, proc.stdout.read()
            proc.send_signal(signum)
            out, _ = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == code, out
        assert "checkpoint saved" in out


@pytest.fixture
def tiny_disk(tmp_path):
    """A 2 MiB file system (tmpfs) to fill: the run's disk gets full mid-run."""
    mount_point = tmp_path / "tiny"
    mount_point.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount_point)],
                          capture_output=True, text=True)
    if done.returncode != 0:  # needs root (CI and the developers' machines run as root)
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def test_a_full_disk_is_one_line_and_the_run_resumes(tiny_disk, capsys):
    from trainers.cli.learn import main

    results = tiny_disk / "results"
    args = [SIMPLE, "--run-id=full", f"--results-dir={results}"]
    code = main(args + ["--max-steps=100"])
    assert code == 0, capsys.readouterr().err
    filler = tiny_disk / "filler"
    free = os.statvfs(tiny_disk).f_bavail * os.statvfs(tiny_disk).f_frsize
    filler.write_bytes(b"\0" * max(free - 16 * 1024, 0))  # 16 KiB left: less than a checkpoint and its exports
    capsys.readouterr()
    code = main(args + ["--resume", "--max-steps=3000"])
    err = capsys.readouterr().err
    assert code == 1, err
    assert "No space left on device" in one_line(err) or "space" in one_line(err).lower()
    filler.unlink()
    code = main(args + ["--resume", "--max-steps=3000"])
    assert code == 0, capsys.readouterr().err
    st = json.loads((results / "full" / "run_logs" / "training_status.json").read_text())
    assert st["behaviors"]["Simple"]["step"] == 3000


def test_ctrl_c_while_a_worker_hangs_saves_and_exits_130_at_once(tmp_path):
    """A worker that hangs (far below the step timeout) must not hold Ctrl-C for a minute:
    the wait ends, the run saves what it learned and exits 130, leaving no worker."""
    cfg = yaml.safe_load(open(SIMPLE))
    cfg["env_settings"] = {"env_path": "builtin:_Crash", "num_envs": 2, "seed": 10,
                           "env_args": {"continuous": 0, "discrete": 1, "behavior_names": ["Simple"],
                                        "hang_at_step": 300, "hang_seconds": 3600, "crash_seed": 11}}
    cfg["behaviors"]["Simple"]["checkpoint_interval"] = 100000
    path = tmp_path / "hang.yaml"
    path.write_text(yaml.safe_dump(cfg))
    results = tmp_path / "results"
    proc = subprocess.Popen([sys.executable, "-m", "trainers.learn", str(path), "--run-id=hang",
                             f"--results-dir={results}", "--max-steps=100000"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        # Two workers in lockstep: the summary at step 500 is printed just before worker 1's
        # step 300 (the run's step 600), where it hangs and the trainer waits for it.
        while True:
            line = proc.stdout.readline()
            if not line or "Step: 500." in line:
                break
        assert proc.poll() is None
        time.sleep(3.0)
        sent = time.time()
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
        waited = time.time() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out
    assert waited < 30, waited  # the step timeout (60 s) did not have to run out
    assert "checkpoint saved" in out
    status = json.loads((results / "hang" / "run_logs" / "training_status.json").read_text())
    assert status["behaviors"]["Simple"]["step"] > 0
