"""Session factory: one graph and one session per behavior, devices made real.

``ConfigProto(device_count={"CPU": n})`` gives virtual devices ``/cpu:0..n-1`` on any
machine, so tower code is exercised on CPU-only machines exactly as on GPUs.
"""
from __future__ import annotations

import os
import time
from typing import Callable, Sequence

import numpy as np
from tensorflow.core.protobuf import rewriter_config_pb2

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
#: Updates: the caller's thread if the callable's first calls there prove it cheap, else
#: the pool (`FastCallable._tune`). Both give the same numbers; only the speed differs,
#: and by a lot either way: the caller's thread updates a small PPO net faster (and the
#: pool's idle threads no longer spin beside the env and inference), while the pool runs
#: SAC's update (independent Q, value and policy branches) and an LSTM update faster
#: (figures: README, "Figures behind choices in the code").
AUTO_POOL = -2


def _one_local_cpu(devices: Sequence[str]) -> bool:
    """Whether ``devices`` is one CPU device of this process (no GPU, no cluster job)."""
    return len(devices) == 1 and count_cpu_devices(devices) == 1 and not any(
        "gpu" in d.lower() or d.startswith("/job:") for d in devices
    )


def make_session_config(
    devices: Sequence[str] = ("/cpu:0",), cpu_only: bool = False, graph_rewrites: bool = True, inline: bool = False
) -> tf.ConfigProto:
    """A ConfigProto with enough virtual CPU devices for ``devices``.

    Two ways to run, chosen per callable (``FastCallable(..., pool=...)``):

    * ``CALLER_THREAD`` for inference and value estimates: every op runs in the calling
      thread. RL networks are tiny and handing each op to a pool thread costs more than
      the op, worst of all on a loaded machine where that thread must first be scheduled
      (a 2x64 MLP's inference call costs several times more on a pool: README, "Figures
      behind choices in the code").
    * ``UPDATE_POOL`` for large updates: an inter-op pool of ``max(2, 2 x devices)``
      threads (at most the number of cores for CPU devices), so independent branches
      (towers, the policy/critic and each reward signal's network) run concurrently;
      measured in scripts/benchmark.py --signals and scripts/benchmark_towers.py.
      Updates ask for ``AUTO_POOL``: the caller's thread when their first calls there
      prove cheap, else this pool.

    Intra-op parallelism stays at one thread: the matrices are small.

    ``inline=True``, for a graph whose every run belongs in the caller's thread (small
    feed-forward networks; the caller decides: `trainers.policy`), on one local CPU
    device: TensorFlow's single-threaded executor runs the session's graphs, every run in
    the caller's thread whatever the callable asks for. It skips the general executor's
    per-op bookkeeping for scheduling ops concurrently, so inference and small updates
    cost less (README, Benchmarks), with the same results (the same kernels, in a fixed
    order). It refuses graphs with TF1 control flow (Switch/Merge) or reference-typed
    variables, neither of which the trainers build, and runs nothing concurrently, so
    it is no choice for updates that the pool runs faster (SAC, LSTM, convolutions).

    ``graph_rewrites=False`` turns Grappler off. For recurrent policies: the update graph
    unrolls ``sequence_length`` LSTM steps of the actor and the critic, forward and
    backward, and Grappler spent seconds optimising it at the first update without making
    later updates any faster. It also sets the session's classic graph optimizer to L0 (no
    constant folding, no common-subexpression elimination): the executor of that update
    builds faster (constant folding was a large part of the build), and its runs, the
    inference step and the critic's trajectory values are as fast as with L1 (figures:
    README, "Figures behind choices in the code").
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
    # Grappler's remapper fuses MatMul + bias + activation into oneDNN's fused matmul,
    # whose fixed cost per call dwarfs the arithmetic of RL-sized layers (CartPole's
    # inference and the whole CartPole benchmark ran much slower fused). Unfused was as
    # fast or faster everywhere we measured: PPO updates at 64, 256 and 512 hidden units,
    # a conv encoder, SAC's 256x256 update (figures: README, "Figures behind choices in
    # the code").
    config.graph_options.rewrite_options.remapping = rewriter_config_pb2.RewriterConfig.OFF
    # Grappler runs once per callable (inference, values, update), when it is made: start-up
    # time. Its MLIR ("tfg") passes, its memory optimizer (for graphs too large for the
    # device) and, on CPU, its layout optimizer (NCHW for GPU convolutions) change nothing
    # in these graphs; the passes that make later runs faster (pruning the identities of
    # variable reads, common-subgraph elimination, the dependency optimizer) stay. Not one
    # round instead of two: the second changes the float result of a GAIL update in its
    # last digits. Runs and results are the same with or without the three, and the
    # callables are made faster (README, Benchmarks).
    rewrites = config.graph_options.rewrite_options
    rewrites.disable_tfg_optimizer = True
    rewrites.memory_optimization = rewriter_config_pb2.RewriterConfig.NO_MEM_OPT
    if not any("gpu" in d.lower() for d in devices):
        rewrites.layout_optimizer = rewriter_config_pb2.RewriterConfig.OFF
    if not graph_rewrites:
        config.graph_options.rewrite_options.disable_meta_optimizer = True
        config.graph_options.optimizer_options.opt_level = tf.OptimizerOptions.L0
    if inline and _one_local_cpu(devices):
        config.experimental.executor_type = SINGLE_THREADED_EXECUTOR
    if any(d.startswith("/job:") for d in devices):
        # Cluster towers (trainers/tf/cluster.py): this local session runs only the
        # inference side; the towers on other jobs' devices are never placed here.
        config.graph_options.place_pruned_graph = True
    return config


SINGLE_THREADED_EXECUTOR = "SINGLE_THREADED_EXECUTOR"


def make_session(
    graph: tf.Graph,
    devices: Sequence[str] = ("/cpu:0",),
    cpu_only: bool = False,
    graph_rewrites: bool = True,
    inline: bool = False,
) -> tf.Session:
    """A session on ``graph`` able to place ops on every device in ``devices``
    (``graph_rewrites``, ``inline``: see `make_session_config`)."""
    return tf.Session(graph=graph, config=make_session_config(devices, cpu_only, graph_rewrites, inline))


def runs_inline(session: tf.Session) -> bool:
    """Whether every run of ``session`` is in the caller's thread (``inline`` above)."""
    config = getattr(session, "_config", None)
    return config is not None and config.experimental.executor_type == SINGLE_THREADED_EXECUTOR


