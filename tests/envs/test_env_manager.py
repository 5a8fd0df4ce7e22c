"""Env managers: in-process vs subprocess equivalence, seeding, worker failures."""
from __future__ import annotations

import gc
import os
import signal
import time
from typing import Any, Dict, List, Sequence

import numpy as np
import pytest

from envs.base_env import ActionTuple
from envs.base_env import DecisionSteps, TerminalSteps
from envs.env_manager import (
    EnvManager,
    EnvStep,
    InProcessEnvManager,
    SubprocessEnvManager,
    _pack_actions,
    _pack_steps,
    _unpack_actions,
    _unpack_steps,
    make_env_manager,
)
from envs.exceptions import EnvError, EnvWorkerError
from envs.registry import make_env


def _random_actions(manager: EnvManager, steps: List[EnvStep], rng: np.random.Generator) -> List[Dict[str, ActionTuple]]:
    out = []
    for step in steps:
        out.append({
            name: manager.behavior_specs[name].action_spec.random_action(len(decision), rng)
            for name, (decision, _) in step.steps.items()
        })
    return out


def _trajectory(manager: EnvManager, num_steps: int) -> List[Any]:
    """Flattened (worker, behavior, obs, reward, ids, terminal ...) records of a rollout."""
    rng = np.random.default_rng(123)
    records: List[Any] = []
    steps = manager.reset()
    for t in range(num_steps + 1):
        assert [s.worker_id for s in steps] == list(range(manager.num_workers))
        for s in steps:
            for name, (decision, terminal) in sorted(s.steps.items()):
                records.append((t, s.worker_id, name, [o.copy() for o in decision.obs], decision.reward.copy(),
                                decision.agent_id.copy(), [o.copy() for o in terminal.obs], terminal.reward.copy(),
                                terminal.interrupted.copy(), terminal.agent_id.copy()))
        if t < num_steps:
            steps = manager.step(_random_actions(manager, steps, rng))
    return records


def _assert_same(a: Sequence[Any], b: Sequence[Any]) -> None:
    assert len(a) == len(b)
    for ra, rb in zip(a, b):
        assert ra[:3] == rb[:3]
        for xa, xb in zip(ra[3:], rb[3:]):
            if isinstance(xa, list):
                for ya, yb in zip(xa, xb):
                    np.testing.assert_array_equal(ya, yb)
            else:
                np.testing.assert_array_equal(xa, xb)


def _assert_all_dead(pids: Sequence[int]) -> None:
    deadline = time.monotonic() + 5.0
    for pid in pids:
        while True:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            # A zombie still answers kill(0); it is reaped by join() in close().
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split()[2] == "Z":
                    break
            assert time.monotonic() < deadline, f"worker {pid} still alive"
            time.sleep(0.05)


SIMPLE_ARGS = {
    "continuous": 1,
    "discrete": 1,
    "num_visual": 1,
    "vis_obs_size": [3, 2, 1],
    "behavior_names": ["A", "B"],
    "max_episode_steps": 6,
}


def test_in_process_manager_contract_and_seeds() -> None:
    with InProcessEnvManager("builtin:Simple", SIMPLE_ARGS, num_envs=3, agents_per_env=2, seed=10) as manager:
        assert manager.num_workers == 3 and manager.seed == 10
        assert sorted(manager.behavior_specs) == ["A", "B"]
        steps = manager.reset()
        assert [s.worker_id for s in steps] == [0, 1, 2]
        assert all(len(s.steps["A"][0]) == 2 for s in steps)
        # Worker i is the env make_env builds with seed + i.
        for i, s in enumerate(steps):
            env = make_env("builtin:Simple", SIMPLE_ARGS, 10 + i, 2)
            env.reset()
            np.testing.assert_array_equal(env.get_steps("B")[0].obs[0], s.steps["B"][0].obs[0])
        with pytest.raises(ValueError, match="one action mapping per worker"):
            manager.step([{}])
        with pytest.raises(ValueError, match="unknown behavior 'C'"):
            manager.step([{}, {"C": ActionTuple()}, {}])
        steps = manager.step([{}, {}, {}])  # behaviors without actions get zeros
        assert len(steps) == 3
    manager.close()


