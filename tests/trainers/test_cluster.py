"""Cluster runs on a loopback cluster: this test process is the chief, workers are
``trainer-learn --worker`` processes on free 127.0.0.1 ports (killed at the end, and dying
with this process). The same update as local towers, each tower on its worker, learning,
a worker killed mid-run, a missing worker at start-up, bad cluster files."""
from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest
import yaml
from cluster_utils import loopback_workers, write_cluster_file
from test_towers import SPEC, minibatch  # the same spec and minibatches as local towers
from trainer_test_utils import config_path, small_settings

from trainers.exceptions import ConfigError
from trainers.cli.learn import main
from trainers.ppo.trainer import PPOTrainer
from trainers.config import ClusterSettings, load_cluster_file, load_settings, write_resolved_config
from trainers.stats import StatsReporter
from trainers.tf import tf


def weights(trainer):
    variables = trainer.policy.graph.get_collection(tf.GraphKeys.GLOBAL_VARIABLES)
    return dict(zip([v.op.name for v in variables], trainer.policy.session.run(variables)))


# ------------------------------------------------------------------ settings (no servers)


def test_cluster_file_and_section(tmp_path):
    path = tmp_path / "cluster.yaml"
    path.write_text("chief: 10.0.0.1:2222\nworkers: [10.0.0.1:2223, 10.0.0.2:2222]\n"
                    "worker_devices: [[/gpu:0, GPU:1], [device:GPU:0]]\n")
    settings = load_cluster_file(str(path))
    assert settings.workers == ("10.0.0.1:2223", "10.0.0.2:2222")
    assert settings.worker_devices == (("GPU:0", "GPU:1"), ("GPU:0",))
    config = tmp_path / "config.yaml"
    config.write_text("behaviors: {}\ncluster_settings: {chief: 'h:1', workers: ['h:2'], startup_timeout: 5}\n")
    assert load_cluster_file(str(config)) == ClusterSettings("h:1", ("h:2",), None, 5.0)
    # The section is part of the run's options and of the resolved configuration.yaml.
    config.write_text(
        "behaviors: {}\ncluster_settings: {chief: 'h:1', workers: ['h:2'], worker_devices: [[gpu:1]]}\n"
    )
    options = load_settings(str(config))
    assert options.cluster_settings.worker_devices == (("GPU:1",),)
    write_resolved_config(options, str(tmp_path / "resolved.yaml"))
    assert load_settings(str(tmp_path / "resolved.yaml")) == options


@pytest.mark.parametrize(
    "text, expected",
    [
        ("workers: [h:2]\n", "chief: workers are given but no chief"),
        ("chief: h:1\nworkers: []\n", "workers: expected at least one worker"),
        ("chief: h\nworkers: [h:2]\n", "chief: expected host:port"),
        ("chief: h:1\nworkers: [h:1]\n", "workers: every server needs its own host:port"),
        ("chief: h:1\nworkers: [h:2]\nworker_devices: [[TPU:0]]\n", "worker 0: expected device names"),
        ("chief: h:1\nworkers: [h:2, h:3]\nworker_devices: [[GPU:0]]\n", "one device list per worker (2 lists)"),
        ("chief: h:1\nworker: [h:2]\n", "worker: unknown key"),
    ],
)
def test_bad_cluster_file_is_one_line(tmp_path, text, expected):
    path = tmp_path / "cluster.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_cluster_file(str(path))
    message = str(info.value)
    assert expected in message and str(path) in message and "\n" not in message


def test_worker_cli_errors(tmp_path, capsys):
    path = tmp_path / "cluster.yaml"
    path.write_text("chief: 127.0.0.1:1\nworkers: ['127.0.0.1:2']\n")
    assert main(["--worker", f"--cluster={path}", "--task-index=3"]) == 1
    assert "--task-index=3: the cluster has workers 0..0" in capsys.readouterr().err
    assert main(["--worker", f"--cluster={path}", "--task-index=x"]) == 1
    assert "--task-index: expected a worker index" in capsys.readouterr().err