def _direct(tf_callable: object) -> Callable[..., list]:
    """``tf_callable`` (a ``BaseSession._Callable``) as a function of the feed arrays that
    calls TensorFlow's C entry point itself; the wrapper when its internals are not the
    ones expected (another TensorFlow version)."""
    try:
        from tensorflow.python.client import pywrap_tf_session

        run = pywrap_tf_session.TF_SessionRunCallable
        session = tf_callable._session  # type: ignore[attr-defined]
        handle = tf_callable._handle  # type: ignore[attr-defined]
        session._session  # the C session: read at each call (None once the session is deleted)
    except AttributeError:
        return tf_callable  # type: ignore[return-value]

    def call(*arrays: np.ndarray) -> list:
        return run(session._session, handle, arrays, None)

    # The wrapper releases the callable's handle when it is collected: it lives as long
    # as this function does.
    call.tf_callable = tf_callable  # type: ignore[attr-defined]
    return call


#: Ops that cost next to nothing per run (no kernel work): not counted by `_costly_op_count`.
_FREE_OPS = frozenset(
    {"Const", "VarHandleOp", "ReadVariableOp", "Identity", "IdentityN", "NoOp", "Placeholder", "Shape"}
)


def _costly_op_count(
    fetches: Sequence[tf.Tensor], feeds: Sequence[tf.Tensor], targets: Sequence[tf.Operation]
) -> int:
    """Ops a run of these fetches and targets executes (what the session prunes the graph
    to: everything they depend on, stopping at fed tensors), less the `_FREE_OPS`."""
    fed = {t.name for t in feeds}
    stack = [t.op for t in fetches if t.name not in fed] + list(targets)
    seen = set()
    while stack:
        op = stack.pop()
        if op in seen:
            continue
        seen.add(op)
        stack.extend(t.op for t in op.inputs if t.name not in fed)
        stack.extend(op.control_inputs)
    return sum(op.type not in _FREE_OPS for op in seen)