def test_subprocess_equals_in_process_builtin() -> None:
    with InProcessEnvManager("builtin:Simple", SIMPLE_ARGS, num_envs=2, agents_per_env=3, seed=4) as local:
        expected = _trajectory(local, 40)
    with SubprocessEnvManager("builtin:Simple", SIMPLE_ARGS, num_envs=2, agents_per_env=3, seed=4) as remote:
        assert remote.behavior_specs == local.behavior_specs and remote.num_workers == 2
        got = _trajectory(remote, 40)
        pids = remote.worker_pids
    _assert_same(expected, got)
    assert any(len(r[9]) for r in got)  # episodes ended along the way
    _assert_all_dead(pids)


def test_subprocess_equals_in_process_gym() -> None:
    with InProcessEnvManager("gym:CartPole-v1", None, num_envs=2, agents_per_env=2, seed=0) as local:
        expected = _trajectory(local, 60)
    with SubprocessEnvManager("gym:CartPole-v1", None, num_envs=2, agents_per_env=2, seed=0) as remote:
        got = _trajectory(remote, 60)
    _assert_same(expected, got)


def test_make_env_manager_picks_the_manager_and_resolves_random_seed() -> None:
    manager = make_env_manager("builtin:Chain", None, num_envs=1, agents_per_env=1, seed=-1)
    assert isinstance(manager, InProcessEnvManager)
    assert 0 <= manager.seed < 2**31 and manager.num_workers == 1
    manager.close()
    with pytest.raises(EnvError, match="num_envs"):
        make_env_manager("builtin:Chain", None, num_envs=0, agents_per_env=1, seed=0)
    with pytest.raises(EnvError, match="seed"):
        make_env_manager("builtin:Chain", None, num_envs=1, agents_per_env=1, seed=-2)
    manager = make_env_manager("builtin:Chain", {"length": 4}, num_envs=2, agents_per_env=1, seed=0)
    try:
        assert isinstance(manager, SubprocessEnvManager)
        assert len(manager.worker_pids) == 2
        steps = manager.reset()
        assert steps[0].steps["Chain"][0].obs[0].shape == (1, 4)
    finally:
        manager.close()
        manager.close()  # idempotent


def test_config_errors_are_raised_before_or_from_workers() -> None:
    # Checked in the parent: no worker starts.
    with pytest.raises(EnvError, match="'bogus'"):
        SubprocessEnvManager("builtin:Simple", {"bogus": 1}, num_envs=2)
    with pytest.raises(EnvError, match="Unity build 'builds/Game.x86_64' not found"):
        SubprocessEnvManager("builds/Game.x86_64", None, num_envs=2)
    # Raised while the workers build their envs: the same EnvError, as is.
    with pytest.raises(EnvError) as info:
        SubprocessEnvManager("builtin:Simple", {"continuous": -3}, num_envs=2)
    assert str(info.value) == "Simple: env_args.continuous must be an integer >= 0, got -3"
    assert not isinstance(info.value, EnvWorkerError)


def test_worker_that_raises_on_init() -> None:
    with pytest.raises(EnvWorkerError) as info:
        SubprocessEnvManager("builtin:_Crash", {"raise_on_init": True, "crash_seed": 1}, num_envs=2, seed=0)
    assert str(info.value) == "env 'builtin:_Crash' worker 1 raised RuntimeError: _Crash: raise_on_init (seed 1)"


def test_worker_that_raises_at_step_k() -> None:
    manager = SubprocessEnvManager("builtin:_Crash", {"raise_at_step": 3, "crash_seed": 1}, num_envs=2, seed=0)
    pids = manager.worker_pids
    manager.reset()
    manager.step([{}, {}])
    manager.step([{}, {}])
    with pytest.raises(EnvWorkerError) as info:
        manager.step([{}, {}])
    message = str(info.value)
    assert message == "env 'builtin:_Crash' worker 1 raised RuntimeError: _Crash: raise_at_step 3"
    assert "Traceback" in info.value.worker_traceback  # type: ignore[attr-defined]
    _assert_all_dead(pids)
    with pytest.raises(EnvWorkerError):  # the manager stays failed
        manager.step([{}, {}])
    manager.close()


