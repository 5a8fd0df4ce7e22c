"""Cluster runs through TensorFlow's own distributed runtime (``ClusterSpec`` + gRPC servers).

Who runs what:

* **Workers** (``trainer-learn --worker --cluster=<file> --task-index=<i>``) run a
  ``tf.distribute.Server`` of job ``worker`` and nothing else: they execute the towers the
  chief places on ``/job:worker/replica:0/task:<i>/device:GPU:<k>`` (or ``CPU:<k>``), and
  serve until the chief ends them (a shared queue on their CPU) or they are interrupted.
* **The chief** (``trainer-learn <config> --cluster=<file>``) runs a server (job
  ``localhost``, see CHIEF_JOB; its GPUs hidden: it holds the variables on its CPU), steps
  the environments, builds the one update graph with one tower per worker device, and
  owns two sessions on that graph:

  - the **update session** targets the chief's server; every minibatch is still one run
    of the tower graph. Every variable is pinned on the chief's CPU: each update run
    ships the weights and its shard to every tower and the towers' gradients back, and
    averages and applies them on the chief.
  - the **local session** (a plain in-process session, ``place_pruned_graph`` so the
    worker devices of the towers never need placing) runs everything per env step:
    inference, value estimates, reward-signal evaluation, normalizer updates, BC and
    checkpoints. A run through the distributed master costs milliseconds even when every
    op is local, a hundred times a small MLP's run in a local session (README, "Figures
    behind choices in the code"), which per-step inference must not pay.

  The local session is the working copy; ``ClusterLink.push`` copies every global variable
  into the update session before an update and ``ClusterLink.pull`` copies them back after
  it (both on the chief: no network). Checkpoints are written from the local session, so a
  run resumes with another cluster, or none, unchanged.
"""
from __future__ import annotations

import os
import re
import signal
import socket
import sys
import time
from typing import Dict, List, Optional, Sequence, Tuple

from trainers.exceptions import ClusterError, WorkerLostError
from trainers.config import ClusterSettings
from trainers.tf import tf
from trainers.tf.session import FastCallable
from trainers.tf.towers import VARIABLE_OPS

# The chief's job is named "localhost", the job of every in-process session: its CPU is
# then the same device name, /job:localhost/replica:0/task:0/device:CPU:0, for the
# distributed master and for the chief's local session, and the variables can be pinned
# there for both (an explicit /job:chief device cannot be placed by a local session).
CHIEF_JOB = "localhost"
CHIEF_CPU = f"/job:{CHIEF_JOB}/replica:0/task:0/device:CPU:0"
WORKER_JOB = "worker"
_SHUTDOWN_QUEUE = "trainer_learn_shutdown"
_TASK = re.compile(r"/job:worker/replica:\d+/task:(\d+)")


def cluster_spec(settings: ClusterSettings) -> tf.train.ClusterSpec:
    return tf.train.ClusterSpec({CHIEF_JOB: [settings.chief], WORKER_JOB: list(settings.workers)})


def worker_device(task: int, device: str) -> str:
    """``(1, "GPU:3")`` -> ``/job:worker/replica:0/task:1/device:GPU:3``."""
    return f"/job:{WORKER_JOB}/replica:0/task:{task}/device:{device}"


def _server_config(devices: Sequence[str], hide_gpus: bool = False) -> tf.ConfigProto:
    cpus = 1 + max((int(d.split(":")[1]) for d in devices if d.startswith("CPU:")), default=0)
    count = {"CPU": cpus}
    if hide_gpus:
        count["GPU"] = 0
    config = tf.ConfigProto(device_count=count, intra_op_parallelism_threads=1)
    config.gpu_options.allow_growth = True
    return config


# A process's servers cannot be stopped (TF has no in-process shutdown), so one chief
# process reuses its server for later runs with the same cluster (tests, --resume).
_SERVERS: Dict[Tuple[str, str, int], tf.distribute.Server] = {}


