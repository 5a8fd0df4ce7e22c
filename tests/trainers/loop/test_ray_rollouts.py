"""Ray rollout workers (`trainers.loop.ray_rollouts`, ``env_settings.ray``).

One two-node Ray cluster on this machine (`ray.cluster_utils.Cluster`, one CPU per node)
serves the module; the runs go through ``trainer-learn`` in this process, which joins it
(Ray already initialised: the manager neither starts nor shuts it down).
"""
from __future__ import annotations

import os
import signal
import time
from typing import Any, Dict, List

import numpy as np
import pytest

ray = pytest.importorskip("ray")

from trainers.loop import ray_rollouts  # noqa: E402
from trainers.loop.ray_rollouts import RayRolloutManager  # noqa: E402

HYBRID = """
behaviors:
  Simple:
    trainer_type: ppo
    hyperparameters: {{batch_size: 16, buffer_size: 64, learning_rate: 5.0e-3, learning_rate_schedule: constant}}
    network_settings: {{hidden_units: 16, num_layers: 1, normalize: true{memory}}}
    max_steps: {max_steps}
    time_horizon: 16
    summary_freq: 100
    checkpoint_interval: 1000
env_settings:
  env_path: builtin:Simple
  env_args: {{continuous: 1, discrete: 1}}
  seed: 3
{ray}
"""


@pytest.fixture(scope="module")
def cluster():
    """Two Ray nodes of one CPU each on loopback, for the whole module."""
    from ray.cluster_utils import Cluster

    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    c.add_node(num_cpus=1)
    ray.init(address=c.address, logging_level="WARNING")
    yield c
    ray.shutdown()
    c.shutdown()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by its parent) is gone for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _wait_gone(pids: List[int], seconds: float = 15.0) -> List[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        left = [p for p in pids if _alive(p)]
        if not left:
            return []
        time.sleep(0.2)
    return [p for p in pids if _alive(p)]


@pytest.fixture
def seen_pids(monkeypatch):
    """Every Ray worker process a run started (restarts included)."""
    pids: List[int] = []
    original_attach, original_wait = RayRolloutManager.attach, RayRolloutManager.wait_all

    def attach(self, *args, **kwargs):
        pids.extend(p for p in self.pids if p not in pids)
        return original_attach(self, *args, **kwargs)

    def wait_all(self):
        steps = original_wait(self)
        pids.extend(p for p in self.pids if p not in pids)
        return steps

    monkeypatch.setattr(RayRolloutManager, "attach", attach)
    monkeypatch.setattr(RayRolloutManager, "wait_all", wait_all)
    return pids


def _record_trajectories(monkeypatch) -> List[Dict[str, Any]]:
    """Every trajectory PPO processes, as plain arrays."""
    from trainers.ppo.trainer import PPOTrainer

    seen: List[Dict[str, Any]] = []
    original = PPOTrainer.process_trajectory

    def process(self, traj):
        seen.append({
            "agent": traj.agent, "obs": [o.copy() for o in traj.obs], "cont": traj.continuous_action.copy(),
            "disc": traj.discrete_action.copy(), "logp": traj.log_probs.copy(), "rewards": traj.rewards.copy(),
            "done": traj.done, "memory": None if traj.memory is None else traj.memory.copy(),
        })
        return original(self, traj)

    monkeypatch.setattr(PPOTrainer, "process_trajectory", process)
    return seen


@pytest.mark.parametrize(
    "memory",
    ["", pytest.param(", memory: {memory_size: 8, sequence_length: 4}", marks=pytest.mark.slow)],
    ids=["ff", "lstm"],
)
def test_one_worker_gives_the_local_loops_trajectories(cluster, run_cli, tmp_path, monkeypatch, memory):
    """Seed 3, builtin:Simple with continuous + discrete actions and a normalizer, 320
    steps (5 PPO updates): every trajectory (observations, actions, log-probabilities,
    rewards, memories) and the final weights are those of the local loop, acting as the
    workers do before each step's update (`TrainerController.act_after_update` False)."""
    from trainers.loop.controller import TrainerController

    runs = {}
    for mode, ray_section in (("local", ""), ("ray", "  ray: {num_workers: 1}")):
        config = tmp_path / f"{mode}.yaml"
        config.write_text(HYBRID.format(memory=memory, max_steps=320, ray=ray_section))
        seen = _record_trajectories(monkeypatch)
        monkeypatch.setattr(TrainerController, "act_after_update", False)
        code, out, err = run_cli(str(config), f"--run-id={mode}")
        assert code == 0, err
        runs[mode] = seen
        monkeypatch.undo()
    local, remote = runs["local"], runs["ray"]
    assert len(local) == len(remote) > 10
    for a, b in zip(local, remote):
        assert a["agent"] == b["agent"] and a["done"] == b["done"]
        for key in ("cont", "disc", "logp", "rewards"):
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)
        for x, y in zip(a["obs"], b["obs"]):
            np.testing.assert_array_equal(x, y)
        if memory:
            np.testing.assert_array_equal(a["memory"], b["memory"])
    import tensorflow as tf

    for name, _ in tf.train.list_variables(str(run_cli.results / "local" / "Simple" / "checkpoint-320")):
        if name.startswith("policy/"):
            np.testing.assert_array_equal(
                tf.train.load_variable(str(run_cli.results / "local" / "Simple" / "checkpoint-320"), name),
                tf.train.load_variable(str(run_cli.results / "ray" / "Simple" / "checkpoint-320"), name),
            )