def test_worker_killed_by_signal() -> None:
    manager = SubprocessEnvManager("builtin:Simple", None, num_envs=2, seed=0)
    pids = manager.worker_pids
    manager.reset()
    os.kill(pids[0], signal.SIGKILL)
    start = time.monotonic()
    with pytest.raises(EnvWorkerError) as info:
        manager.step([{}, {}])
    assert str(info.value) == "env 'builtin:Simple' worker 0 died (killed by signal SIGKILL)"
    assert time.monotonic() - start < 5.0
    _assert_all_dead(pids)


def test_worker_that_exits_mid_step() -> None:
    manager = SubprocessEnvManager("builtin:_Crash", {"exit_at_step": 2, "crash_seed": 0}, num_envs=2, seed=0)
    pids = manager.worker_pids
    manager.reset()
    manager.step([{}, {}])
    with pytest.raises(EnvWorkerError, match=r"^env 'builtin:_Crash' worker 0 died \(exit code 3\)$"):
        manager.step([{}, {}])
    _assert_all_dead(pids)


def test_hung_worker_times_out() -> None:
    manager = SubprocessEnvManager(
        "builtin:_Crash", {"hang_at_step": 1, "crash_seed": 1}, num_envs=2, seed=0, step_timeout=0.5
    )
    pids = manager.worker_pids
    manager.reset()
    start = time.monotonic()
    with pytest.raises(EnvWorkerError, match=r"worker 1 did not answer within 0.5 s"):
        manager.step([{}, {}])
    assert time.monotonic() - start < 5.0
    _assert_all_dead(pids)


def test_in_process_errors_are_worker_errors_too() -> None:
    manager = InProcessEnvManager("builtin:_Crash", {"raise_at_step": 1, "crash_seed": 1}, num_envs=2, seed=0)
    manager.reset()
    with pytest.raises(EnvWorkerError, match="^env 'builtin:_Crash' worker 1 raised RuntimeError"):
        manager.step([{}, {}])
    with pytest.raises(EnvWorkerError):  # closed and failed, like the subprocess manager
        manager.reset()


def test_forgotten_manager_leaves_no_workers() -> None:
    manager = SubprocessEnvManager("builtin:Simple", None, num_envs=2, seed=0)
    pids = manager.worker_pids
    del manager
    gc.collect()
    _assert_all_dead(pids)


def test_workers_step_in_parallel() -> None:
    # Both workers sleep 0.4 s in their first step: in parallel that is ~0.4 s, not 0.8.
    with SubprocessEnvManager("builtin:_Crash", {"hang_at_step": 1, "hang_seconds": 0.4}, num_envs=2) as manager:
        manager.reset()
        start = time.monotonic()
        manager.step([{}, {}])
        assert time.monotonic() - start < 0.7


def test_wire_format_round_trip_with_masks_and_empty_parts() -> None:
    from envs.base_env import ActionSpec, BehaviorSpec, ObservationKind, ObservationSpec

    spec = BehaviorSpec(
        (ObservationSpec((3,)), ObservationSpec((2, 2, 1), kind=ObservationKind.VISUAL)), ActionSpec(2, (3, 2))
    )
    specs = {"X": spec, "Y": spec}
    rng = np.random.default_rng(0)
    decision = DecisionSteps(
        obs=[rng.random((3, 3), dtype=np.float32), rng.random((3, 2, 2, 1), dtype=np.float32)],
        reward=np.array([1.5, -2, 0], np.float32),
        agent_id=np.array([4, 7, 9], np.int32),
        action_mask=[np.array([[True, False, False]] * 3), np.array([[False, True]] * 3)],
    )
    terminal = TerminalSteps(
        obs=[rng.random((1, 3), dtype=np.float32), rng.random((1, 2, 2, 1), dtype=np.float32)],
        reward=np.array([3.0], np.float32), interrupted=np.array([True]), agent_id=np.array([2], np.int32),
    )
    steps = {"X": (decision, terminal), "Y": (DecisionSteps.empty(spec), TerminalSteps.empty(spec))}
    back = _unpack_steps(["X", "Y"], specs, _pack_steps(["X", "Y"], steps))
    for name in ("X", "Y"):
        for a, b in zip(steps[name], back[name]):
            for field in ("obs", "reward", "agent_id", "action_mask", "interrupted"):
                va: Any = getattr(a, field, None)
                vb: Any = getattr(b, field, None)
                if isinstance(va, list):
                    assert len(va) == len(vb)
                    for xa, xb in zip(va, vb):
                        np.testing.assert_array_equal(xa, xb)
                        assert xa.dtype == xb.dtype and xb.flags.writeable
                elif va is None:
                    assert vb is None
                else:
                    np.testing.assert_array_equal(va, vb)
                    assert va.dtype == vb.dtype
    actions = {"Y": ActionTuple(continuous=rng.random((3, 2)), discrete=np.array([[2, 1], [0, 0], [1, 1]]))}
    got = _unpack_actions(["X", "Y"], _pack_actions(["X", "Y"], actions))
    assert list(got) == ["Y"]
    np.testing.assert_array_equal(got["Y"].continuous, actions["Y"].continuous)
    np.testing.assert_array_equal(got["Y"].discrete, actions["Y"].discrete)


