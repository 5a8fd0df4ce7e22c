"""End to end through ``trainer-learn``: files a run writes, resume, force, initialize-from,
inference, and every bad input giving one clear line and a non-zero exit."""
from __future__ import annotations

import json
import os
import textwrap

import pytest
import yaml
from trainer_test_utils import config_path, crashing_workers_config

from trainers.config import load_settings

SIMPLE = config_path("Simple_discrete.yaml")


def status(results, run_id):
    with open(os.path.join(results, run_id, "run_logs", "training_status.json")) as f:
        return json.load(f)["behaviors"]["Simple"]


def last_line(err: str) -> str:
    lines = [l for l in err.strip().splitlines() if l.startswith("trainer-learn")]
    assert len(lines) == 1, err
    return lines[0]


def test_run_writes_everything_and_resumes(run_cli):
    code, out, err = run_cli(SIMPLE, "--run-id=e2e", "--max-steps=600")
    assert code == 0, err
    run_dir = run_cli.results / "e2e"
    files = set(os.listdir(run_dir / "Simple"))
    assert {"checkpoint-600.index", "stats.csv"} <= files
    assert any(f.startswith("events.out.tfevents") for f in files)
    # The resolved config loads back unchanged.
    assert load_settings(str(run_dir / "configuration.yaml")) == load_settings(
        str(run_dir / "configuration.yaml")
    )
    st = status(run_cli.results, "e2e")
    assert st["step"] == 600 and st["final_checkpoint"]["steps"] == 600
    timers = json.loads((run_dir / "run_logs" / "timers.json").read_text())
    assert timers["env_steps"] >= 600
    import csv

    with open(run_dir / "Simple" / "stats.csv") as f:
        tags = {row["tag"] for row in csv.DictReader(f)}
    assert {
        "Environment/Cumulative Reward", "Environment/Episode Length", "Policy/Entropy",
        "Policy/Learning Rate", "Policy/Extrinsic Reward", "Policy/Extrinsic Value Estimate",
        "Losses/Value Loss", "Losses/Policy Loss", "Is Training",
    } <= tags

    # Same run id again: refused, nothing lost.
    code, _, err = run_cli(SIMPLE, "--run-id=e2e", "--max-steps=600")
    assert code == 1 and "--resume" in last_line(err)
    assert (run_dir / "Simple" / "checkpoint-600.index").exists()

    code, out, err = run_cli(SIMPLE, "--run-id=e2e", "--max-steps=1200", "--resume")
    assert code == 0, err
    episodes_before = st["episodes"]
    st = status(run_cli.results, "e2e")
    assert st["step"] == 1200
    assert st["episodes"] > episodes_before > 0  # counted across the resume
    assert [c["steps"] for c in st["checkpoints"]] == [600, 1000, 1200]
    assert "Step: 1000" in out and "Step: 500." not in out  # continued, not restarted
    events = [f for f in os.listdir(run_dir / "Simple") if f.startswith("events.out")]
    assert len(events) == 2  # the curves continue in a second event file

    # Inference from the run: no training, no new checkpoint.
    code, out, err = run_cli(SIMPLE, "--run-id=e2e", "--max-steps=200", "--inference")
    assert code == 0, err
    assert "Not Training." in out
    assert status(run_cli.results, "e2e")["step"] == 1200

    # Initialize a new run from this one's weights: steps restart at 0.
    code, out, err = run_cli(SIMPLE, "--run-id=e2e_init", "--max-steps=300", "--initialize-from=e2e")
    assert code == 0, err
    assert status(run_cli.results, "e2e_init")["step"] == 300

    # --force overwrites.
    code, _, err = run_cli(SIMPLE, "--run-id=e2e_init", "--max-steps=100", "--force")
    assert code == 0, err
    assert status(run_cli.results, "e2e_init")["step"] == 100


def test_keep_checkpoints_prunes_old_files(run_cli, tmp_path):
    cfg = yaml.safe_load(open(SIMPLE))
    cfg["behaviors"]["Simple"].update(checkpoint_interval=100, keep_checkpoints=2, max_steps=500)
    path = tmp_path / "keep.yaml"
    path.write_text(yaml.safe_dump(cfg))
    code, _, err = run_cli(str(path), "--run-id=keep")
    assert code == 0, err
    index_files = sorted(f for f in os.listdir(run_cli.results / "keep" / "Simple") if f.endswith(".index"))
    assert index_files == ["checkpoint-400.index", "checkpoint-500.index"]


def write(tmp_path, text: str) -> str:
    path = tmp_path / "bad.yaml"
    path.write_text(textwrap.dedent(text))
    return str(path)


