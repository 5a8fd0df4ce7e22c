"""What a second TensorFlow thread costs the acting thread: why ``threaded: true`` pays on
slow envs and not on fast ones.

One inference call of a CartPole-sized policy (2x64 tanh, one agent) is timed in a loop,
CPU time and wall time per call, three ways:

* alone;
* beside a thread of the same process that runs PPO-sized updates (2x64, Adam, batch 64)
  back to back, as the update thread of a threaded trainer does;
* beside a thread that only passes the GIL back and forth, without TensorFlow (SHA-256 of
  20 KB blocks, ~12 us each with the GIL released, about as often as the updates);
* beside another *process* running the same updates (the same load on the other core,
  but no shared GIL and no shared TensorFlow runtime).

    python scripts/benchmark_threads.py [--seconds=4] [--rounds=2]

Each call releases the GIL while TensorFlow runs and takes it back after, so two threads
that both call TensorFlow hand the GIL to each other hundreds of times a second; the
figures show what that costs next to the same load from another process.
"""
from __future__ import annotations

import argparse
import hashlib
import multiprocessing
import os
import sys
import threading
import time
from typing import Callable, Dict, List, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402


def _build() -> Tuple[Callable, Callable, np.ndarray, np.ndarray]:
    """(inference call, update call, one observation [1, 4], a minibatch [64, 4])."""
    from trainers.tf import tf
    from trainers.tf.layers import dense, mlp
    from trainers.tf.session import FastCallable, make_session

    graph = tf.Graph()
    with graph.as_default():
        obs = tf.placeholder(tf.float32, [None, 4])
        logits = dense(mlp(obs, 64, 2, tf.nn.tanh, "policy"), 2, "logits", gain=0.01)
        action = tf.random.categorical(logits, 1)
        batch = tf.placeholder(tf.float32, [None, 4])
        value = dense(mlp(batch, 64, 2, tf.nn.tanh, "critic"), 1, "value", gain=1.0)
        loss = tf.reduce_mean(tf.square(value))
        train = tf.train.AdamOptimizer(1e-4).minimize(loss)
        init = tf.global_variables_initializer()
    session = make_session(graph)
    session.run(init)
    inference = FastCallable(session, [action], [obs])
    update = FastCallable(session, [loss], [batch], [train])
    rng = np.random.default_rng(0)
    return inference, update, rng.normal(size=(1, 4)).astype(np.float32), rng.normal(size=(64, 4)).astype(np.float32)


def _update_process(ready: "multiprocessing.synchronize.Event", stop: "multiprocessing.synchronize.Event") -> None:
    _, update, _, batch = _build()
    for _ in range(50):
        update(batch)
    ready.set()
    while not stop.is_set():
        for _ in range(50):
            update(batch)


def _time_calls(inference: Callable, obs: np.ndarray, seconds: float) -> Tuple[float, float]:
    """(CPU us, wall us) per inference call, over ``seconds``."""
    for _ in range(500):
        inference(obs)
    calls, cpu, wall = 0, time.thread_time(), time.perf_counter()
    while time.perf_counter() - wall < seconds:
        for _ in range(500):
            inference(obs)
        calls += 500
    return (time.thread_time() - cpu) / calls * 1e6, (time.perf_counter() - wall) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    inference, update, obs, batch = _build()
    results: Dict[str, List[Tuple[float, float]]] = {
        "alone": [], "update thread": [], "hashing thread": [], "update process": []
    }
    block = bytes(20_000)
    context = multiprocessing.get_context("spawn")
    for _ in range(args.rounds):
        results["alone"].append(_time_calls(inference, obs, args.seconds))

        for name, work in (("update thread", lambda: update(batch)), ("hashing thread", lambda: hashlib.sha256(block))):
            stop_thread = threading.Event()

            def loop(work: Callable[[], object] = work, stop_thread: threading.Event = stop_thread) -> None:
                while not stop_thread.is_set():
                    work()

            thread = threading.Thread(target=loop, daemon=True)
            thread.start()
            results[name].append(_time_calls(inference, obs, args.seconds))
            stop_thread.set()
            thread.join()

        ready, stop = context.Event(), context.Event()
        child = context.Process(target=_update_process, args=(ready, stop), daemon=True)
        child.start()
        if not ready.wait(120):
            child.kill()
            raise SystemExit("the update process did not start")
        results["update process"].append(_time_calls(inference, obs, args.seconds))
        stop.set()
        child.join(30)
    print(f"one inference call (2x64 MLP, 1 agent), {args.rounds} rounds of {args.seconds:g} s, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    for name, rows in results.items():
        cpu = ", ".join(f"{c:.1f}" for c, _ in rows)
        wall = ", ".join(f"{w:.1f}" for _, w in rows)
        print(f"  {name:<15} CPU {cpu} us   wall {wall} us")


if __name__ == "__main__":
    main()