def test_from_envs_wraps_existing_envs() -> None:
    envs = [make_env("builtin:Chain", None, 5, 1), make_env("builtin:Chain", None, 6, 1)]
    with InProcessEnvManager.from_envs(envs, env_id="builtin:Chain", seed=5) as manager:
        assert manager.num_workers == 2 and manager.seed == 5
        assert len(manager.reset()) == 2


# ---------------------------------------------------------------- shared memory
def _our_segments() -> List[str]:
    """Shared-memory segments of this process's managers still named in /dev/shm."""
    return sorted(n for n in os.listdir("/dev/shm") if n.startswith(f"trl_{os.getpid()}_"))


def _no_orphans() -> None:
    import multiprocessing

    deadline = time.monotonic() + 5.0
    while multiprocessing.active_children():  # also reaps finished children
        assert time.monotonic() < deadline, f"orphan workers: {multiprocessing.active_children()}"
        time.sleep(0.05)
    assert _our_segments() == []


def test_shared_memory_segments_are_unlinked_once_mapped() -> None:
    with SubprocessEnvManager("builtin:Simple", SIMPLE_ARGS, num_envs=2, agents_per_env=3, seed=4) as manager:
        assert manager.shared_memory_capacities == [{"A": 3, "B": 3}] * 2
        manager.reset()
        assert _our_segments() == []  # mapped by both sides, no name left behind
    _no_orphans()


def test_more_agents_than_capacity_go_through_the_pipe_then_the_segment_grows() -> None:
    # env_args.num_agents=5 with agents_per_env=1: the segment holds 1 agent at first.
    args = dict(SIMPLE_ARGS, num_agents=5)
    with InProcessEnvManager("builtin:Simple", args, num_envs=2, agents_per_env=1, seed=4) as local:
        expected = _trajectory(local, 30)
    with SubprocessEnvManager("builtin:Simple", args, num_envs=2, agents_per_env=1, seed=4) as remote:
        assert remote.shared_memory_capacities == [{"A": 1, "B": 1}] * 2
        got = _trajectory(remote, 30)
        assert remote.shared_memory_capacities == [{"A": 5, "B": 5}] * 2
    _assert_same(expected, got)
    with SubprocessEnvManager("builtin:Simple", args, num_envs=2, agents_per_env=1, seed=4,
                              shared_memory=False) as piped:
        assert piped.shared_memory_capacities == [None, None]
        _assert_same(expected, _trajectory(piped, 30))
    _no_orphans()


def test_bad_actions_still_reach_the_env_through_the_pipe() -> None:
    # Too many rows for the segment: sent packed, and the env's own error comes back.
    with SubprocessEnvManager("builtin:Simple", None, num_envs=2, seed=0) as manager:
        manager.reset()
        bad = ActionTuple(continuous=np.zeros((4, 1), np.float32))
        with pytest.raises(EnvWorkerError, match=r"worker 0 raised ValueError: Simple: continuous actions must have"):
            manager.step([{"Simple": bad}, {}])
    _no_orphans()


