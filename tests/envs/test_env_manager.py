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
from envs.managers.base import EnvManager, EnvStep
from envs.managers.in_process import InProcessEnvManager
from envs.managers.subprocess import SubprocessEnvManager
from envs.managers._wire import _pack_actions, _pack_steps, _unpack_actions, _unpack_steps
from envs.managers import make_env_manager
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


# A failure is reported after at most the step timeout plus the shutdown: 1 s for the
# workers to close, 1 s after SIGTERM, 1 s after SIGKILL (`_Workers.shutdown`). A loaded
# CI machine can stretch each stage (one run took 5.07 s against a bound of 5); the bound
# only has to tell a reported failure from a wait for the 600 s default timeout.
_FAILS_WITHIN_S = 20.0


def test_worker_killed_by_signal() -> None:
    manager = SubprocessEnvManager("builtin:Simple", None, num_envs=2, seed=0)
    pids = manager.worker_pids
    manager.reset()
    os.kill(pids[0], signal.SIGKILL)
    start = time.monotonic()
    with pytest.raises(EnvWorkerError) as info:
        manager.step([{}, {}])
    assert str(info.value) == "env 'builtin:Simple' worker 0 died (killed by signal SIGKILL)"
    assert time.monotonic() - start < _FAILS_WITHIN_S
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
    assert time.monotonic() - start < _FAILS_WITHIN_S
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
    # Both workers sleep 1 s in their first step: in parallel that is ~1 s, not 2 (the
    # margin is for a loaded machine).
    with SubprocessEnvManager("builtin:_Crash", {"hang_at_step": 1, "hang_seconds": 1.0}, num_envs=2) as manager:
        manager.reset()
        start = time.monotonic()
        manager.step([{}, {}])
        assert time.monotonic() - start < 1.8


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
    import envs.managers.subprocess as env_manager

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

    from envs.managers import _wire as env_manager

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


# ---------------------------------------------------------------- out of lockstep


def _per_worker_rollout(manager: EnvManager, num_steps: int, out_of_lockstep: bool) -> Dict[int, List[Any]]:
    """Per worker: its records over ``num_steps`` steps, each worker acting from its own
    random stream (so a worker's records depend only on its own steps, whatever the order
    in which workers answer)."""
    rngs = {i: np.random.default_rng(100 + i) for i in range(manager.num_workers)}
    records: Dict[int, List[Any]] = {i: [] for i in range(manager.num_workers)}

    def record(step: EnvStep) -> None:
        for name, (decision, terminal) in sorted(step.steps.items()):
            records[step.worker_id].append((name, [o.copy() for o in decision.obs], decision.reward.copy(),
                                            decision.agent_id.copy(), terminal.reward.copy(),
                                            terminal.agent_id.copy()))

    def act(step: EnvStep) -> Dict[str, ActionTuple]:
        return {name: manager.behavior_specs[name].action_spec.random_action(len(decision), rngs[step.worker_id])
                for name, (decision, _) in sorted(step.steps.items())}

    steps = manager.reset()
    for s in steps:
        record(s)
    if not out_of_lockstep:
        for _ in range(num_steps):
            steps = manager.step([act(s) for s in steps])
            for s in steps:
                record(s)
        return records
    done = {i: 0 for i in range(manager.num_workers)}
    manager.step_some({s.worker_id: act(s) for s in steps})
    stepping = set(done)
    while stepping:
        answered = manager.wait_some()
        assert answered and [s.worker_id for s in answered] == sorted(s.worker_id for s in answered)
        for s in answered:
            record(s)
            done[s.worker_id] += 1
            if done[s.worker_id] < num_steps:
                manager.step_some({s.worker_id: act(s)})
            else:
                stepping.discard(s.worker_id)
    return records


def test_out_of_lockstep_each_worker_sees_what_it_would_in_lockstep() -> None:
    # 5 agents in segments sized for 1 (they grow at the reset; for a remap while another
    # worker steps, see the remap test below), 3 workers answering in any order.
    args = dict(SIMPLE_ARGS, num_agents=5)
    with InProcessEnvManager("builtin:Simple", args, num_envs=3, agents_per_env=1, seed=4) as local:
        expected = _per_worker_rollout(local, 40, out_of_lockstep=False)
    with SubprocessEnvManager("builtin:Simple", args, num_envs=3, agents_per_env=1, seed=4) as remote:
        got = _per_worker_rollout(remote, 40, out_of_lockstep=True)
        assert remote.shared_memory_capacities == [{"A": 5, "B": 5}] * 3
    for i in range(3):
        _assert_same([(0, 0, *r) for r in expected[i]], [(0, 0, *r) for r in got[i]])
    _no_orphans()


