"""``threaded: true``: updates in a thread, the acting copy, learning, SIGINT mid-update."""
from __future__ import annotations

import csv
import json
import os
import signal
import threading
import time

import numpy as np
import pytest
import yaml
from trainer_test_utils import config_path, crashing_workers_config, make_spec, random_obs, small_settings

from trainers.ppo.trainer import PPOTrainer
from trainers.stats import StatsReporter
from trainers.tf import tf
from trainers.loop.threaded import BackgroundUpdater
from trainers.loop.trajectory import Trajectory


def _threaded_config(tmp_path, name: str = "Simple_discrete.yaml", **behavior) -> str:
    with open(config_path(name)) as f:
        cfg = yaml.safe_load(f)
    for section in cfg["behaviors"].values():
        section["threaded"] = True
        section.update(behavior)
    path = tmp_path / f"threaded_{name}"
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


def _rewards(results, run_id: str, behavior: str):
    with open(os.path.join(results, run_id, behavior, "stats.csv")) as f:
        rows = list(csv.DictReader(f))
    return [(int(r["step"]), float(r["mean"])) for r in rows if r["tag"] == "Environment/Cumulative Reward"], rows


def _trajectory(spec, n: int, rng: np.random.Generator) -> Trajectory:
    return Trajectory(
        agent=(0, 0), obs=random_obs(spec, n, rng), next_obs=random_obs(spec, 1, rng),
        continuous_action=np.zeros((n, 0), np.float32), discrete_action=rng.integers(0, 3, (n, 1)).astype(np.int32),
        action_mask=None, log_probs=np.full((n, 1), -1.1, np.float32), rewards=rng.normal(size=n).astype(np.float32),
        done=True, interrupted=False,
    )


def test_acting_weights_change_only_at_the_swap(tmp_path) -> None:
    from dataclasses import replace

    spec = make_spec(branches=(3,), vector=3)
    settings = replace(small_settings(buffer_size=64, batch_size=16, num_epoch=3), threaded=True)
    trainer = PPOTrainer("B", spec, settings, StatsReporter("B", []), seed=3)
    updater = BackgroundUpdater(trainer)
    trainer.policy.sync_acting_weights()
    rng = np.random.default_rng(0)
    probe = random_obs(spec, 256, rng)

    def acting_probs() -> np.ndarray:
        # The acting copy's deterministic action for many observations: a weight fingerprint.
        return trainer.policy.act(probe, deterministic=True).discrete.copy()

    before = acting_probs()
    updater.process(_trajectory(spec, 65, rng))  # more than buffer_size: ML-Agents' rule
    assert trainer.ready_to_update
    release = threading.Event()
    original = trainer.optimizer.update

    def gated_update(*args, **kwargs):
        release.wait(10)  # holds the update open while the controller side acts
        return original(*args, **kwargs)

    trainer.optimizer.update = gated_update  # type: ignore[method-assign]
    updater.start()
    assert updater.busy
    updater.process(_trajectory(spec, 8, rng))  # queued: the buffer belongs to the update
    assert trainer.buffer.num_experiences == 65
    release.set()
    deadline = time.monotonic() + 30
    while updater._thread is not None and updater._thread.is_alive():
        np.testing.assert_array_equal(acting_probs(), before)  # never a mix, never the new weights
        assert time.monotonic() < deadline
    np.testing.assert_array_equal(acting_probs(), before)  # update done, not yet swapped
    assert updater.poll() is not None and updater.version == 1
    # The update ran in its own thread's caller-thread executor, not on the inter-op pool
    # (which would take the core the acting side needs).
    from trainers.tf.session import CALLER_THREAD

    assert trainer.optimizer._update_fn.pool == CALLER_THREAD
    assert trainer.buffer.num_experiences == 8  # the queued trajectory, processed after the swap
    # The trained actor (named outputs, what export freezes) and the acting copy agree now.
    assert not np.array_equal(acting_probs(), before)
    policy = trainer.policy
    trained = policy.session.run(
        policy.deterministic_discrete, {policy.obs[0]: probe[0], policy.action_masks: np.ones((256, 3), np.float32)}
    )
    np.testing.assert_array_equal(acting_probs(), trained)
    # The acting copy is not in checkpoints: a threaded checkpoint loads unthreaded and back.
    prefix = trainer.save(str(tmp_path / "ckpt"))
    import tensorflow as tf

    names = [n for n, _ in tf.train.list_variables(prefix)]
    assert names and not any(n.startswith("acting") for n in names)
    plain = PPOTrainer("B", spec, small_settings(buffer_size=64, batch_size=16, num_epoch=3), StatsReporter("B", []), 4)
    plain.load(prefix)
    np.testing.assert_array_equal(plain.policy.act(probe, deterministic=True).discrete, trained)
    trainer.close()
    plain.close()