def test_worker_killed_mid_step_leaves_no_segment_or_orphan() -> None:
    import threading

    manager = SubprocessEnvManager(
        "builtin:_Crash", {"hang_at_step": 1, "hang_seconds": 30, "crash_seed": 1}, num_envs=2, seed=0
    )
    pids = manager.worker_pids
    manager.reset()
    threading.Timer(0.3, os.kill, (pids[1], signal.SIGKILL)).start()  # while it is inside step()
    with pytest.raises(EnvWorkerError) as info:
        manager.step([{}, {}])
    assert str(info.value) == "env 'builtin:_Crash' worker 1 died (killed by signal SIGKILL)"
    _no_orphans()


def test_hung_worker_leaves_no_segment_or_orphan() -> None:
    manager = SubprocessEnvManager(
        "builtin:_Crash", {"hang_at_step": 2, "crash_seed": 0}, num_envs=2, seed=0, step_timeout=0.5
    )
    manager.reset()
    manager.step([{}, {}])
    with pytest.raises(EnvWorkerError, match=r"^env 'builtin:_Crash' worker 0 did not answer within 0.5 s$"):
        manager.step([{}, {}])
    _no_orphans()


def test_spec_mismatch_between_workers_is_one_line() -> None:
    with pytest.raises(EnvWorkerError) as info:
        SubprocessEnvManager("builtin:_Crash", {"spec_mismatch": True, "crash_seed": 1}, num_envs=2, seed=0)
    assert str(info.value) == "env 'builtin:_Crash' worker 1 has behavior specs that differ from worker 0's"
    _no_orphans()


def test_step_delay_ms_slows_the_builtin_env() -> None:
    env = make_env("builtin:Simple", {"step_delay_ms": 20}, 0)
    env.reset()
    start = time.perf_counter()
    env.step()
    assert time.perf_counter() - start >= 0.02
    with pytest.raises(EnvError, match="step_delay_ms"):
        make_env("builtin:Simple", {"step_delay_ms": -1}, 0)


def test_without_shared_memory_the_pipes_carry_the_steps(monkeypatch, capsys) -> None:
    import envs.env_manager as env_manager

    def no_shm(*args: Any, **kwargs: Any) -> Any:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(env_manager, "SharedMemory", no_shm)
    with InProcessEnvManager("builtin:Simple", SIMPLE_ARGS, num_envs=2, agents_per_env=2, seed=3) as local:
        expected = _trajectory(local, 10)
    with SubprocessEnvManager("builtin:Simple", SIMPLE_ARGS, num_envs=2, agents_per_env=2, seed=3) as remote:
        assert remote.shared_memory_capacities == [None, None]
        _assert_same(expected, _trajectory(remote, 10))
    assert capsys.readouterr().out.count("no shared memory") == 1
    _no_orphans()


def test_waiter_spins_only_while_answers_come_quickly(monkeypatch) -> None:
    """`_Waiter` (the spin-then-block wait of both ends of a worker pipe): data already
    there returns at once; a wait that times out returns nothing after about its timeout;
    once the recent waits averaged over half of ``SPIN_S`` it blocks without spinning,
    and quick answers bring the spinning back."""
    import select

    from envs import env_manager

    yields = []
    real_yield = os.sched_yield
    monkeypatch.setattr(env_manager.os, "sched_yield", lambda: yields.append(1) or real_yield())
    read_fd, write_fd = os.pipe()
    try:
        poller = select.poll()
        poller.register(read_fd, select.POLLIN)
        waiter = env_manager._Waiter(poller)
        os.write(write_fd, b"x")
        assert waiter.poll(1.0) and not yields  # already readable: no spin
        os.read(read_fd, 1)
        start = time.perf_counter()
        assert waiter.poll(0.05) == []  # nothing comes: spins, then blocks until the timeout
        assert 0.04 < time.perf_counter() - start < 1.0 and yields
        while waiter.recent_s < 0.5 * env_manager.SPIN_S:  # slow answers: the average grows
            waiter.poll(0.01)
        yields.clear()
        assert waiter.poll(0.01) == [] and not yields  # it blocks at once now
        for _ in range(60):  # quick answers again
            os.write(write_fd, b"x")
            waiter.poll(1.0)
            os.read(read_fd, 1)
        assert waiter.recent_s < 0.5 * env_manager.SPIN_S
        waiter.poll(0.005)
        assert yields  # and it spins again
    finally:
        os.close(read_fd)
        os.close(write_fd)
