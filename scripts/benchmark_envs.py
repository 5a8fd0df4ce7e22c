"""Throughput of the environment layer, each figure beside raw Gymnasium in the same run.

Usage:
    python scripts/benchmark_envs.py [--seconds 4] [--rounds 10] [--agents 1,16]

Steps/s counts agent steps (transitions): one env step with 16 agents is 16 steps.
"raw" steps the same Gymnasium env copies in a plain loop
(``env.step(a); if terminated or truncated: env.reset()``) with precomputed actions;
"ours" goes through `GymEnv` (set_actions/step/get_steps, batch arrays, agent ids) or an
env manager. ratio = ours / raw (1.0 = no overhead; above 1 for the subprocess manager
means its workers ran in parallel). "Subprocess" rows pass steps and actions through
shared memory; "Subprocess, pipes" rows (``shared_memory=False``) send them through the
pipes, for comparison in the same run; "out of lockstep" rows step each worker again as
soon as it answers (`step_some` / `wait_some`, what threaded training runs with several
workers do; the other rows are lockstep `step` calls). Built-in envs have no raw
counterpart: their manager row is compared with stepping the env directly.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any, Callable, List, Optional, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

from envs.base_env import ActionTuple, BaseEnv  # noqa: E402
from envs.managers.base import EnvManager  # noqa: E402
from envs.managers.in_process import InProcessEnvManager  # noqa: E402
from envs.managers.subprocess import SubprocessEnvManager  # noqa: E402
from envs.registry import make_env  # noqa: E402

NUM_ACTIONS = 512


def agent_step_rate(step_fn: Callable[[int], Optional[int]], agents: int, seconds: float) -> float:
    """Agent steps per second of ``step_fn(i)`` called until ``seconds`` have passed; each
    call makes ``agents`` agent steps, or as many as it returns."""
    for i in range(20):  # warm up
        step_fn(i)
    calls, steps, start = 0, 0, time.perf_counter()
    while True:
        for _ in range(50):
            made = step_fn(calls)
            steps += agents if made is None else made
            calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return steps / elapsed


def _best_of(pair: List[Tuple[Callable[[int], Optional[int]], int]], seconds: float, rounds: int) -> List[float]:
    """Interleaved rounds of each ``(step_fn, agents)``; the best rate of each.

    Other processes on the machine slow some rounds down; the best round is the
    least disturbed one, and interleaving exposes every candidate to the same load.
    """
    best = [0.0] * len(pair)
    for _ in range(rounds):
        for k, (fn, agents) in enumerate(pair):
            best[k] = max(best[k], agent_step_rate(fn, agents, seconds / rounds))
    return best


def _actions(env_like: Any, name: str, n: int, seed: int = 0) -> List[ActionTuple]:
    rng = np.random.default_rng(seed)
    spec = env_like.behavior_specs[name].action_spec
    return [spec.random_action(n, rng) for _ in range(NUM_ACTIONS)]


def raw_gym(gym_id: str, copies: int) -> Tuple[Callable[[int], None], Callable[[], None]]:
    """Plain Gymnasium stepping of ``copies`` envs in a loop, discrete random actions."""
    import gymnasium

    envs = [gymnasium.make(gym_id) for _ in range(copies)]
    for k, env in enumerate(envs):
        env.reset(seed=k)
    rng = np.random.default_rng(0)
    n_actions = int(envs[0].action_space.n)  # type: ignore[attr-defined]
    acts = rng.integers(0, n_actions, size=(NUM_ACTIONS, copies)).tolist()

    def step(i: int) -> None:
        a = acts[i % NUM_ACTIONS]
        for k in range(copies):
            _, _, terminated, truncated, _ = envs[k].step(a[k])
            if terminated or truncated:
                envs[k].reset()

    def close() -> None:
        for env in envs:
            env.close()

    return step, close


def env_direct(env: BaseEnv, agents: int) -> Callable[[int], None]:
    """set_actions / step / get_steps on one env."""
    env.reset()
    names = list(env.behavior_specs)
    acts = {name: _actions(env, name, agents) for name in names}

    def step(i: int) -> None:
        for name in names:
            env.set_actions(name, acts[name][i % NUM_ACTIONS])
        env.step()
        for name in names:
            env.get_steps(name)

    return step


def manager_steps(manager: EnvManager, agents: int) -> Callable[[int], None]:
    """manager.step with random actions for every worker and behavior."""
    manager.reset()
    names = list(manager.behavior_specs)
    acts = {name: _actions(manager, name, agents) for name in names}
    per_worker = [[{name: acts[name][(i + w) % NUM_ACTIONS] for name in names} for w in range(manager.num_workers)]
                  for i in range(NUM_ACTIONS)]

    def step(i: int) -> None:
        manager.step(per_worker[i % NUM_ACTIONS])

    return step


def manager_steps_out_of_lockstep(manager: EnvManager, agents: int) -> Callable[[int], int]:
    """`wait_some`, then `step_some` for the workers that answered (what threaded runs do
    with several workers): returns the agent steps it collected."""
    manager.reset()
    names = list(manager.behavior_specs)
    acts = {name: _actions(manager, name, agents) for name in names}
    manager.step_some({w: {name: acts[name][w] for name in names} for w in range(manager.num_workers)})

    def step(i: int) -> int:
        answered = manager.wait_some()
        manager.step_some({
            s.worker_id: {name: acts[name][(i + s.worker_id) % NUM_ACTIONS] for name in names} for s in answered
        })
        return len(answered) * agents

    return step


def _row(label: str, ours: float, raw: Optional[float], raw_label: str = "raw gymnasium") -> None:
    if raw is None:
        print(f"{label:<64} {ours:>11,.0f}")
    else:
        print(f"{label:<64} {ours:>11,.0f}   {raw_label} {raw:>11,.0f}   ratio {ours / raw:5.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0, help="measuring time per figure")
    parser.add_argument("--rounds", type=int, default=10, help="interleaved rounds per figure (best is kept)")
    parser.add_argument("--agents", default="1,16", help="agents_per_env values, comma separated")
    parser.add_argument("--gym-id", default="CartPole-v1", help="a Gymnasium id with a Discrete action space")
    args = parser.parse_args()
    agents_list = [int(a) for a in args.agents.split(",")]
    seconds, rounds, gym_id = args.seconds, args.rounds, args.gym_id
    print(f"agent steps per second (best of {rounds} interleaved rounds, {seconds:g} s per figure, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f})")

    for agents in agents_list:
        env_fn = env_direct(make_env("builtin:Simple", None, 0, agents), agents)
        with InProcessEnvManager("builtin:Simple", None, 1, agents, 0) as manager:
            direct, managed = _best_of([(env_fn, agents), (manager_steps(manager, agents), agents)], seconds, rounds)
        _row(f"builtin:Simple agents={agents} env.step", direct, None)
        _row(f"builtin:Simple agents={agents} InProcessEnvManager", managed, direct, "env.step     ")

    for agents in agents_list:
        raw_fn, raw_close = raw_gym(gym_id, agents)
        env_fn = env_direct(make_env(f"gym:{gym_id}", None, 0, agents), agents)
        with InProcessEnvManager(f"gym:{gym_id}", None, 1, agents, 0) as manager:
            raw, ours, managed = _best_of(
                [(raw_fn, agents), (env_fn, agents), (manager_steps(manager, agents), agents)], seconds, rounds
            )
        raw_close()
        _row(f"gym:{gym_id} agents={agents} GymEnv", ours, raw)
        _row(f"gym:{gym_id} agents={agents} InProcessEnvManager", managed, raw)

    for agents in agents_list:
        raw_fn, raw_close = raw_gym(gym_id, 2 * agents)
        start = time.perf_counter()
        with SubprocessEnvManager(f"gym:{gym_id}", None, 2, agents, 0) as manager:
            startup = time.perf_counter() - start
            with SubprocessEnvManager(f"gym:{gym_id}", None, 2, agents, 0, shared_memory=False) as piped, \
                    SubprocessEnvManager(f"gym:{gym_id}", None, 2, agents, 0) as unlocked:
                raw, managed, through_pipes, out_of_lockstep = _best_of(
                    [(raw_fn, 2 * agents), (manager_steps(manager, agents), 2 * agents),
                     (manager_steps(piped, agents), 2 * agents),
                     (manager_steps_out_of_lockstep(unlocked, agents), agents)], seconds, rounds)
        raw_close()
        _row(f"gym:{gym_id} 2 workers x agents={agents} Subprocess", managed, raw)
        _row(f"gym:{gym_id} 2 workers x agents={agents} Subprocess, pipes", through_pipes, raw)
        _row(f"gym:{gym_id} 2 workers x agents={agents} Subprocess, out of lockstep", out_of_lockstep, raw)
        print(f"{'':<64} (2 workers started in {startup:.2f} s; raw steps {2 * agents} copies in one process)")
    start = time.perf_counter()
    with SubprocessEnvManager("builtin:Simple", None, 2, 1, 0) as manager:
        startup = time.perf_counter() - start
        with SubprocessEnvManager("builtin:Simple", None, 2, 1, 0, shared_memory=False) as piped:
            managed, through_pipes = _best_of([(manager_steps(manager, 1), 2), (manager_steps(piped, 1), 2)],
                                              seconds, rounds)
    _row("builtin:Simple 2 workers x agents=1 Subprocess", managed, None)
    _row("builtin:Simple 2 workers x agents=1 Subprocess, pipes", through_pipes, None)
    print(f"{'':<64} (2 workers started in {startup:.2f} s)")


if __name__ == "__main__":
    main()