def _start_server(settings: ClusterSettings, job: str, task: int, config: tf.ConfigProto) -> tf.distribute.Server:
    spec = cluster_spec(settings)
    key = (str(spec.as_dict()), job, task)
    if key not in _SERVERS:
        address = settings.chief if job == CHIEF_JOB else settings.workers[task]
        try:
            _SERVERS[key] = tf.distribute.Server(spec, job_name=job, task_index=task, config=config, start=True)
        except (tf.errors.OpError, ValueError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ClusterError(f"cannot start the {job} server on {address} ({first}); is the port in use?") from None
    return _SERVERS[key]


def answers(address: str, timeout: float = 1.0) -> bool:
    """Whether something accepts TCP connections at ``host:port`` (a started server does)."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return True
    except OSError:
        return False


def wait_for_workers(settings: ClusterSettings, timeout: float) -> None:
    """Polls every worker until all answer; after ``timeout`` s one error naming the others."""
    deadline = time.monotonic() + timeout
    missing = list(range(len(settings.workers)))
    while True:
        missing = [i for i in missing if not answers(settings.workers[i], timeout=0.5)]
        if not missing or time.monotonic() >= deadline:
            break
        time.sleep(0.2)
    if missing:
        names = ", ".join(f"{i} ({settings.workers[i]})" for i in missing)
        raise ClusterError(
            f"cluster: no answer within {timeout:g} s from worker{'s' if len(missing) > 1 else ''} {names}; "
            "start each with: trainer-learn --worker --cluster=<file> --task-index=<i>"
        )


class Chief:
    """The chief's side of a cluster: its server and the tower devices found on the workers."""

    def __init__(self, settings: ClusterSettings) -> None:
        self.settings = settings
        wait_for_workers(settings, settings.startup_timeout)
        self.server = _start_server(settings, CHIEF_JOB, 0, _server_config((), hide_gpus=True))
        self.target: str = self.server.target
        with tf.Session(self.target, graph=tf.Graph(), config=tf.ConfigProto()) as probe:
            found = [d.name for d in probe.list_devices()]
        self.tower_devices: List[str] = self._resolve(found)

    def _resolve(self, found: Sequence[str]) -> List[str]:
        """Tower devices, worker by worker: the listed ones (checked), else its GPUs, else CPU:0."""
        towers: List[str] = []
        for task, address in enumerate(self.settings.workers):
            prefix = f"/job:{WORKER_JOB}/replica:0/task:{task}/device:"
            have = [name[len(prefix):] for name in found if name.startswith(prefix)]
            have = [d for d in have if d.split(":")[0] in ("CPU", "GPU")]
            wanted = self.settings.worker_devices[task] if self.settings.worker_devices else None
            if wanted is None:
                gpus = sorted((d for d in have if d.startswith("GPU:")), key=lambda d: int(d.split(":")[1]))
                wanted = tuple(gpus) or ("CPU:0",)
            for d in wanted:
                if d not in have:
                    raise ClusterError(
                        f"cluster: worker {task} ({address}) has no device {d} (it has: {', '.join(have) or 'none'})"
                    )
            towers.extend(worker_device(task, d) for d in wanted)
        return towers

    def end_workers(self) -> List[int]:
        """Tells every worker that still answers to stop serving; returns their indices."""
        alive = [i for i, a in enumerate(self.settings.workers) if answers(a, timeout=0.5)]
        if not alive:
            return []
        graph = tf.Graph()
        with graph.as_default():
            enqueues = []
            for i in alive:
                with tf.device(worker_device(i, "CPU:0")):
                    queue = tf.FIFOQueue(1, tf.int32, shared_name=_SHUTDOWN_QUEUE, name=f"shutdown_{i}")
                    enqueues.append(queue.enqueue(1))
        filters = [f"/job:{CHIEF_JOB}/task:0"] + [f"/job:{WORKER_JOB}/task:{i}" for i in alive]
        config = tf.ConfigProto(device_filters=filters)
        try:
            with tf.Session(self.target, graph=graph, config=config) as session:
                session.run(enqueues, options=tf.RunOptions(timeout_in_ms=5000))
        except tf.errors.OpError:
            return []  # a worker vanished in between: it has stopped anyway
        return alive


def serve_worker(settings: ClusterSettings, task: int) -> int:
    """Runs worker ``task``'s server until the chief ends it or SIGINT/SIGTERM; returns 0."""
    if not 0 <= task < len(settings.workers):
        raise ClusterError(f"--task-index={task}: the cluster has workers 0..{len(settings.workers) - 1}")
    devices = settings.worker_devices[task] if settings.worker_devices else ()
    server = _start_server(settings, WORKER_JOB, task, _server_config(devices))
    graph = tf.Graph()
    with graph.as_default(), tf.device(worker_device(task, "CPU:0")):
        dequeue = tf.FIFOQueue(1, tf.int32, shared_name=_SHUTDOWN_QUEUE, name="shutdown").dequeue()
    # Only its own devices: this session must not wait for the chief or the other workers.
    config = tf.ConfigProto(device_filters=[f"/job:{WORKER_JOB}/task:{task}"])

    # Signals only set a flag: an exception raised inside TF's run call would surface as a
    # TF error with a traceback. The loop looks at the flag at least once a second.
    stop: List[int] = []
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda received, frame: stop.append(received))
    session = tf.Session(server.target, graph=graph, config=config)
    names = [d.name.rsplit("device:", 1)[1] for d in session.list_devices()]
    print(
        f"[INFO] worker {task} serving at {settings.workers[task]} (chief {settings.chief}); "
        f"devices: {', '.join(names)}",
        flush=True,
    )
    while not stop:
        try:
            session.run(dequeue, options=tf.RunOptions(timeout_in_ms=1000))
        except tf.errors.DeadlineExceededError:
            continue
        print(f"[INFO] worker {task}: ended by the chief", flush=True)
        time.sleep(1.0)  # lets the chief close its session before this server goes away
        return 0
    print(f"[INFO] worker {task}: interrupted", flush=True)
    return 0


