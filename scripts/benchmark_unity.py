"""Throughput of the Unity communicator against the fake game over loopback gRPC.

Usage:
    python scripts/benchmark_unity.py [--seconds 4] [--agents 1,64] [--obs-size 8]

The fake game (`envs.unity.fake_game`) runs as a launched "build" in its own process, as a
Unity game would, with vector observations of ``--obs-size`` floats and 2 continuous
actions per agent. Per agent count it prints the exchange round trip (one `UnityEnv.step`:
actions -> protobuf -> gRPC -> the game steps and answers -> DecisionSteps/TerminalSteps)
in microseconds and agent steps per second (one step of 64 agents is 64 agent steps).
The figure includes the fake game's own work (Python protobuf building, about as much as
ours), so a real Unity game, whose C# side is faster, is bounded by this from below.
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
        rng = np.random.default_rng(0)
        actions = [rng.uniform(-1, 1, (agents, 2)).astype(np.float32) for _ in range(64)]
        for i in range(50):  # warm up
            env.set_actions("Bench", ActionTuple(actions[i % 64]))
            env.step()
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            n = len(env.get_steps("Bench")[0])
            env.set_actions("Bench", ActionTuple(actions[steps % 64][:n]))
            env.step()
            steps += 1
        elapsed = time.perf_counter() - start
    finally:
        env.close()
    return elapsed / steps * 1e6, steps * agents / elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--agents", default="1,64")
    parser.add_argument("--obs-size", type=int, default=8)
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="bench-unity-")
    try:
        print(f"{'agents':>6} {'round trip us':>14} {'agent steps/s':>14}")
        for agents in (int(a) for a in args.agents.split(",")):
            us, rate = measure(agents, args.obs_size, args.seconds, tmp)
            print(f"{agents:>6} {us:>14.0f} {rate:>14.0f}", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