GOOD_HEAD = """\
behaviors:
  Simple:
    trainer_type: ppo
"""
ENV = """\
env_settings:
  env_path: builtin:Simple
"""


@pytest.mark.parametrize(
    "text,expected",
    [
        ("behaviors: [unclosed\n", "line"),
        (GOOD_HEAD + "    hyperparameters:\n      lr: 0.1\n" + ENV, "did you mean learning_rate"),
        (GOOD_HEAD + "    hyperparameters:\n      batch_size: abc\n" + ENV, "batch_size"),
        (GOOD_HEAD + "    hyperparameters:\n      buffer_size: -5\n" + ENV, "buffer_size"),
        (GOOD_HEAD + "    hyperparameters:\n      batch_size: 0\n" + ENV, "batch_size"),
        (GOOD_HEAD + "    hyperparameters:\n      batch_size: 128\n      buffer_size: 64\n" + ENV, "buffer_size"),
        ("behaviors:\n  Simple:\n    trainer_type: ppp\n" + ENV, "trainer_type"),
        (GOOD_HEAD + "env_settings:\n  env_path: builtin:Nope\n", "Nope"),
        (GOOD_HEAD + "env_settings:\n  env_path: gym:NoSuchEnv-v0\n", "NoSuchEnv-v0"),
        ("behaviors:\n  Missing:\n    trainer_type: ppo\n" + ENV, "Missing"),
    ],
    ids=["yaml-syntax", "unknown-key", "wrong-type", "negative-size", "zero-size", "batch-gt-buffer",
         "unknown-trainer", "unknown-builtin", "unknown-gym", "behavior-not-in-env"],
)
def test_bad_config_is_one_clear_line(run_cli, tmp_path, text, expected):
    code, _, err = run_cli(write(tmp_path, text), "--run-id=bad")
    assert code == 1
    assert expected in last_line(err)
    assert "Traceback" not in err


def test_missing_config_and_bad_options(run_cli, tmp_path):
    code, _, err = run_cli(str(tmp_path / "nope.yaml"))
    assert code == 1 and "nope.yaml" in last_line(err)
    code, _, err = run_cli(SIMPLE, "--num-envs=two")
    assert code == 1 and "--num-envs" in last_line(err)
    code, _, err = run_cli(SIMPLE, "--run-id=never", "--resume")
    assert code == 1 and "no such run" in last_line(err)
    code, _, err = run_cli(SIMPLE, "--run-id=dev", "--devices=/gpu:7")
    assert code == 1 and "/gpu:7" in last_line(err)


def test_corrupt_checkpoint_is_one_clear_line(run_cli):
    code, _, err = run_cli(SIMPLE, "--run-id=corrupt", "--max-steps=200")
    assert code == 0, err
    data = run_cli.results / "corrupt" / "Simple" / "checkpoint-200.data-00000-of-00001"
    data.write_bytes(b"garbage")
    code, _, err = run_cli(SIMPLE, "--run-id=corrupt", "--max-steps=400", "--resume")
    assert code == 1 and "checkpoint" in last_line(err)
    assert "Traceback" not in err
    index = run_cli.results / "corrupt" / "Simple" / "checkpoint-200.index"
    assert index.exists()  # nothing already saved was deleted


def inference_reward(out: str) -> float:
    lines = [l for l in out.splitlines() if "Mean Reward" in l and "Not Training." in l]
    assert lines, out
    return float(lines[-1].split("Mean Reward: ")[1].split(". ")[0])


def test_exported_model_plays_like_the_trained_policy(run_cli):
    code, out, err = run_cli(SIMPLE, "--run-id=export")
    assert code == 0, err
    behavior_dir = run_cli.results / "export" / "Simple"
    files = set(os.listdir(behavior_dir))
    assert {"Simple.onnx", "Simple.pb", "Simple-3000.onnx", "Simple-3000.pb", "Simple-1000.onnx"} <= files
    code, out_ckpt, err = run_cli(SIMPLE, "--run-id=export", "--inference", "--max-steps=500")
    assert code == 0, err
    code, out_onnx, err = run_cli(
        SIMPLE, "--run-id=export", "--inference", "--max-steps=500", f"--model={behavior_dir / 'Simple.onnx'}"
    )
    assert code == 0, err
    reward_ckpt, reward_onnx = inference_reward(out_ckpt), inference_reward(out_onnx)
    assert reward_ckpt > 0.9
    assert reward_onnx == pytest.approx(reward_ckpt, abs=1e-3)
    code, _, err = run_cli(SIMPLE, "--run-id=export", "--model=x.onnx")
    assert code == 1 and "--inference" in last_line(err)
    code, _, err = run_cli(SIMPLE, "--run-id=export", "--inference", f"--model={behavior_dir / 'nope.onnx'}")
    assert code == 1 and "nope.onnx" in last_line(err)