class FastCallable:
    """A compiled step of a session: fixed feeds and fetches, called with numpy arrays.

    ``Session.make_callable(fetches, feed_list)`` in TF 2.x delegates to ``Session.run``
    and its Python feed handling whenever a feed list is given. A callable made from
    ``CallableOptions`` (the route TF1 Keras took) skips that, at a fraction of the cost
    of a small MLP's step (README, "Figures behind choices in the code"), which is what
    makes per-env-step inference and per-minibatch updates cheap. Counted in ``calls`` so
    tests can prove "one run per minibatch".

    The callable is run through TensorFlow's C entry point directly, not through the
    Python wrapper that ``_make_callable_from_options`` returns (which handles the
    ``run_metadata`` keyword we never pass): one Python frame less on every inference step.
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
            return _direct(session._make_callable_from_options(options))

        self._dtypes = [t.dtype.as_numpy_dtype for t in feeds]
        self.calls = 0
        if pool == AUTO_POOL and getattr(session, "sess_str", None):
            pool = UPDATE_POOL  # a cluster session: its runs are remote, nothing to tune
        if runs_inline(session):
            pool = CALLER_THREAD  # where its runs go anyway: nothing to tune
        #: The pool in use; for AUTO_POOL, known once the trial calls are done.
        self.pool = pool
        self._trials: list = []
        if pool == AUTO_POOL and _costly_op_count(fetches, feeds, targets) > self.POOL_UNTRIED_OPS:
            self.pool = pool = UPDATE_POOL  # too many ops to be cheap anywhere: no trial
        if pool == AUTO_POOL:
            self._make = make  # the pool's callable is built only if chosen
            self._in_caller = make(CALLER_THREAD)
            self._callable = self._tune
        else:
            self._callable = make(pool)

    #: AUTO_POOL: untimed calls first (the first builds the executor; caches warm up).
    WARMUP_CALLS = 4
    #: AUTO_POOL: then timed calls in the caller's thread.
    TRIAL_CALLS = 8
    #: AUTO_POOL: a call whose median trial time is below this stays in the caller's thread.
    CALLER_LIMIT_S = 1.5e-3
    #: AUTO_POOL: a call with more ops than this (`_costly_op_count`) goes to the pool
    #: untried. Each such op costs at least ~1 us in the caller's thread, so such a call
    #: cannot come in under `CALLER_LIMIT_S`: the trial could only pick the pool, after
    #: building an executor it then drops (costly for the LSTM update's ~1,800 ops).
    POOL_UNTRIED_OPS = 1500

    def _tune(self, *arrays: np.ndarray) -> list:
        """Runs the first calls in the caller's thread, timing them; a call that proved
        cheap stays there, a costly one moves to the pool for good.

        Why a limit and not a race of the two: the caller's thread wins only where the
        call is small (CartPole's PPO update: the pool's hand-offs cost more than the
        ops), the pool wins where it is large (SAC's update and visual PPO; LSTM PPO by a
        little, since its backward pass is hand-written). Timing both on their first calls
        often picked the slower one: early calls are noisy and the pool's are slow until
        each of its threads has warmed up (its per-thread oneDNN caches). Figures: README,
        "Figures behind choices in the code".
        """
        start = time.perf_counter()
        result = self._in_caller(*arrays)
        if self.calls > self.WARMUP_CALLS:
            self._trials.append(time.perf_counter() - start)
        if len(self._trials) >= self.TRIAL_CALLS:
            if float(np.median(self._trials)) < self.CALLER_LIMIT_S:
                self.pool, self._callable = CALLER_THREAD, self._in_caller
            else:
                self.pool, self._callable = UPDATE_POOL, self._make(UPDATE_POOL)
            del self._make, self._in_caller
        return result

    def __call__(self, *args: object) -> list:
        arrays = [
            a if isinstance(a, np.ndarray) and a.dtype == d else np.asarray(a, dtype=d)
            for a, d in zip(args, self._dtypes)
        ]
        self.calls += 1
        return self._callable(*arrays)
