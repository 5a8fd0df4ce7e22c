"""Env workers and signals: a stop request ends a wait on a hung worker, the step timeout is
configurable for every env kind, workers die with their parent (kill -9 included), and a
Ctrl-C during start-up or close() leaves no traceback and no worker behind (issue 30, item 6).

Bounds on durations are generous (tens of seconds against a hang of an hour or a step
timeout of minutes): the machine running these may be loaded.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Callable, Iterator, List, Sequence

import pytest

from envs.managers.subprocess import SubprocessEnvManager
from envs.managers import make_env_manager
from envs.exceptions import EnvError, EnvInterrupted, EnvWorkerError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HANG_WORKER_1 = {"hang_at_step": 1, "crash_seed": 1}  # worker 1 (seed 0 + 1) sleeps an hour in step 1


def _gone(pid: int) -> bool:
    """True when ``pid`` no longer runs (a zombie, waiting to be reaped, counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def _wait_gone(pids: Sequence[int], within_s: float) -> List[int]:
    """The pids still running after waiting up to ``within_s`` seconds for all to end."""
    deadline = time.monotonic() + within_s
    while True:
        alive = [p for p in pids if not _gone(p)]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.05)


def _segments_of(pid: int) -> List[str]:
    return sorted(n for n in os.listdir("/dev/shm") if n.startswith(f"trl_{pid}_"))


@pytest.fixture
def sigint_sets_flag() -> Iterator[threading.Event]:
    """SIGINT handled as the training loop handles it: a flag, nothing raised."""
    flag = threading.Event()
    previous = signal.signal(signal.SIGINT, lambda signum, frame: flag.set())
    try:
        yield flag
    finally:
        signal.signal(signal.SIGINT, previous)


def _ctrl_c_in(seconds: float) -> threading.Timer:
    """SIGINT to this process only (a terminal's Ctrl-C also reaches the workers, which
    ignore it)."""
    timer = threading.Timer(seconds, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    return timer


# --------------------------------------------------------------------------- stop requests
@pytest.mark.parametrize("lockstep", [True, False], ids=["step", "wait_some"])
def test_a_stop_request_ends_the_wait_for_a_hung_worker(sigint_sets_flag: threading.Event, lockstep: bool) -> None:
    manager = SubprocessEnvManager("builtin:_Crash", HANG_WORKER_1, num_envs=2, seed=0, step_timeout=300.0)
    pids = manager.worker_pids
    manager.set_stop_check(sigint_sets_flag.is_set)
    manager.reset()
    if not lockstep:  # worker 0 answers, worker 1 hangs: wait for worker 1 alone
        manager.step_some({0: {}, 1: {}})
        assert [s.worker_id for s in manager.wait_some()] == [0]
    timer = _ctrl_c_in(0.3)
    start = time.monotonic()
    with pytest.raises(EnvInterrupted) as info:
        manager.step([{}, {}]) if lockstep else manager.wait_some()
    elapsed = time.monotonic() - start
    timer.join()
    assert str(info.value) == "env 'builtin:_Crash': stopped waiting for worker 1 (a stop was requested)"
    assert not isinstance(info.value, EnvError)  # a stop, not something for the user to fix
    assert elapsed < 60.0  # the step timeout is 300 s and the worker sleeps an hour
    with pytest.raises(EnvInterrupted):  # the manager stays stopped
        manager.step([{}, {}])
    manager.close()  # kills the hung worker
    assert _wait_gone(pids, 30.0) == []
    assert _segments_of(os.getpid()) == []


def test_without_a_stop_request_the_stop_check_changes_nothing() -> None:
    calls: List[int] = []

    def never() -> bool:
        calls.append(1)
        return False

    with SubprocessEnvManager(
        "builtin:_Crash", {"hang_at_step": 1, "hang_seconds": 0.5}, num_envs=2, seed=0, stop_check=never
    ) as manager:
        manager.reset()
        steps = manager.step([{}, {}])  # both sleep 0.5 s: several slices of waiting
        assert [s.worker_id for s in steps] == [0, 1]
        assert calls  # it was looked at while waiting
        manager.set_stop_check(None)
        manager.step([{}, {}])
    with pytest.raises(TypeError):
        manager.set_stop_check(True)  # type: ignore[arg-type]


def test_a_worker_killed_after_a_stop_request_is_the_stop_not_a_failure() -> None:
    # SIGTERM sent to the whole process group: the loop's handler sets its flag, the
    # worker dies of the same signal; that is the stop, reported as such.
    stop = threading.Event()
    manager = SubprocessEnvManager("builtin:Simple", None, num_envs=2, seed=0, stop_check=stop.is_set)
    pids = manager.worker_pids
    manager.reset()
    os.kill(pids[0], signal.SIGTERM)
    assert _wait_gone(pids[:1], 30.0) == []
    stop.set()
    with pytest.raises(EnvInterrupted, match=r"^env 'builtin:Simple': worker 0 died \(killed by signal SIGTERM\) "
                                             r"\(a stop was requested\)$"):
        manager.step([{}, {}])
    manager.close()
    assert _wait_gone(pids, 30.0) == []


def test_a_worker_terminated_without_a_stop_request_is_still_one_line() -> None:
    # Workers now close their env on SIGTERM, then end by the same signal: same report.
    manager = SubprocessEnvManager("builtin:Simple", None, num_envs=2, seed=0)
    pids = manager.worker_pids
    manager.reset()
    os.kill(pids[1], signal.SIGTERM)
    assert _wait_gone(pids[1:], 30.0) == []
    with pytest.raises(EnvWorkerError, match=r"^env 'builtin:Simple' worker 1 died \(killed by signal SIGTERM\)$"):
        manager.step([{}, {}])
    assert _wait_gone(pids, 30.0) == []


# --------------------------------------------------------------------------- step timeout
def test_make_env_manager_takes_the_step_timeout_for_builtin_and_gym_workers() -> None:
    manager = make_env_manager("builtin:_Crash", HANG_WORKER_1, 2, 1, 0, step_timeout=2.0)
    try:
        assert isinstance(manager, SubprocessEnvManager) and manager.step_timeout == 2.0
        pids = manager.worker_pids
        manager.reset()
        with pytest.raises(EnvWorkerError, match=r"^env 'builtin:_Crash' worker 1 did not answer within 2 s$"):
            manager.step([{}, {}])
    finally:
        manager.close()
    assert _wait_gone(pids, 30.0) == []
    with make_env_manager("gym:CartPole-v1", None, 2, 1, 0, step_timeout=7) as gym_manager:
        assert gym_manager.step_timeout == 7.0
    with make_env_manager("builtin:Simple", None, 2, 1, 0) as default:
        assert default.step_timeout == 600.0


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), True, "60"])
def test_a_bad_step_timeout_is_one_line(bad: Any) -> None:
    with pytest.raises(EnvError, match=r"^env_settings.timeout_wait must be a number of seconds > 0, got "):
        make_env_manager("builtin:Simple", None, 2, 1, 0, step_timeout=bad)