def test_cluster_with_local_devices_is_an_error(tmp_path, capsys):
    path = tmp_path / "cluster.yaml"
    write_cluster_file(str(path), 1)
    code = main([config_path("Simple_discrete.yaml"), f"--cluster={path}", "--devices=/cpu:0", f"--results-dir={tmp_path}"])
    assert code == 1
    assert "cannot be combined with a cluster" in capsys.readouterr().err


def test_missing_worker_times_out_naming_it_and_a_worker_stops_on_sigterm(tmp_path, capsys):
    path = tmp_path / "cluster.yaml"
    doc = write_cluster_file(str(path), 2)
    doc["startup_timeout"] = 1.5
    path.write_text(yaml.safe_dump(doc))
    with loopback_workers(str(path), 1) as (worker,):  # worker 1 is never started
        start = time.monotonic()
        code = main([config_path("Simple_discrete.yaml"), f"--cluster={path}", f"--results-dir={tmp_path}"])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 1
        assert time.monotonic() - start < 30
        assert err == [
            f"trainer-learn: error: cluster: no answer within 1.5 s from worker 1 ({doc['workers'][1]}); "
            "start each with: trainer-learn --worker --cluster=<file> --task-index=<i>"
        ]
        assert not os.path.exists(tmp_path / "simple_discrete")  # nothing was started or written
        # A worker serves until it is interrupted (or its chief ends it).
        assert worker.process.poll() is None
        worker.process.send_signal(signal.SIGTERM)
        assert worker.process.wait(timeout=30) == 0, worker.lines[-20:]
        assert worker.lines[-1] == "[INFO] worker 0: interrupted"


# ------------------------------------------------------------ a running loopback cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """2 workers, one CPU device each; the last test of the module lets the chief end them."""
    path = str(tmp_path_factory.mktemp("cluster") / "cluster.yaml")
    write_cluster_file(path, 2)
    with loopback_workers(path, 2) as workers:
        yield path, workers


def test_same_update_as_local_towers_and_each_tower_on_its_worker(cluster):
    from trainers.tf.cluster import Chief

    path, _ = cluster
    chief = Chief(load_cluster_file(path))
    assert chief.tower_devices == [
        "/job:worker/replica:0/task:0/device:CPU:0",
        "/job:worker/replica:0/task:1/device:CPU:0",
    ]
    local = PPOTrainer("B", SPEC, small_settings(), StatsReporter("B", []), 0, ("/cpu:0", "/cpu:1"))
    remote = PPOTrainer("B", SPEC, small_settings(), StatsReporter("B", []), 0, cluster=chief)
    try:
        # Acting never goes through the cluster: a local session (a run through the
        # distributed master costs milliseconds); only updates target the chief's server.
        assert remote.policy.session.sess_str == b"" and remote.policy.update_session.sess_str == chief.target.encode()
        before = weights(local)
        for name, value in weights(remote).items():
            np.testing.assert_array_equal(value, before[name], err_msg=name)
        for step, n in enumerate((37, 64)):  # an uneven split, then an even one
            mb = minibatch(n, seed=step)
            stats_local = local.optimizer.update(mb, 10, {})
            remote.behavior_graph.begin_update()
            stats_remote = remote.optimizer.update(mb, 10, {})
            remote.behavior_graph.end_update()
            for key, value in stats_local.items():
                assert stats_remote[key] == pytest.approx(value, abs=1e-6), key
        after_local, after_remote = weights(local), weights(remote)
        moved = 0
        for name, value in after_local.items():
            np.testing.assert_allclose(after_remote[name], value, rtol=0, atol=1e-6, err_msg=name)
            moved += not np.array_equal(value, before[name])
        assert moved > 10  # the update changed the weights (and Adam's slots)

        # RunMetadata of one update run: each tower's ops ran on its own worker, the
        # variables and the apply on the chief.
        opt = remote.optimizer
        feed = {opt.placeholders[k]: v for k, v in minibatch(32).items()}
        feed[opt.current_step] = 10
        metadata = tf.RunMetadata()
        remote.behavior_graph.begin_update()
        remote.policy.update_session.run(
            opt._update_op, feed, options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE), run_metadata=metadata
        )
        nodes = {d.device: [n.node_name for n in d.node_stats] for d in metadata.step_stats.dev_stats}
        for task in (0, 1):
            ran = nodes.get(f"/job:worker/replica:0/task:{task}/device:CPU:0", [])
            assert any(n.startswith(f"tower_{task}/") for n in ran), sorted(nodes)
            assert not any(n.startswith(f"tower_{1 - task}/") for n in ran)
            assert not any(n.endswith("ReadVariableOp") for n in ran)  # no variable lives there
        on_chief = nodes["/job:localhost/replica:0/task:0/device:CPU:0"]
        assert any("apply_ppo" in n for n in on_chief)
        # Of the towers, only the reads of the variables run on the chief (their values are sent).
        assert any(n.startswith("tower_average/") for n in on_chief)
        tower_ops = [n for n in on_chief if n.startswith(("tower_0/", "tower_1/"))]
        assert tower_ops and all(n.endswith("ReadVariableOp") for n in tower_ops), tower_ops
    finally:
        local.close()
        remote.close()