def _mean_reward(results, run_id: str) -> float:
    import csv

    with open(results / run_id / "Simple" / "stats.csv") as f:
        rows = [r for r in csv.DictReader(f) if r["tag"] == "Environment/Cumulative Reward"]
    return float(rows[-1]["mean"])


@pytest.mark.slow
def test_ppo_learns_simple_with_two_workers_on_two_nodes(cluster, run_cli, monkeypatch, seen_pids):
    """config/ppo/Simple_discrete.yaml (seed 1) with 2 workers, one per node: the mean
    return of the last summary > 0.9; no worker process is left afterwards."""
    config = os.path.join(os.path.dirname(__file__), "..", "..", "..", "config", "ppo", "Simple_discrete.yaml")
    nodes: List[str] = []
    original = RayRolloutManager.reset

    def reset(self):
        nodes[:] = self.nodes
        return original(self)

    monkeypatch.setattr(RayRolloutManager, "reset", reset)
    code, out, err = run_cli(config, "--run-id=ppo", "--ray-workers=2", "--max-steps=2000")
    assert code == 0, err
    assert len(set(nodes)) == 2  # SPREAD: one worker per node
    assert _mean_reward(run_cli.results, "ppo") > 0.9
    assert len(seen_pids) == 2 and _wait_gone(seen_pids) == []


@pytest.mark.slow
def test_ppo_learns_simple_with_eight_steps_per_call(cluster, run_cli, tmp_path, seen_pids):
    """config/ppo/Simple_discrete.yaml (seed 1), 2 workers x 2 envs running 8 steps per call
    (acting weights up to 15 steps old): the last summary's mean return > 0.9."""
    source = os.path.join(os.path.dirname(__file__), "..", "..", "..", "config", "ppo", "Simple_discrete.yaml")
    text = open(source).read()
    assert "  seed: 1\n" in text
    config = tmp_path / "chunks.yaml"
    config.write_text(text.replace("  seed: 1\n", "  seed: 1\n  ray: {num_workers: 2, envs_per_worker: 2, steps_per_call: 8}\n"))
    code, out, err = run_cli(str(config), "--run-id=chunks", "--max-steps=2000")
    assert code == 0, err
    assert _mean_reward(run_cli.results, "chunks") > 0.9
    assert len(seen_pids) == 2 and _wait_gone(seen_pids) == []


@pytest.mark.slow
def test_threaded_updates_and_resume_work_with_ray(cluster, run_cli, tmp_path, seen_pids):
    """``threaded: true`` (the workers get the acting copy's weights, swapped after each
    update) with 2 workers to 320 steps, then ``--resume`` to 640: both runs end normally
    and the second starts from the first's checkpoint."""
    config = tmp_path / "threaded.yaml"
    text = HYBRID.format(memory="", max_steps=320, ray="  ray: {num_workers: 2}")
    config.write_text(text.replace("    time_horizon: 16\n", "    time_horizon: 16\n    threaded: true\n"))
    code, out, err = run_cli(str(config), "--run-id=threaded")
    assert code == 0, err
    code, out, err = run_cli(str(config), "--run-id=threaded", "--resume", "--max-steps=640")
    assert code == 0, err
    assert (run_cli.results / "threaded" / "Simple" / "checkpoint-640.index").exists()
    assert (run_cli.results / "threaded" / "Simple" / "checkpoint-320.index").exists()
    assert _wait_gone(seen_pids) == [] and len(seen_pids) == 4


@pytest.mark.slow
def test_sac_learns_simple_with_two_workers(cluster, run_cli, seen_pids):
    """config/sac/Simple_discrete.yaml with 2 workers: the last summary's mean return > 0.9."""
    config = os.path.join(os.path.dirname(__file__), "..", "..", "..", "config", "sac", "Simple_discrete.yaml")
    code, out, err = run_cli(config, "--run-id=sac", "--ray-workers=2")
    assert code == 0, err
    assert _mean_reward(run_cli.results, "sac") > 0.9
    assert _wait_gone(seen_pids) == []