@pytest.mark.parametrize("continuous, branches", [(2, ()), (1, (3,))])
def test_continuous_and_hybrid_actors_act_from_the_copy(continuous, branches) -> None:
    """The acting copy of a continuous (or hybrid) actor gives the trained actor's
    deterministic actions once synced, and clipped samples."""
    from dataclasses import replace

    spec = make_spec(continuous=continuous, branches=branches, vector=3)
    trainer = PPOTrainer("B", spec, replace(small_settings(), threaded=True), StatsReporter("B", []), seed=3)
    policy = trainer.policy
    rng = np.random.default_rng(0)
    for v in policy.graph.get_collection(tf.GraphKeys.TRAINABLE_VARIABLES):
        if v.op.name.startswith("policy/"):
            v.load(rng.normal(0, 0.5, v.shape.as_list()).astype(np.float32), policy.session)
    policy.sync_acting_weights()
    obs = random_obs(spec, 32, rng)
    acted = policy.act(obs, deterministic=True)
    feed = {policy.obs[0]: obs[0]}
    if branches:
        feed[policy.action_masks] = np.ones((32, sum(branches)), np.float32)
    np.testing.assert_allclose(acted.env_continuous, policy.session.run(policy.deterministic_continuous, feed), atol=1e-6)
    sampled = policy.act(obs)
    assert np.abs(sampled.env_continuous).max() <= 1.0 and sampled.log_probs.shape == (32, continuous + len(branches))


def test_threaded_ppo_solves_simple(run_cli, tmp_path) -> None:
    code, out, err = run_cli(_threaded_config(tmp_path), "--run-id=threaded")
    assert code == 0, err
    rewards, rows = _rewards(run_cli.results, "threaded", "Simple")
    assert rewards[-1][1] > 0.9, rewards
    lagged = [float(r["mean"]) for r in rows if r["tag"] == "Policy/Lagged Experience Fraction"]
    assert lagged and all(0.0 <= x <= 1.0 for x in lagged)
    timers = json.loads((run_cli.results / "threaded" / "run_logs" / "timers.json").read_text())
    assert len(timers["update_durations"]) >= 30 and timers["swap"] > 0


def test_threaded_runs_step_several_envs_out_of_lockstep(run_cli, tmp_path, monkeypatch) -> None:
    """Threaded with 2 env workers: every env step after the reset goes through
    step_some/wait_some (each worker again as soon as it has answered) and still learns.
    (Unthreaded, they stay in lockstep: see the next test.)"""
    from envs.managers.subprocess import SubprocessEnvManager

    calls = {"step": 0, "wait_some": 0, "wait_all": 0}

    def counted(name):
        original = getattr(SubprocessEnvManager, name)

        def wrapper(self, *args):
            calls[name] += 1
            return original(self, *args)

        monkeypatch.setattr(SubprocessEnvManager, name, wrapper)

    for name in calls:
        counted(name)
    code, out, err = run_cli(_threaded_config(tmp_path), "--run-id=two_envs", "--num-envs=2")
    assert code == 0, err
    rewards, _ = _rewards(run_cli.results, "two_envs", "Simple")
    assert rewards[-1][1] > 0.9, rewards
    assert calls["step"] == calls["wait_all"] == 0 and calls["wait_some"] >= 3000 // 2, calls


def test_the_bookkeeping_runs_while_env_workers_step(run_cli, monkeypatch) -> None:
    """Unthreaded, with worker processes (2 envs), each env step is in lockstep:
    step_async, then the bookkeeping of the step acted on, then wait_all (never wait_some);
    with the env in this process (1 env) there is nothing to overlap: the bookkeeping,
    then step."""
    from envs.managers.in_process import InProcessEnvManager
    from envs.managers.subprocess import SubprocessEnvManager
    from trainers.loop.controller import TrainerController

    events = []

    def logged(cls, name):
        original = getattr(cls, name)

        def wrapper(self, *args):
            events.append(name)
            return original(self, *args)

        monkeypatch.setattr(cls, name, wrapper)

    for cls, name in [(SubprocessEnvManager, "step_async"), (SubprocessEnvManager, "wait_all"),
                      (SubprocessEnvManager, "wait_some"), (InProcessEnvManager, "step"),
                      (TrainerController, "_record")]:
        logged(cls, name)
    code, out, err = run_cli(config_path("Simple_discrete.yaml"), "--run-id=overlap", "--num-envs=2",
                             "--max-steps=100")
    assert code == 0, err
    # ... and the outcome of the last actions is recorded before the run ends.
    assert events == ["step_async", "_record", "wait_all"] * 50 + ["_record"], events[:9]
    events.clear()
    code, out, err = run_cli(config_path("Simple_discrete.yaml"), "--run-id=in_process", "--max-steps=50")
    assert code == 0, err
    assert events == ["_record", "step"] * 50 + ["_record"], events[:9]


