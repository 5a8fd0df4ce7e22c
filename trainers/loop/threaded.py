"""``threaded: true``: a behavior's update runs in its own thread while the envs keep stepping.

The controller owns one `BackgroundUpdater` per threaded behavior and calls it at three
points (`TrainerController` keeps them in one place):

* ``process(traj)`` instead of ``trainer.process_trajectory(traj)``: while an update runs,
  finished trajectories wait in a queue; otherwise they are processed at once;
* ``start()`` when the update buffer is full: the update runs in a thread;
* ``poll()`` every env step (``poll(wait=True)`` before a checkpoint, at the end and on
  SIGINT/SIGTERM): once the update has returned, the acting weights are swapped and the
  queued trajectories processed.

Who touches what while an update runs (so nothing needs a lock):

* the update thread: the trainer's update buffer, the trained variables (optimizer, critic,
  actor ``policy/...``), reward-signal networks, the stats reporter (which has its own lock);
* the controller thread: env stepping, inference with the **acting copy** of the actor
  (``acting/...``, `trainers.policy._ActingCopy`), trajectory assembly, episode stats.
  Trajectories are not processed (no value estimates, no normalizer update, nothing
  appended to the buffer the update is reading) until the update has returned.

The swap is ``Policy.sync_acting_weights``: one ``sess.run`` of a group of assigns after
the update thread has finished, so inference acts with the weights of policy version v
for the whole update v -> v+1 and never with a mix.

On-policy rule: trajectories acted during update v -> v+1 carry the log-probabilities of
version v and are **used** (as in ML-Agents), in the next update (v+1 -> v+2). PPO's ratio
divides by the recorded log-probabilities of the policy that acted, so it stays an
unbiased importance ratio; the clip bounds how far a lag of one version can pull it.
Dropping them would throw away exactly the env steps that threading gains (with updates
taking 30 % of the loop, 30 % of the experience). Their share is reported per update as
``Policy/Lagged Experience Fraction`` (experiences in the update acted by an older version).
"""
from __future__ import annotations

import sys
import threading
import time
from typing import List, Optional

from trainers.loop.trajectory import Trajectory
from trainers.trainer import Trainer

#: GIL switch interval while an update thread runs. The update thread holds the GIL between
#: its ``sess.run`` calls (minibatch slicing, feeds); with Python's default 5 ms the
#: controller thread, woken by an env step that takes ~1 ms, could wait that long for it.
SWITCH_INTERVAL_S = 0.0002
_running = [0, 0.005]  # updates running in this process, the interval to restore after the last


def _update_started() -> None:
    if _running[0] == 0:
        _running[1] = sys.getswitchinterval()
        sys.setswitchinterval(min(_running[1], SWITCH_INTERVAL_S))
    _running[0] += 1


def _update_finished() -> None:
    _running[0] -= 1
    if _running[0] == 0:
        sys.setswitchinterval(_running[1])


class BackgroundUpdater:
    """Runs one trainer's updates in a thread; see the module docstring."""

    def __init__(self, trainer: Trainer) -> None:
        self.trainer = trainer
        self.version = 0  # updates whose weights are in the acting copy
        self._thread: Optional[threading.Thread] = None
        self._error: Optional[BaseException] = None
        self._started = 0.0
        self._queued: List[Trajectory] = []
        self._lagged = 0  # experiences in the buffer acted by the previous version
        self.swap_seconds = 0.0  # time spent in weight swaps (the cost of the acting copy)

    @property
    def busy(self) -> bool:
        """An update is running (or finished but not yet collected by `poll`)."""
        return self._thread is not None

    def process(self, traj: Trajectory) -> None:
        """Processes ``traj`` now, or queues it until the running update returns."""
        if self._thread is None:
            self.trainer.process_trajectory(traj)
        else:
            self._queued.append(traj)

    def start(self) -> None:
        """Starts ``trainer.update()`` in a thread (the buffer is full)."""
        assert self._thread is None, "one update at a time"
        lagged = self._lagged
        self._lagged = 0
        total = self.trainer.experiences

        def run() -> None:
            try:
                self.trainer.update()
                self.trainer.stats.add_stat("Policy/Lagged Experience Fraction", lagged / max(total, 1))
            except BaseException as e:  # re-raised in the controller thread by poll()
                self._error = e

        self._started = time.perf_counter()
        _update_started()  # start() and poll() run in the controller thread only
        self._thread = threading.Thread(target=run, name=f"update-{self.trainer.behavior_name}", daemon=True)
        self._thread.start()

    def poll(self, wait: bool = False) -> Optional[float]:
        """Collects a finished update (waits for it with ``wait``): swaps the acting weights,
        processes the queued trajectories. Returns the update's wall time, or None if no
        update finished. Re-raises an exception of the update thread."""
        thread = self._thread
        if thread is None or (not wait and thread.is_alive()):
            return None
        thread.join()
        duration = time.perf_counter() - self._started
        _update_finished()
        self._thread = None
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        start = time.perf_counter()
        self.trainer.policy.sync_acting_weights()
        self.swap_seconds += time.perf_counter() - start
        self.version += 1
        queued, self._queued = self._queued, []
        for traj in queued:
            self.trainer.process_trajectory(traj)
            self._lagged += len(traj)
        return duration