def test_record_demo_from_a_trained_run(run_cli, tmp_path):
    from envs.demo import load_demonstration
    from trainers.cli.demo import main as demo_main

    code, _, err = run_cli(SIMPLE, "--run-id=rec")
    assert code == 0, err
    out = tmp_path / "rec.demo"
    code = demo_main(["record", SIMPLE, f"--out={out}", "--steps=60", "--run-id=rec",
                      f"--results-dir={run_cli.results}"])
    assert code == 0
    demo = load_demonstration(str(out))
    assert demo.info.number_steps == 60 and demo.episode_count >= 10
    assert demo.mean_return > 0.9  # the trained policy plays (nearly) optimally
    code = demo_main(["record", SIMPLE, f"--out={out}", "--run-id=nope", f"--results-dir={run_cli.results}"])
    assert code == 1


def test_parallel_env_workers_train_and_a_dying_worker_saves_first(run_cli, tmp_path):
    code, out, err = run_cli(SIMPLE, "--run-id=par", "--num-envs=2", "--max-steps=400")
    assert code == 0, err
    assert status(run_cli.results, "par")["step"] >= 400

    code, _, err = run_cli(crashing_workers_config(SIMPLE, tmp_path / "crash.yaml"), "--run-id=crash")
    assert code == 1
    line = last_line(err)
    assert "worker 1" in line and "builtin:_Crash" in line
    st = status(run_cli.results, "crash")
    assert st["step"] >= 500 and st["final_checkpoint"] is not None  # saved before exiting
    ckpt = os.path.basename(st["final_checkpoint"]["file_path"])
    assert (run_cli.results / "crash" / "Simple" / f"{ckpt}.index").exists()


def test_console_script_saves_on_sigterm(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    results = tmp_path / "results"
    proc = subprocess.Popen(
        [sys.executable, "-m", "trainers.learn", SIMPLE, "--run-id=sig", "--max-steps=10000000",
         f"--results-dir={results}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        deadline = time.time() + 120
        for line in proc.stdout:
            if "Step: 1000." in line or time.time() > deadline:
                break
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 143, err  # saved, and stopped by SIGTERM: 128 + 15
    assert "Interrupted by signal" in out
    st = status(results, "sig")
    assert st["step"] >= 1000 and st["final_checkpoint"]["steps"] == st["step"]
    assert (results / "sig" / "Simple" / "Simple.onnx").exists()


def test_namespaced_gymnasium_id_gets_one_folder(run_cli, tmp_path):
    """Gymnasium ids like ``ALE/Pong-v5`` name behaviors with a ``/``: their files go to
    ``<run>/ALE_Pong-v5/`` (checkpoints, stats, exported models), and --model finds them."""
    import gymnasium

    if "testns/CartPole-v9" not in gymnasium.registry:
        gymnasium.register(id="testns/CartPole-v9", entry_point="gymnasium.envs.classic_control:CartPoleEnv",
                           max_episode_steps=50)
    cfg = {"default_settings": {"hyperparameters": {"batch_size": 32, "buffer_size": 128},
                                "network_settings": {"hidden_units": 16, "num_layers": 1},
                                "max_steps": 300, "summary_freq": 100, "checkpoint_interval": 300},
           "env_settings": {"env_path": "gym:testns/CartPole-v9", "seed": 1}}
    path = tmp_path / "ns.yaml"
    path.write_text(yaml.safe_dump(cfg))
    code, out, err = run_cli(str(path), "--run-id=ns")
    assert code == 0, err
    folder = run_cli.results / "ns" / "testns_CartPole-v9"
    files = set(os.listdir(folder))
    assert {"checkpoint-300.index", "stats.csv", "testns_CartPole-v9.onnx", "testns_CartPole-v9-300.pb"} <= files
    assert "[INFO] testns/CartPole-v9. Step: 100." in out
    code, out, err = run_cli(str(path), "--run-id=ns", "--inference", "--max-steps=100", f"--model={folder}")
    assert code == 0, err
    # trainer-export on a checkpoint prefix finds the behavior the folder belongs to.
    from trainers.cli.export import main as export_main

    assert export_main([str(folder / "checkpoint-300"), f"--out={tmp_path / 'exported'}"]) == 0
    assert os.path.isfile(tmp_path / "exported" / "testns_CartPole-v9.onnx")
