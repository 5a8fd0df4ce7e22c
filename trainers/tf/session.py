"""Session factory: one graph and one session per behavior, devices made real.

``ConfigProto(device_count={"CPU": n})`` gives virtual devices ``/cpu:0..n-1`` on any
machine, so tower code is exercised on CPU-only machines exactly as on GPUs.
"""
from __future__ import annotations

import os
from typing import Sequence

import numpy as np

from trainers.tf import tf


def count_cpu_devices(devices: Sequence[str]) -> int:
    """How many virtual CPU devices the device list needs (max index + 1, at least 1)."""
    needed = 1
    for d in devices:
        low = d.lower()
        if "cpu:" in low and not low.startswith("/job:"):  # a cluster worker's device is not ours
            needed = max(needed, int(low.rsplit(":", 1)[1]) + 1)
    return needed


#: The session's one inter-op pool, used by runs that have independent branches to
#: overlap (updates); latency-bound runs (inference) execute in the caller's thread.
UPDATE_POOL = 0
CALLER_THREAD = -1
#: Updates: whichever of the two above runs this callable faster, timed on its first calls
#: (`FastCallable`). Both give the same numbers; only the speed differs, and by a lot
#: either way: the caller's thread updates a small PPO net 1.6x faster (CartPole's 2x64,
#: 413 -> 268 us a minibatch, and the pool's idle threads no longer spin beside the env
#: and inference), while the pool runs SAC's update (independent Q, value and policy
#: branches) 1.8x faster and an LSTM update (actor and critic unrolls) 2.2x faster.
AUTO_POOL = -2


def make_session_config(
    devices: Sequence[str] = ("/cpu:0",), cpu_only: bool = False, graph_rewrites: bool = True
) -> tf.ConfigProto:
    """A ConfigProto with enough virtual CPU devices for ``devices``.

    Two ways to run, chosen per callable (``FastCallable(..., pool=...)``):

    * ``CALLER_THREAD`` for inference and value estimates: every op runs in the calling
      thread. RL networks are tiny and handing each op to a pool thread costs more than
      the op, worst of all on a loaded machine where that thread must first be scheduled
      (one inference call of a 2x64 MLP on this 2-core machine: 234 us with a 1-thread
      pool, 387 us with TF's default pools; in the caller's thread about 40 us).
    * ``UPDATE_POOL`` for updates: an inter-op pool of ``max(2, 2 x devices)`` threads
      (at most the number of cores for CPU devices), so
      independent branches (towers, the policy/critic and each reward signal's network)
      run concurrently; measured in scripts/benchmark.py --signals and
      scripts/benchmark_towers.py.

    Intra-op parallelism stays at one thread: the matrices are small.

    ``graph_rewrites=False`` turns Grappler off. For recurrent policies: the update graph
    unrolls ``sequence_length`` LSTM steps of the actor and the critic, forward and
    backward, and Grappler spent ~10 s optimising it at the first update (benchmark.py
    --memory, sequence_length 64) without making later updates any faster.
    """
    device_count = {"CPU": count_cpu_devices(devices)}
    if cpu_only:
        device_count["GPU"] = 0
    config = tf.ConfigProto(
        device_count=device_count,
        intra_op_parallelism_threads=1,
        allow_soft_placement=False,
    )
    # GPU towers launch kernels concurrently; CPU towers share the machine's cores, where
    # more threads than cores only adds contention.
    threads = 2 * len(devices)
    if not any("gpu" in d.lower() for d in devices):
        threads = min(threads, os.cpu_count() or 2)
    config.session_inter_op_thread_pool.add(num_threads=max(2, threads))
    config.gpu_options.allow_growth = True
    if not graph_rewrites:
        config.graph_options.rewrite_options.disable_meta_optimizer = True
    if any(d.startswith("/job:") for d in devices):
        # Cluster towers (trainers/tf/cluster.py): this local session runs only the
        # inference side; the towers on other jobs' devices are never placed here.
        config.graph_options.place_pruned_graph = True
    return config


def make_session(
    graph: tf.Graph, devices: Sequence[str] = ("/cpu:0",), cpu_only: bool = False, graph_rewrites: bool = True
) -> tf.Session:
    """A session on ``graph`` able to place ops on every device in ``devices``
    (``graph_rewrites``: see `make_session_config`)."""
    return tf.Session(graph=graph, config=make_session_config(devices, cpu_only, graph_rewrites))


class FastCallable:
    """A compiled step of a session: fixed feeds and fetches, called with numpy arrays.

    ``Session.make_callable(fetches, feed_list)`` in TF 2.x delegates to ``Session.run``
    and its Python feed handling whenever a feed list is given (272 us for one small MLP
    step here). A callable made from ``CallableOptions`` (the route TF1 Keras took) skips
    that: 32 us for the same step, which is what makes per-env-step inference and
    per-minibatch updates cheap. Counted in ``calls`` so tests can prove "one run per
    minibatch".
    """

    def __init__(
        self,
        session: tf.Session,
        fetches: Sequence[tf.Tensor],
        feeds: Sequence[tf.Tensor],
        targets: Sequence[tf.Operation] = (),
        pool: int = CALLER_THREAD,
    ) -> None:
        """``pool``: `CALLER_THREAD`, `UPDATE_POOL` or `AUTO_POOL` (see there)."""
        from tensorflow.core.protobuf import config_pb2

        def make(pool: int):  # type: ignore[no-untyped-def]
            options = config_pb2.CallableOptions()
            options.run_options.inter_op_thread_pool = pool
            options.feed.extend(t.name for t in feeds)
            options.fetch.extend(t.name for t in fetches)
            options.target.extend(op.name for op in targets)
            return session._make_callable_from_options(options)

        self._dtypes = [t.dtype.as_numpy_dtype for t in feeds]
        self.calls = 0
        if pool == AUTO_POOL and getattr(session, "sess_str", ""):
            pool = UPDATE_POOL  # a cluster session: its runs are remote, nothing to tune
        #: The pool in use; for AUTO_POOL, known once the trial calls are done.
        self.pool = pool
        self._trials: list = []
        if pool == AUTO_POOL:
            self._candidates = [(UPDATE_POOL, make(UPDATE_POOL)), (CALLER_THREAD, make(CALLER_THREAD))]
            self._trials = [[] for _ in self._candidates]
            self._callable = self._tune
        else:
            self._callable = make(pool)

    #: AUTO_POOL: timed calls per candidate, after one untimed call each (which builds
    #: its executor).
    TRIAL_CALLS = 6

    def _tune(self, *arrays: np.ndarray) -> list:
        """Runs the call on the candidates in turn, timing them; then keeps the faster
        (least median time) for every later call."""
        import time

        turn = (self.calls - 1) % len(self._candidates)
        _, run = self._candidates[turn]
        start = time.perf_counter()
        result = run(*arrays)
        if self.calls > len(self._candidates):  # past the untimed first call of each
            self._trials[turn].append(time.perf_counter() - start)
        if all(len(t) >= self.TRIAL_CALLS for t in self._trials):
            medians = [float(np.median(t)) for t in self._trials]
            self.pool, self._callable = self._candidates[int(np.argmin(medians))]
            self._candidates = []
        return result

    def __call__(self, *args: object) -> list:
        arrays = [
            a if isinstance(a, np.ndarray) and a.dtype == d else np.asarray(a, dtype=d)
            for a, d in zip(args, self._dtypes)
        ]
        self.calls += 1
        return self._callable(*arrays)
