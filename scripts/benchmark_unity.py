"""Throughput of the Unity communicator against the fake game over loopback gRPC.

Usage:
    python scripts/benchmark_unity.py [--seconds 4] [--agents 1,64] [--obs-size 8]

The fake game (`envs.unity.fake_game`) runs as a launched "build" in its own process, as a
Unity game would, with vector observations of ``--obs-size`` floats and 2 continuous
actions per agent. Per agent count it prints the exchange round trip (one `UnityEnv.step`:
actions -> protobuf -> gRPC -> the game steps and answers -> DecisionSteps/TerminalSteps)
in microseconds (median and mean: on a loaded machine the mean carries scheduling
stalls) and agent steps per second (one step of 64 agents is 64 agent steps).
The round trip includes the fake game's own work (Python, slower than Unity's C# side);
"trainer side" is our part alone (actions -> UnityInputProto, UnityOutputProto ->
Decision/TerminalSteps), the rest is gRPC, thread hand-offs and the game.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

from envs.base_env import ActionTuple  # noqa: E402
from envs.unity.environment import UnityEnv  # noqa: E402
from envs.unity.fake_game import free_port, write_fake_build  # noqa: E402


def measure(agents: int, obs_size: int, seconds: float, tmp: str) -> tuple:
    """(round trip us, agent steps/s) for one game of ``agents`` agents."""
    build = write_fake_build(
        os.path.join(tmp, f"Bench{agents}.x86_64"),
        [{"name": "Bench", "num_agents": agents, "continuous": 2, "obs_size": obs_size, "max_step": 1000}],
    )
    os.environ["PYTHONPATH"] = ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")
    env = UnityEnv(build, base_port=free_port(), host="127.0.0.1", timeout_wait=60, log=lambda s: None)
    try:
        env.reset()
        name = next(iter(env.behavior_specs))  # "Bench?team=0", as a real build names it
        rng = np.random.default_rng(0)
        actions = [rng.uniform(-1, 1, (agents, 2)).astype(np.float32) for _ in range(64)]
        for i in range(50):  # warm up
            env.set_actions(name, ActionTuple(actions[i % 64]))
            env.step()
        durations, ours = [], []
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            # env.step() in its two halves, to time our side (protobuf in, protobuf out) apart.
            t0 = time.perf_counter()
            n = len(env.get_steps(name)[0])
            env.set_actions(name, ActionTuple(actions[len(durations) % 64][:n]))
            env.send(env.step_input())
            t1 = time.perf_counter()
            output = env.receive_output()
            t2 = time.perf_counter()
            env.receive_into(output)
            t3 = time.perf_counter()
            durations.append(t3 - t0)
            ours.append((t1 - t0) + (t3 - t2))
        elapsed = time.perf_counter() - start
    finally:
        env.close()
    return (float(np.median(durations)) * 1e6, elapsed / len(durations) * 1e6, float(np.median(ours)) * 1e6,
            len(durations) * agents / elapsed)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--agents", default="1,64")
    parser.add_argument("--obs-size", type=int, default=8)
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="bench-unity-")
    try:
        print(f"{'agents':>6} {'median round trip us':>21} {'mean us':>8} {'trainer side us':>16} {'agent steps/s':>14}")
        for agents in (int(a) for a in args.agents.split(",")):
            median, mean, ours, rate = measure(agents, args.obs_size, args.seconds, tmp)
            print(f"{agents:>6} {median:>21.0f} {mean:>8.0f} {ours:>16.0f} {rate:>14.0f}", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