def test_make_env_manager_gives_the_step_timeout_to_unity_games(monkeypatch: pytest.MonkeyPatch) -> None:
    import envs.managers.unity as unity_manager
    from envs.unity.options import UnityOptions

    seen: List[Any] = []

    class FakeUnityManager:
        def __init__(self, env_id: Any, num_envs: int, seed: int, options: Any) -> None:
            seen.append(options)

    monkeypatch.setattr(unity_manager, "UnityEnvManager", FakeUnityManager)
    make_env_manager(None, None, 1, 1, 0, step_timeout=12.5)
    make_env_manager(None, None, 1, 1, 0, unity=UnityOptions(timeout_wait=30.0))
    assert [o.timeout_wait for o in seen] == [12.5, 30.0]


@pytest.mark.parametrize("num_envs, agents, key", [(1025, 1, "num_envs"), (2, 10**9, "agents_per_env")])
def test_absurd_counts_are_refused_before_anything_starts(num_envs: int, agents: int, key: str) -> None:
    with pytest.raises(EnvError, match=rf"^env_settings.{key} must be at most "):
        make_env_manager("builtin:Simple", None, num_envs, agents, 0)


# --------------------------------------------------------------------------- parent death
_KILLED_PARENT = """
import json, sys
sys.path.insert(0, {root!r})
from multiprocessing import resource_tracker
from envs.managers import SubprocessEnvManager

if __name__ == "__main__":
    manager = SubprocessEnvManager("builtin:_Crash", {{"hang_at_step": 1}}, num_envs=2, seed=0)
    manager.reset()
    print(json.dumps({{"workers": manager.worker_pids, "tracker": resource_tracker._resource_tracker._pid}}),
          flush=True)
    manager.step([{{}}, {{}}])  # both workers sleep an hour in this step
"""