def _kill_worker_zero_at(monkeypatch, calls: int) -> None:
    """SIGKILL worker 0's process before the ``calls``-th step (its node dying, as Ray sees it)."""
    original = RayRolloutManager.step_async
    count = {"n": 0}

    def step_async(self, actions):
        count["n"] += 1
        if count["n"] == calls:
            os.kill(self.pids[0], signal.SIGKILL)
        return original(self, actions)

    monkeypatch.setattr(RayRolloutManager, "step_async", step_async)


@pytest.mark.slow
@pytest.mark.parametrize("per_call", [1, 4])
def test_a_killed_worker_is_restarted_and_the_run_completes(cluster, run_cli, tmp_path, monkeypatch, seen_pids, per_call):
    """SIGKILL of worker 0 mid-run (ML-Agents' ``max_lifetime_restarts: 1``): one line, a
    replacement, the run reaches max_steps; with 4 steps per call the replacement joins
    mid-chunk (absent from the other worker's remaining steps)."""
    config = tmp_path / "restart.yaml"
    config.write_text(HYBRID.format(
        memory="", max_steps=400, ray=f"  max_lifetime_restarts: 1\n  ray: {{num_workers: 2, steps_per_call: {per_call}}}"
    ))
    _kill_worker_zero_at(monkeypatch, 50)
    code, out, err = run_cli(str(config), "--run-id=restart")
    assert code == 0, err
    died = [line for line in out.splitlines() if "Ray rollout worker 0 died" in line]
    assert len(died) == 1 and "restart 1 of at most 1" in died[0], out
    # The last checkpoint at max_steps (one past it when the replacement's absence made a
    # step count one agent, not two).
    steps = [int(p.name.split("-")[1].split(".")[0]) for p in (run_cli.results / "restart" / "Simple").glob("checkpoint-*.index")]
    assert max(steps) in (400, 401)
    assert len(seen_pids) == 3 and _wait_gone(seen_pids) == []  # both workers and the replacement


@pytest.mark.slow
def test_a_killed_worker_without_restarts_left_ends_with_a_checkpoint(cluster, run_cli, tmp_path, monkeypatch, seen_pids):
    config = tmp_path / "dead.yaml"
    config.write_text(HYBRID.format(memory="", max_steps=400, ray="  ray: {num_workers: 2, max_lifetime_restarts: 0}"))
    _kill_worker_zero_at(monkeypatch, 50)
    code, out, err = run_cli(str(config), "--run-id=dead")
    assert code == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("trainer-learn: error: Ray rollout worker 0 died"), err
    assert "no restart left (env_settings.max_lifetime_restarts: 0)" in lines[0]
    checkpoints = list((run_cli.results / "dead" / "Simple").glob("checkpoint-*.index"))
    assert checkpoints, "the run saved what it had learned"
    assert len(seen_pids) == 2 and _wait_gone(seen_pids) == []


@pytest.mark.slow
def test_a_hung_worker_is_killed_after_timeout_wait(cluster, run_cli, tmp_path, seen_pids):
    """Every step sleeps 4 s (``step_delay_ms``), ``timeout_wait: 1``, no restarts: the
    first step ends the run with one line and a checkpoint, and the hung process is gone."""
    config = tmp_path / "hung.yaml"
    text = HYBRID.format(memory="", max_steps=400, ray="  timeout_wait: 1\n  ray: {num_workers: 1, max_lifetime_restarts: 0}")
    config.write_text(text.replace("{continuous: 1, discrete: 1}", "{continuous: 1, discrete: 1, step_delay_ms: 4000}"))
    code, out, err = run_cli(str(config), "--run-id=hung")
    assert code == 1
    assert err.strip().splitlines() == [
        "trainer-learn: error: Ray rollout worker 0 died (no answer within 1 s); no restart left "
        "(env_settings.max_lifetime_restarts: 0)"
    ], err
    assert list((run_cli.results / "hung" / "Simple").glob("checkpoint-*.index"))
    assert len(seen_pids) == 1 and _wait_gone(seen_pids) == []