def test_out_of_lockstep_a_slow_worker_does_not_hold_back_the_other() -> None:
    # Worker 1 sleeps 0.5 s in its second step; worker 0 keeps stepping meanwhile.
    args = {"hang_at_step": 2, "hang_seconds": 0.5, "crash_seed": 1}
    with SubprocessEnvManager("builtin:_Crash", args, num_envs=2, seed=0) as manager:
        manager.reset()
        manager.step_some({0: {}, 1: {}})
        counts = [0, 0]
        while counts[1] < 2:
            for s in manager.wait_some():
                counts[s.worker_id] += 1
                manager.step_some({s.worker_id: {}})
        assert counts[0] > 20, counts  # ~2 in lockstep
    _no_orphans()


def test_out_of_lockstep_a_hung_worker_times_out_while_the_other_answers() -> None:
    manager = SubprocessEnvManager(
        "builtin:_Crash", {"hang_at_step": 3, "crash_seed": 1}, num_envs=2, seed=0, step_timeout=0.5
    )
    pids = manager.worker_pids
    manager.reset()
    manager.step_some({0: {}, 1: {}})
    start = time.monotonic()
    with pytest.raises(EnvWorkerError, match=r"^env 'builtin:_Crash' worker 1 did not answer within 0.5 s$"):
        while True:
            for s in manager.wait_some():
                manager.step_some({s.worker_id: {}})
    assert time.monotonic() - start < _FAILS_WITHIN_S
    _assert_all_dead(pids)
    _no_orphans()


def test_out_of_lockstep_a_hung_worker_fails_even_when_another_answer_is_ready() -> None:
    """The hung worker's deadline is checked after a wait that did bring another worker's
    answer: here worker 0's answer is waiting when `wait_some` is called after worker 1's
    deadline, which before returned worker 0's step and left worker 1 unchecked for as long
    as another answer came first (a CI run once took 34 s to report it)."""
    manager = SubprocessEnvManager(
        "builtin:_Crash", {"hang_at_step": 1, "crash_seed": 1}, num_envs=2, seed=0, step_timeout=0.5
    )
    pids = manager.worker_pids
    manager.reset()
    manager.step_some({0: {}, 1: {}})  # worker 1 hangs in its first step
    time.sleep(1.0)  # past worker 1's deadline; worker 0 has answered
    with pytest.raises(EnvWorkerError, match=r"^env 'builtin:_Crash' worker 1 did not answer within 0.5 s$"):
        manager.wait_some()
    _assert_all_dead(pids)
    _no_orphans()


def test_out_of_lockstep_a_worker_that_dies_is_one_line() -> None:
    manager = SubprocessEnvManager("builtin:_Crash", {"exit_at_step": 4, "crash_seed": 0}, num_envs=2, seed=0)
    manager.reset()
    manager.step_some({0: {}, 1: {}})
    with pytest.raises(EnvWorkerError, match=r"^env 'builtin:_Crash' worker 0 died \(exit code 3\)$"):
        while True:
            for s in manager.wait_some():
                manager.step_some({s.worker_id: {}})
    _no_orphans()


def test_step_some_misuse_is_an_error() -> None:
    with SubprocessEnvManager("builtin:Simple", None, num_envs=2, seed=0) as manager:
        manager.reset()
        with pytest.raises(RuntimeError, match="no worker is stepping"):
            manager.wait_some()
        with pytest.raises(ValueError, match="no worker 2"):
            manager.step_some({2: {}})
        with pytest.raises(ValueError, match="unknown behavior 'Nope'"):
            manager.step_some({0: {"Nope": ActionTuple()}})
        manager.step_some({0: {}})
        with pytest.raises(RuntimeError, match="worker 0 is still stepping"):
            manager.step_some({0: {}})
        with pytest.raises(RuntimeError, match=r"workers \[0\] are still stepping"):
            manager.step([{}, {}])
        assert [s.worker_id for s in manager.wait_some()] == [0]
        assert [s.worker_id for s in manager.step([{}, {}])] == [0, 1]  # lockstep again
    _no_orphans()


