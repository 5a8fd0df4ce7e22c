"""Loopback clusters for tests and benchmarks: worker processes on 127.0.0.1, free ports.

Every worker process is started with ``PR_SET_PDEATHSIG`` (Linux) so that it dies with the
process that started it, and ``loopback_workers`` kills and reaps whatever is left when it
exits: no orphans even when a test fails or is interrupted.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Iterator, List, Optional, Sequence

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def free_ports(n: int) -> List[int]:
    """``n`` distinct TCP ports that were free on 127.0.0.1 a moment ago."""
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def write_cluster_file(path: str, num_workers: int, worker_devices: Optional[Sequence[Sequence[str]]] = None) -> dict:
    ports = free_ports(num_workers + 1)
    doc = {"chief": f"127.0.0.1:{ports[0]}", "workers": [f"127.0.0.1:{p}" for p in ports[1:]]}
    if worker_devices is not None:
        doc["worker_devices"] = [list(d) for d in worker_devices]
    with open(path, "w") as f:
        yaml.safe_dump(doc, f)
    return doc


def _die_with_parent() -> None:
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


class Worker:
    """One ``trainer-learn --worker`` process; its output is collected in ``lines``."""

    def __init__(self, cluster_file: str, task: int) -> None:
        env = dict(os.environ, PYTHONPATH=ROOT, PYTHONUNBUFFERED="1")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "trainers.learn", "--worker", f"--cluster={cluster_file}", f"--task-index={task}"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            preexec_fn=_die_with_parent,
        )
        self.lines: List[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_serving(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any("serving at" in line for line in self.lines):
                return
            if self.process.poll() is not None:
                break
            time.sleep(0.1)
        raise RuntimeError(f"worker did not start: {self.lines[-5:]}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=30)
        self._reader.join(timeout=5)


@contextlib.contextmanager
def loopback_workers(cluster_file: str, num_workers: int, timeout: float = 120.0) -> Iterator[List[Worker]]:
    """Starts workers 0..n-1 of ``cluster_file`` and waits until each serves; kills all at exit."""
    workers: List[Worker] = []
    try:
        for task in range(num_workers):
            workers.append(Worker(cluster_file, task))
        for w in workers:
            w.wait_serving(timeout)
        yield workers
    finally:
        for w in workers:
            w.stop()