def test_kill_9_of_the_parent_ends_its_hung_workers_and_the_resource_tracker(tmp_path: Any) -> None:
    script = tmp_path / "trainer.py"
    script.write_text(_KILLED_PARENT.format(root=ROOT))
    with open(tmp_path / "stderr.txt", "w") as stderr:
        parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=stderr, text=True)
    pids: List[int] = []
    try:
        line = parent.stdout.readline() if parent.stdout else ""
        assert line, f"the parent failed: {(tmp_path / 'stderr.txt').read_text()}"
        info = json.loads(line)
        pids = list(info["workers"]) + [info["tracker"]]
        time.sleep(1.0)  # the workers are inside their step by now
        assert [p for p in pids if _gone(p)] == []
        parent.kill()
        parent.wait(30)
        still = _wait_gone(pids, 30.0)
        assert still == [], f"left running after kill -9 of their parent: {still}"
        assert _segments_of(parent.pid) == []
        assert "Traceback" not in (tmp_path / "stderr.txt").read_text()
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(30)
        for pid in pids:  # whatever the assertions said, leave nothing behind
            if not _gone(pid):
                os.kill(pid, signal.SIGKILL)
        if parent.stdout:
            parent.stdout.close()


# --------------------------------------------------------------------------- Ctrl-C
def _when(condition: Callable[[], bool], action: Callable[[], None], within_s: float) -> threading.Thread:
    """Runs ``action`` in a thread as soon as ``condition()`` holds, or after ``within_s``."""

    def run() -> None:
        deadline = time.monotonic() + within_s
        while not condition() and time.monotonic() < deadline:
            time.sleep(0.005)
        action()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_a_ctrl_c_during_close_hurries_it_then_comes_out_of_it() -> None:
    # The second Ctrl-C of an impatient user arrives while close() waits (up to 5 s) for
    # a worker slow to close its env. It used to raise inside the join, abandon the
    # shutdown with a traceback and leave the worker running.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        manager = SubprocessEnvManager("builtin:_Crash", {"hang_on_close": True, "crash_seed": 1}, num_envs=2, seed=0)
        pids = manager.worker_pids
        manager.reset()
        closing = _when(
            lambda: signal.getsignal(signal.SIGINT) is not signal.default_int_handler,  # close() is running
            lambda: os.kill(os.getpid(), signal.SIGINT),
            within_s=3.0,  # (before the fix the handler never changed: the Ctrl-C came after 3 s)
        )
        start = time.monotonic()
        with pytest.raises(KeyboardInterrupt):  # delivered once the workers are gone, not lost
            manager.close()
        elapsed = time.monotonic() - start
        closing.join()
        assert [p for p in pids if not _gone(p)] == []  # already: close() finished its work
        assert elapsed < 30.0
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        manager.close()  # idempotent
    finally:
        signal.signal(signal.SIGINT, previous)
    assert _segments_of(os.getpid()) == []


def test_in_process_close_closes_every_env_before_a_ctrl_c_comes_out() -> None:
    from envs.builtin import Simple
    from envs.managers.in_process import InProcessEnvManager

    closed: List[int] = []

    class SlowToClose(Simple):
        def close(self) -> None:
            closed.append(id(self))
            if len(closed) == 1:
                os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while the first env closes
                time.sleep(0.05)  # the handler runs here (KeyboardInterrupt, before the fix)
            super().close()

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        manager = InProcessEnvManager.from_envs([SlowToClose(seed=0), SlowToClose(seed=1)])
        with pytest.raises(KeyboardInterrupt):
            manager.close()
        assert len(closed) == 2  # the second env was closed too, then the Ctrl-C came out
        manager.close()
        assert len(closed) == 2  # idempotent
    finally:
        signal.signal(signal.SIGINT, previous)


def test_a_ctrl_c_while_workers_start_does_not_reach_them(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture
) -> None:
    # Each worker gets SIGINT the moment it exists, while its interpreter still starts:
    # it used to die with a KeyboardInterrupt traceback (or of the signal).
    import multiprocessing.context

    start = multiprocessing.context.SpawnProcess.start

    def start_then_ctrl_c(self: Any) -> None:
        start(self)
        os.kill(self.pid, signal.SIGINT)

    monkeypatch.setattr(multiprocessing.context.SpawnProcess, "start", start_then_ctrl_c)
    with SubprocessEnvManager("builtin:Simple", None, num_envs=2, seed=0) as manager:
        pids = manager.worker_pids
        manager.reset()
        manager.step([{}, {}])
    assert _wait_gone(pids, 30.0) == []
    assert "KeyboardInterrupt" not in capfd.readouterr().err