def test_lockstep_managers_step_every_worker_through_step_some() -> None:
    with InProcessEnvManager("builtin:Simple", SIMPLE_ARGS, num_envs=2, seed=3) as manager, \
            InProcessEnvManager("builtin:Simple", SIMPLE_ARGS, num_envs=2, seed=3) as reference:
        steps, expected = manager.reset(), reference.reset()
        rng = np.random.default_rng(0)
        for _ in range(5):
            actions = _random_actions(manager, steps, rng)
            manager.step_some({1: actions[1]})
            with pytest.raises(RuntimeError, match=r"lockstep; step_some\(\) started \[1\] of 2"):
                manager.wait_some()
            manager.step_some({0: actions[0]})
            steps, expected = manager.wait_some(), reference.step(actions)
            assert [s.worker_id for s in steps] == [0, 1]
            for s, e in zip(steps, expected):
                for name in s.steps:
                    np.testing.assert_array_equal(s.steps[name][0].obs[0], e.steps[name][0].obs[0])


def test_step_async_then_wait_all_is_step_with_the_workers_stepping_meanwhile() -> None:
    # Both halves, on either manager, give what step gives; the subprocess workers step
    # while the caller goes on (their first step sleeps 0.4 s), the in-process ones in wait_all.
    for cls in (InProcessEnvManager, SubprocessEnvManager):
        with cls("builtin:Simple", SIMPLE_ARGS, num_envs=2, seed=3) as manager, \
                InProcessEnvManager("builtin:Simple", SIMPLE_ARGS, num_envs=2, seed=3) as reference:
            assert manager.steps_in_background is (cls is SubprocessEnvManager)
            with pytest.raises(RuntimeError, match=r"call step_async\(\) first"):
                manager.wait_all()
            steps, expected = manager.reset(), reference.reset()
            rng = np.random.default_rng(0)
            for _ in range(8):  # episodes end (max_episode_steps 6)
                actions = _random_actions(manager, steps, rng)
                manager.step_async(actions)
                with pytest.raises(RuntimeError, match="still stepping|has not been waited for"):
                    manager.step_async(actions)
                steps, expected = manager.wait_all(), reference.step(actions)
                assert [s.worker_id for s in steps] == [0, 1]
                for s, e in zip(steps, expected):
                    for name in s.steps:
                        for got, want in zip(s.steps[name], e.steps[name]):
                            np.testing.assert_array_equal(got.obs[0], want.obs[0])
                            np.testing.assert_array_equal(got.reward, want.reward)
                            np.testing.assert_array_equal(got.agent_id, want.agent_id)
    # Both workers sleep 1 s: step_async returns at once, wait_all after the sleep.
    with SubprocessEnvManager("builtin:_Crash", {"hang_at_step": 1, "hang_seconds": 1.0}, num_envs=2) as manager:
        manager.reset()
        start = time.monotonic()
        manager.step_async([{}, {}])
        started = time.monotonic() - start
        assert [s.worker_id for s in manager.wait_all()] == [0, 1]
        assert started < 0.5 and time.monotonic() - start >= 0.95, (started, time.monotonic() - start)
    _no_orphans()


def test_out_of_lockstep_a_reply_that_comes_in_during_a_segment_remap_is_kept() -> None:
    with SubprocessEnvManager("builtin:Simple", SIMPLE_ARGS, num_envs=2, agents_per_env=1, seed=4) as manager:
        manager.reset()
        manager.step_some({1: {}})
        time.sleep(0.2)  # worker 1 has answered
        # What a step with more agents than worker 0's segment holds leads to, while 1 steps:
        manager._map([0], [{"A": 2, "B": 2}], 5.0)
        assert [s.worker_id for s in manager.wait_some()] == [1]
        assert manager.shared_memory_capacities == [{"A": 2, "B": 2}, {"A": 1, "B": 1}]
        assert [s.worker_id for s in manager.step([{}, {}])] == [0, 1]
    _no_orphans()
