"""The LSTM update's unrolled forward and backward alone: what most of
``scripts/benchmark.py --memory``'s update time is made of, timed with less noise.

Two LSTMs (an actor-like and a critic-like one, each behind its own 128-unit dense layer)
over one PPO minibatch of the Memory benchmark: 4 packed sequences of 64 steps with
trajectory starts inside them (``reset``; ``pack_sequences: true``), memory_size 128; the
gradients of every weight, the inputs and the stored memories, in one run on the update
pool, as the PPO update runs them. With ``--padded``: PPO's default layout (each
trajectory padded to whole sequences: one memory per sequence, no resets, no masks).
With ``--masks``: BC's left-padded demo sequences (``step_mask``, one memory per
sequence) instead.

    python scripts/benchmark_lstm.py [--padded | --masks] [--rounds=21] [--against=OTHER_LSTM.py ...]

``--against`` times other versions of ``trainers/tf/lstm.py`` in the same process, in
alternating rounds (this machine's speed drifts by more than the differences between
versions), and prints each one's median ratio to the current file and the largest
difference of their results. To compare with a commit:

    git show <commit>:trainers/tf/lstm.py > /tmp/lstm_old.py
    python scripts/benchmark_lstm.py --against=/tmp/lstm_old.py
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import time
from typing import Callable, List, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

SEQUENCES, LENGTH, IN_SIZE, MEMORY_SIZE = 4, 64, 128, 128


def _load(path: str, index: int):  # type: ignore[no-untyped-def]
    """A copy of an ``lstm.py`` as its own module (it imports only ``trainers.tf``)."""
    spec = importlib.util.spec_from_file_location(f"_benchmarked_lstm_{index}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _build(path: str, index: int, mode: str) -> Tuple[Callable, int]:
    """(a call running forward and backward of both LSTMs -> every gradient, op count)."""
    from trainers.tf import tf
    from trainers.tf.session import UPDATE_POOL, FastCallable, make_session

    lstm = _load(path, index)
    graph = tf.Graph()
    with graph.as_default():
        tf.set_random_seed(0)
        rows = SEQUENCES * LENGTH
        x = tf.placeholder(tf.float32, [rows, IN_SIZE])
        flags = tf.placeholder(tf.float32, [rows])
        memory = tf.placeholder(tf.float32, [rows if mode == "resets" else SEQUENCES, MEMORY_SIZE])
        losses = []
        for name in ("actor", "critic"):
            with tf.variable_scope(name):
                hidden = tf.tanh(tf.matmul(x, tf.get_variable("dense", [IN_SIZE, IN_SIZE])))
                if mode == "masks":
                    out, final = lstm.lstm_sequences(hidden, memory, LENGTH, MEMORY_SIZE, "lstm", step_mask=flags)
                elif mode == "resets":
                    out, final = lstm.lstm_sequences(hidden, memory, LENGTH, MEMORY_SIZE, "lstm", reset=flags)
                else:  # padded: the flags are fed, unused
                    out, final = lstm.lstm_sequences(hidden, memory, LENGTH, MEMORY_SIZE, "lstm")
                losses.append(tf.reduce_sum(out * out) + tf.reduce_sum(final))
        loss = tf.add_n(losses)
        grads = tf.gradients(loss, tf.trainable_variables() + [x, memory])
        # As a recurrent policy's session: Grappler off (see make_session_config).
        session = make_session(graph, graph_rewrites=False)
        session.run(tf.global_variables_initializer())
    call = FastCallable(session, grads + [loss], [x, memory, flags], pool=UPDATE_POOL)
    return call, len(graph.get_operations())


def _inputs(mode: str) -> List[np.ndarray]:
    rng = np.random.default_rng(0)
    rows = SEQUENCES * LENGTH
    x = rng.standard_normal((rows, IN_SIZE)).astype(np.float32)
    if mode == "padded":
        flags = np.ones(rows, np.float32)
        memory = 0.3 * rng.standard_normal((SEQUENCES, MEMORY_SIZE)).astype(np.float32)
    elif mode == "masks":  # left padding of two episodes' first sequences
        flags = np.ones(rows, np.float32)
        flags[:10] = 0.0
        flags[LENGTH : LENGTH + 30] = 0.0
        memory = 0.3 * rng.standard_normal((SEQUENCES, MEMORY_SIZE)).astype(np.float32)
    else:  # every sequence starts from its row; ~3% of the rows start a trajectory
        flags = (rng.random(rows) < 0.03).astype(np.float32)
        flags[::LENGTH] = 1.0
        memory = 0.3 * rng.standard_normal((rows, MEMORY_SIZE)).astype(np.float32)
    return [x, memory, flags]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    layout = parser.add_mutually_exclusive_group()
    layout.add_argument("--masks", action="store_true", help="step masks (BC's demo sequences) instead of resets")
    layout.add_argument("--padded", action="store_true", help="PPO's default layout: no resets, no masks")
    parser.add_argument("--rounds", type=int, default=21, help="timed rounds per version (40 calls each)")
    parser.add_argument("--against", action="append", default=[], help="another lstm.py to time beside this one")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    for path in args.against:
        if not os.path.isfile(path):
            parser.error(f"--against: no such file: {path}")
    paths = [os.path.join(ROOT, "trainers", "tf", "lstm.py")] + list(args.against)
    mode = "masks" if args.masks else "padded" if args.padded else "resets"
    calls = [_build(path, i, mode) for i, path in enumerate(paths)]
    inputs = _inputs(mode)
    results = []
    for call, _ in calls:
        for _ in range(30):  # the first calls build the executor and warm the pool's threads
            call(*inputs)
        results.append(np.concatenate([np.ravel(a) for a in call(*inputs)]))
    times: List[List[float]] = [[] for _ in calls]
    for _ in range(args.rounds):
        for k, (call, _) in enumerate(calls):
            start = time.perf_counter()
            for _ in range(40):
                call(*inputs)
            times[k].append((time.perf_counter() - start) / 40)
    kind = {"masks": "step masks", "resets": "packed, resets", "padded": "padded: no resets, no masks"}[mode]
    print(f"Two LSTMs (memory_size {MEMORY_SIZE}), {SEQUENCES} sequences of {LENGTH} ({kind}), forward and backward:")
    scale = float(np.abs(results[0]).max())
    for k, path in enumerate(paths):
        line = (
            f"  {os.path.relpath(path, ROOT) if k == 0 else path}: {1e3 * min(times[k]):.2f} ms a call "
            f"(median {1e3 * statistics.median(times[k]):.2f}), {calls[k][1]} ops in the graph"
        )
        if k:
            ratio = statistics.median(a / b for a, b in zip(times[k], times[0]))
            diff = float(np.abs(results[k] - results[0]).max())
            line += f"; {ratio:.3f}x this file's time (median of rounds), results differ by {diff:.3g} (scale {scale:.3g})"
        print(line)


if __name__ == "__main__":
    main()