@pytest.mark.parametrize(
    "section, expected",
    [
        ("  ray: {num_workers: 0}", "env_settings.ray.num_workers: expected an integer >= 1, got 0"),
        ("  ray: {envs_per_worker: two}", "env_settings.ray.envs_per_worker: expected an integer, got 'two'"),
        ("  ray: {resources: {CPU: -1}}", "env_settings.ray.resources: CPU: expected a number >= 0, got -1"),
        ("  ray: [1, 2]", "env_settings.ray: expected a mapping"),
        ("  ray: {workers: 2}", "env_settings.ray.workers: unknown key; did you mean num_workers?"),
        ("  ray: {address: ''}", "env_settings.ray.address: expected a non-empty string"),
        ("  num_envs: 2\n  ray: {num_workers: 2}", "env_settings.num_envs: 2: with ray the environments are"),
        ("  max_lifetime_restarts: -1\n  ray: {}", "env_settings.ray.max_lifetime_restarts: expected an integer >= 0"),
        ("  ray: {steps_per_call: 0}", "env_settings.ray.steps_per_call: expected an integer >= 1, got 0"),
    ],
)
def test_bad_ray_settings_are_one_line(run_cli, tmp_path, section, expected):
    config = tmp_path / "bad.yaml"
    config.write_text(HYBRID.format(memory="", max_steps=100, ray=section))
    code, out, err = run_cli(str(config), "--run-id=bad")
    assert code == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], err


def test_bad_ray_flags_are_one_line(run_cli, tmp_path):
    config = tmp_path / "flags.yaml"
    config.write_text(HYBRID.format(memory="", max_steps=100, ray=""))
    code, out, err = run_cli(str(config), "--ray-workers=many")
    assert code == 1 and err.strip() == "trainer-learn: error: --ray-workers: expected an integer, got 'many'"
    code, out, err = run_cli(str(config), "--ray-workers=0")
    assert code == 1 and err.strip().endswith("command line: --ray-workers: expected an integer >= 1, got 0"), err


def test_without_ray_installed_asking_for_it_is_one_line(run_cli, tmp_path, monkeypatch):
    """The import made to fail (``sys.modules['ray'] = None``): one line saying how to
    install it, before any run folder is written."""
    monkeypatch.setitem(__import__("sys").modules, "ray", None)
    config = tmp_path / "noray.yaml"
    config.write_text(HYBRID.format(memory="", max_steps=100, ray=""))
    code, out, err = run_cli(str(config), "--run-id=noray", "--ray=auto")
    assert code == 1
    assert err.strip() == (
        'trainer-learn: error: env_settings.ray: Ray is not installed; install it with '
        'pip install -e ".[ray]" (or pip install "ray>=2")'
    )
    assert not (run_cli.results / "noray").exists()
    with pytest.raises(Exception, match="Ray is not installed"):
        ray_rollouts.import_ray()


def test_self_play_is_refused_in_one_line(run_cli, tmp_path):
    config = tmp_path / "sp.yaml"
    config.write_text(
        HYBRID.format(memory="", max_steps=100, ray="  ray: {num_workers: 1}").replace(
            "    time_horizon: 16\n", "    time_horizon: 16\n    self_play: {}\n"
        )
    )
    code, out, err = run_cli(str(config), "--run-id=sp")
    assert code == 1
    assert err.strip().splitlines() == [
        "trainer-learn: error: behaviors.Simple.self_play: not supported with Ray rollout workers (env_settings.ray)"
    ], err


def test_drop_worker_forgets_that_workers_agents_only():
    """A replaced worker's agents (`AgentProcessor.drop_worker`): their unfinished
    trajectories are never emitted; another worker's agent goes on and emits its own."""
    from envs.base_env import ActionSpec, BehaviorSpec, DecisionSteps, ObservationSpec
    from trainers.loop.trajectory import AgentProcessor

    spec = BehaviorSpec((ObservationSpec((1,)),), ActionSpec(1, ()))
    proc = AgentProcessor(spec, time_horizon=2)

    def decision(ids):
        n = len(ids)
        return DecisionSteps([np.zeros((n, 1), np.float32)], np.ones(n, np.float32), np.array(ids, np.int32))

    def act(worker, dec):
        n = len(dec)
        proc.add_actions(worker, dec, dec.obs, np.zeros((n, 1), np.float32), np.zeros((n, 0), np.int32), None,
                         np.zeros(n, np.float32))

    for worker in (0, 1):
        dec = decision([0])
        proc.add_decision(worker, dec)
        act(worker, dec)
    proc.drop_worker(0)
    assert proc.agent_keys == [(1, 0)]
    for worker in (0, 1):  # worker 0's replacement: a new agent 0, not pending
        dec = decision([0])
        emitted = proc.add_decision(worker, dec)
        assert emitted == []
        act(worker, dec)
    emitted = proc.add_decision(1, decision([0]))
    assert [t.agent for t in emitted] == [(1, 0)] and len(emitted[0]) == 2
    assert proc.add_decision(0, decision([0])) == []  # worker 0's new agent: one step so far