def test_out_of_lockstep_a_dying_worker_saves_first_and_leaves_no_orphans(run_cli, tmp_path) -> None:
    import multiprocessing

    path = crashing_workers_config(_threaded_config(tmp_path), tmp_path / "crash.yaml")
    code, _, err = run_cli(path, "--run-id=crash")
    assert code == 1
    line = err.strip().splitlines()[-1]
    assert "env 'builtin:_Crash' worker 1 died (exit code 3)" in line, err
    with open(run_cli.results / "crash" / "run_logs" / "training_status.json") as f:
        status = json.load(f)["behaviors"]["Simple"]
    # Worker 1's 299 steps and worker 0's (out of lockstep: not necessarily as many).
    assert status["step"] >= 299 + 100 and status["final_checkpoint"] is not None
    ckpt = os.path.basename(status["final_checkpoint"]["file_path"])
    assert (run_cli.results / "crash" / "Simple" / f"{ckpt}.index").exists()
    assert multiprocessing.active_children() == []


def test_threaded_recurrent_ppo_solves_memory(run_cli, tmp_path) -> None:
    """An LSTM actor (and critic memory) acting from the threaded copy: builtin:Memory
    shows the goal only in the first two steps, so > 0.9 needs the memories carried per
    agent across the weight swaps."""
    code, out, err = run_cli(_threaded_config(tmp_path, "Memory.yaml"), "--run-id=memory_threaded")
    assert code == 0, err
    rewards, rows = _rewards(run_cli.results, "memory_threaded", "Memory")
    assert rewards[-1][1] > 0.9, rewards
    assert any(r["tag"] == "Policy/Lagged Experience Fraction" for r in rows)


def test_sigint_during_a_threaded_update_saves_after_it_and_resumes(run_cli, tmp_path, monkeypatch) -> None:
    events = []
    original_update, original_save = PPOTrainer.update, PPOTrainer.save

    def slow_update(self):
        events.append("update start")
        if events.count("update start") == 3:  # SIGINT arrives while this update runs
            threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
            time.sleep(1.0)
        result = original_update(self)
        events.append("update end")
        return result

    def save(self, directory):
        events.append("save")
        return original_save(self, directory)

    monkeypatch.setattr(PPOTrainer, "update", slow_update)
    monkeypatch.setattr(PPOTrainer, "save", save)
    path = _threaded_config(tmp_path, checkpoint_interval=100000)
    code, out, err = run_cli(path, "--run-id=sigint", "--max-steps=3000")
    assert code == 130, err  # saved, and stopped by SIGINT: 128 + 2
    assert "Interrupted by signal 2" in out
    # The run waited for the update in flight, then saved once: never mid-update.
    assert events[-3:] == ["update start", "update end", "save"], events
    assert events.count("update start") == 3
    with open(run_cli.results / "sigint" / "run_logs" / "training_status.json") as f:
        status = json.load(f)["behaviors"]["Simple"]
    step = status["step"]
    assert 0 < step < 3000 and status["final_checkpoint"]["steps"] == step
    assert (run_cli.results / "sigint" / "Simple" / f"checkpoint-{step}.index").exists()

    monkeypatch.setattr(PPOTrainer, "update", original_update)
    code, out, err = run_cli(path, "--run-id=sigint", "--max-steps=3000", "--resume")
    assert code == 0, err
    rewards, _ = _rewards(run_cli.results, "sigint", "Simple")
    assert rewards[-1][0] == 3000 and rewards[-1][1] > 0.9, rewards
    assert f"Step: {(step // 500 + 1) * 500}." in out  # continued from the checkpoint


@pytest.mark.slow
def test_threaded_cartpole_reaches_475(run_cli, tmp_path) -> None:
    code, out, err = run_cli(_threaded_config(tmp_path, "CartPole.yaml"), "--run-id=cartpole_threaded")
    assert code == 0, err
    rewards, _ = _rewards(run_cli.results, "cartpole_threaded", "CartPole-v1")
    assert max(r for _, r in rewards[-3:]) >= 475, rewards