def test_cluster_run_learns_simple_and_ends_the_workers(cluster, run_cli):
    path, workers = cluster
    code, out, err = run_cli(config_path("Simple_discrete.yaml"), f"--cluster={path}", "--run-id=cl")
    assert code == 0, err
    assert "2 towers on 2 workers" in out
    from test_learning import reward_rows

    rows = reward_rows(run_cli.results, "cl")
    assert rows[-1][1] > 0.9, rows
    with open(os.path.join(run_cli.results, "cl", "configuration.yaml")) as f:
        assert tuple(yaml.safe_load(f)["cluster_settings"]["workers"]) == load_cluster_file(path).workers
    for w in workers:  # the chief ended them: they stop by themselves
        assert w.process.wait(timeout=30) == 0
        assert any("ended by the chief" in line for line in w.lines)


def test_worker_killed_mid_run_saves_and_resumes_without_cluster(tmp_path, run_cli):
    path = str(tmp_path / "cluster.yaml")
    doc = write_cluster_file(path, 2)
    with loopback_workers(path, 2) as workers:
        victim = workers[1].process

        def kill_after_first_updates() -> None:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and not os.path.isdir(run_cli.results / "kill" / "Simple"):
                time.sleep(0.05)
            time.sleep(1.0)  # some updates ran through the cluster
            victim.send_signal(signal.SIGKILL)

        killer = threading.Thread(target=kill_after_first_updates, daemon=True)
        killer.start()
        code, out, err = run_cli(
            config_path("Simple_discrete.yaml"), f"--cluster={path}", "--run-id=kill", "--max-steps=200000",
            "--seed=3",
        )
        killer.join(timeout=130)
        lines = err.strip().splitlines()
        assert code == 1, err
        assert lines == [
            f"trainer-learn: error: cluster worker 1 ({doc['workers'][1]}) stopped answering during an update; "
            f"checkpoint saved in {run_cli.results / 'kill'} (continue with --resume)"
        ], lines
        # Worker 0 was ended by the chief and stopped by itself; worker 1 is gone: no orphans.
        assert workers[0].process.wait(timeout=30) == 0
        assert victim.wait(timeout=30) == -signal.SIGKILL
    with open(run_cli.results / "kill" / "run_logs" / "training_status.json") as f:
        status = yaml.safe_load(f)
    saved = status["behaviors"]["Simple"]["checkpoints"][-1]["steps"]
    assert saved > 0
    # --resume without a cluster: local towers continue from the checkpoint, in a new
    # process as a user would run it (the failed chief exited with status 1; this test
    # process still holds its server and the session registered on the dead worker).
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "trainers.learn", config_path("Simple_discrete.yaml"), "--run-id=kill", "--resume",
         f"--max-steps={saved + 300}", f"--results-dir={run_cli.results}"],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