def exit_now(code: int) -> None:
    """Ends a process that runs a server: a live gRPC server can hang interpreter shutdown."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


# Handles of update sessions abandoned because a worker went away (see `UpdateSession.close`).
_ABANDONED_SESSIONS: list = []


class UpdateSession(tf.Session):
    """The chief's session on its own server; any failed run becomes a ``ClusterError``
    naming the worker(s) that stopped answering (``WorkerLostError``), so every caller
    (``FastCallable`` included, which goes through ``_make_callable_from_options``) gets
    one clear error the controller turns into a checkpoint and one line."""

    # tf.Session's own attributes, set by its __init__ and reset by `close` (declared here:
    # mypy cannot infer them from TensorFlow's source when a subclass assigns them).
    _session: Optional[object]  # the native session handle; None once closed
    _closed: bool

    def __init__(self, target: str, graph: tf.Graph, config: tf.ConfigProto, workers: Sequence[str]) -> None:
        super().__init__(target, graph=graph, config=config)
        self.workers = tuple(workers)
        self.lost_worker = False  # set when a run failed because a worker went away

    def _guard(self, call, *args, **kwargs):
        try:
            return call(*args, **kwargs)
        except tf.errors.OpError as exc:
            error = lost_worker(exc, self.workers)
            if error is exc:
                raise
            self.lost_worker = True
            raise error from None

    def close(self) -> None:
        """Closes the session, unless a worker is gone: closing deregisters the graph on
        every worker and TensorFlow waits for a dead one without a deadline (this runs from
        ``__del__`` too, at any garbage collection). Such a session is abandoned instead:
        its handle is kept, never freed, for the rest of the process."""
        if self._session is not None and not self._closed:
            if self.lost_worker or not all(answers(w, 0.5) for w in self.workers):
                self._closed = True
                _ABANDONED_SESSIONS.append(self._session)
                self._session = None
                return
        super().close()

    def run(self, *args, **kwargs):  # noqa: D102 (tf.Session.run)
        return self._guard(super().run, *args, **kwargs)

    def _make_callable_from_options(self, callable_options):  # noqa: D102
        # Making a callable registers its graph with every worker it uses: guarded too.
        call = self._guard(super()._make_callable_from_options, callable_options)
        return lambda *args, **kwargs: self._guard(call, *args, **kwargs)


# What a worker that went away (or a network that failed) looks like to the chief.
_CONNECTION_ERRORS = (
    tf.errors.UnavailableError,
    tf.errors.AbortedError,
    tf.errors.CancelledError,
    tf.errors.DeadlineExceededError,
    tf.errors.InternalError,
    tf.errors.UnknownError,
)


def lost_worker(exc: tf.errors.OpError, workers: Sequence[str]) -> Exception:
    """The error naming the worker(s) that stopped answering (from the message, else found
    by probing every worker); any other error (our bug) is returned unchanged."""
    if not isinstance(exc, _CONNECTION_ERRORS):
        return exc
    named = sorted({int(m) for m in _TASK.findall(str(exc))})
    tasks = [t for t in named if t < len(workers) and not answers(workers[t], 0.5)]
    if not tasks:
        tasks = [i for i, a in enumerate(workers) if not answers(a, 0.5)]
    if not tasks:
        return exc
    names = ", ".join(f"{t} ({workers[t]})" for t in tasks)
    return WorkerLostError(f"cluster worker {names} stopped answering during an update")


class ClusterLink:
    """The update session on the chief's server, and the copies between it and the local one.

    Build it in the graph after every variable exists and before ``graph.finalize()``.
    When a worker is lost the local session keeps the weights of the last completed update
    (``pull`` never ran for the failed one), so the checkpoint saved then is consistent.
    """

    def __init__(self, graph: tf.Graph, local_session: tf.Session, target: str, workers: Sequence[str]) -> None:
        # Every variable on the chief's CPU. Left unplaced, a variable would be placed with
        # the first tower that reads it (a resource is colocated with its readers).
        for op in graph.get_operations():
            if op.type in VARIABLE_OPS:
                op._set_device(CHIEF_CPU)  # noqa: SLF001 (before any session has seen the graph)
        with graph.as_default(), tf.name_scope("cluster_mirror"):
            variables = tf.global_variables()
            reads = [v.read_value() if hasattr(v, "read_value") else tf.identity(v) for v in variables]
            feeds = [tf.placeholder(v.dtype.base_dtype, v.shape) for v in variables]
            assign = tf.group(*[tf.assign(v, f) for v, f in zip(variables, feeds)])
        config = tf.ConfigProto()
        # Two behaviors (two graphs) on one chief server must not share variables by name.
        config.isolate_session_state = True
        self.session = UpdateSession(target, graph, config, workers)
        self._local_read = FastCallable(local_session, reads, [])
        self._local_write = FastCallable(local_session, [], feeds, [assign])
        self._cluster_read = FastCallable(self.session, reads, [])
        self._cluster_write = FastCallable(self.session, [], feeds, [assign])

    def push(self) -> None:
        """Local session -> update session (every global variable)."""
        self._cluster_write(*self._local_read())

    def pull(self) -> None:
        """Update session -> local session."""
        self._local_write(*self._cluster_read())

    def close(self) -> None:
        """Closes the update session (abandoned instead if a worker is gone)."""
        self.session.close()
