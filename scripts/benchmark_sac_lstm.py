"""Time of one recurrent SAC update: ML-Agents' test_recurrent_sac network and batch
(1 x 16 units, memory 16, sequences of 16, batch 256 = 16 sequences) on the built-in
Memory env, against the same without memory.

    python scripts/benchmark_sac_lstm.py [--updates=300] [--continuous]

Prints wall and CPU milliseconds per update (``sess.run``) after the first calls (the
session's pool trial), and the graph's op count.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=300)
    parser.add_argument("--continuous", action="store_true")
    args = parser.parse_args()
    import numpy as np

    from envs.base_env import ActionTuple
    from envs.builtin import Memory
    from trainers.config import MemorySettings, NetworkSettings, SACSettings, TrainerSettings
    from trainers.loop.trajectory import AgentProcessor
    from trainers.sac.trainer import SACTrainer
    from trainers.stats import StatsReporter

    for memory in (True, False):
        settings = TrainerSettings(
            trainer_type="sac",
            hyperparameters=SACSettings(batch_size=256, buffer_size=5000, learning_rate=3e-4, tau=0.01,
                                        init_entcoef=0.01, steps_per_update=2),
            network_settings=NetworkSettings(hidden_units=16, num_layers=1,
                                             memory=MemorySettings(16, 16) if memory else None),
        )
        env = Memory(continuous=int(args.continuous), discrete=int(not args.continuous), seed=1)
        trainer = SACTrainer("Memory", env.behavior_specs["Memory"], settings, StatsReporter("Memory", []), 0)
        processor = AgentProcessor(trainer.spec, 64)
        env.reset()
        for _ in range(600):  # experience from the untrained policy, as the controller gathers it
            decision, terminal = env.get_steps("Memory")
            trajectories, _ = processor.add_terminal(0, terminal)
            trainer.policy.forget_agents([(0, a) for a in terminal.agent_id.tolist()])
            trajectories += processor.add_decision(0, decision)
            for traj in trajectories:
                trainer.process_trajectory(traj)
            keys = [(0, a) for a in decision.agent_id.tolist()]
            obs = [np.array(o) for o in decision.obs]
            info = trainer.policy.act(obs, None, agent_keys=keys)
            masks = None if args.continuous else np.ones((len(decision), 2), np.float32)
            processor.add_actions(0, decision, obs, info.raw_continuous, info.discrete, masks, info.log_probs,
                                  info.memory, info.prev_action)
            env.set_actions("Memory", ActionTuple(info.env_continuous, info.discrete))
            env.step()
        trainer.step = 2 * 20 + 2
        trainer.update()  # the first calls: the pool trial
        trainer.step += 2 * args.updates
        wall, cpu = time.perf_counter(), time.process_time()
        trainer.update()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        print(f"memory {'16/16' if memory else 'none '}: {wall / args.updates * 1e3:.2f} ms wall, "
              f"{cpu / args.updates * 1e3:.2f} ms CPU per update, {len(trainer.policy.graph.get_operations())} "
              f"graph ops", flush=True)
        trainer.close()
        env.close()


if __name__ == "__main__":
    main()
