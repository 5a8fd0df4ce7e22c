"""Session factory: one graph and one session per behavior, devices made real.

``ConfigProto(device_count={"CPU": n})`` gives virtual devices ``/cpu:0..n-1`` on any
machine, so tower code is exercised on CPU-only machines exactly as on GPUs.
"""
from __future__ import annotations

from typing import Sequence

from trainers.tf import tf


def count_cpu_devices(devices: Sequence[str]) -> int:
    """How many virtual CPU devices the device list needs (max index + 1, at least 1)."""
    needed = 1
    for d in devices:
        low = d.lower()
        if "cpu:" in low:
            needed = max(needed, int(low.rsplit(":", 1)[1]) + 1)
    return needed


def make_session_config(devices: Sequence[str] = ("/cpu:0",), cpu_only: bool = False) -> tf.ConfigProto:
    """A ConfigProto with enough virtual CPU devices for ``devices``.

    Thread pools are kept small: the networks of RL policies are tiny and a big intra-op
    pool costs more in synchronisation than it saves (measured in scripts/benchmark.py).
    """
    device_count = {"CPU": count_cpu_devices(devices)}
    if cpu_only:
        device_count["GPU"] = 0
    config = tf.ConfigProto(
        device_count=device_count,
        intra_op_parallelism_threads=1,
        inter_op_parallelism_threads=2,
        allow_soft_placement=False,
    )
    config.gpu_options.allow_growth = True
    return config


def make_session(graph: tf.Graph, devices: Sequence[str] = ("/cpu:0",), cpu_only: bool = False) -> tf.Session:
    """A session on ``graph`` able to place ops on every device in ``devices``."""
    return tf.Session(graph=graph, config=make_session_config(devices, cpu_only))
