"""Reference measurement: Stable-Baselines3 PPO on CartPole-v1, or SAC on Pendulum-v1
with ``--sac`` (CPU).

Not part of the project: it needs stable-baselines3, gymnasium and torch, which
live in a separate virtualenv (see scripts/README_sb3.md).

Usage:
    /tmp/sb3venv/bin/python scripts/sb3_reference.py [SEED] [--threads N]
    /tmp/sb3venv/bin/python scripts/sb3_reference.py [SEED] [--threads N] --sac

``--sac``: the rl-baselines3-zoo SAC settings for Pendulum-v1 (SB3 defaults otherwise):
MlpPolicy 256x256 ReLU, lr 1e-3, buffer 1e6, batch 256, learning_starts 100, tau 0.005,
gamma 0.99, train_freq 1, gradient_steps 1, ent_coef auto, 20_000 timesteps; the final
reward is the mean of the last 20 episodes (compare with scripts/benchmark.py --sac).

SEED defaults to 1. --threads N calls torch.set_num_threads(N) before building
the model; 0 (the default) leaves torch's own thread count alone.

``--process``: the run as the counterpart of a whole ``trainer-learn`` process, to be timed
from outside (``scripts/benchmark.py --process --against-command=...``): the model is
saved at the end (``model.save``, as trainer-learn writes its final checkpoint and
export) and the deterministic evaluation, which trainer-learn does not do, is skipped.
"""
import argparse
import os
import tempfile
import time

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3 import PPO, SAC
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.monitor import Monitor

TOTAL_TIMESTEPS = 100_000


class Timed:
    """Mixin: accumulates wall time spent in collect_rollouts and train."""

    rollout_s = 0.0
    train_s = 0.0

    def collect_rollouts(self, *args, **kwargs):
        t0 = time.perf_counter()
        try:
            return super().collect_rollouts(*args, **kwargs)
        finally:
            self.rollout_s += time.perf_counter() - t0

    def train(self, *args, **kwargs):
        t0 = time.perf_counter()
        try:
            return super().train(*args, **kwargs)
        finally:
            self.train_s += time.perf_counter() - t0


class TimedPPO(Timed, PPO):
    pass


class TimedSAC(Timed, SAC):
    pass


SAC_TIMESTEPS = 20_000


def sac_main(seed: int, save: bool = False) -> None:
    env = Monitor(gym.make("Pendulum-v1"))
    model = TimedSAC(
        "MlpPolicy",
        env,
        learning_rate=1e-3,
        buffer_size=1_000_000,
        learning_starts=100,
        batch_size=256,
        tau=0.005,
        gamma=0.99,
        train_freq=1,
        gradient_steps=1,
        ent_coef="auto",
        policy_kwargs=dict(net_arch=[256, 256]),
        device="cpu",
        seed=seed,
        verbose=0,
    )
    t0 = time.perf_counter()
    model.learn(total_timesteps=SAC_TIMESTEPS)
    total_s = time.perf_counter() - t0
    if save:
        save_model(model)
    ep_rewards = [ep["r"] for ep in model.ep_info_buffer]
    last20 = float(np.mean(ep_rewards[-20:])) if ep_rewards else float("nan")
    print(f"torch {torch.__version__}  threads {torch.get_num_threads()}  seed {seed}  SAC Pendulum-v1")
    print(f"env_steps        {model.num_timesteps}")
    print(f"total_s          {total_s:.2f}")
    print(f"steps_per_s      {model.num_timesteps / total_s:.1f}")
    print(f"rollout_s        {model.rollout_s:.2f}")
    print(f"train_s          {model.train_s:.2f}")
    print(f"final_mean_ep_reward_last20  {last20:.1f}")


def save_model(model) -> None:
    """``model.save`` into a temporary folder (its cost is what is timed, not the file)."""
    with tempfile.TemporaryDirectory(prefix="sb3_model_") as folder:
        model.save(os.path.join(folder, "model"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("seed", nargs="?", type=int, default=1)
    ap.add_argument("--threads", type=int, default=0,
                    help="torch.set_num_threads(N); 0 = torch default")
    ap.add_argument("--sac", action="store_true", help="SAC on Pendulum-v1 (zoo settings)")
    ap.add_argument("--process", action="store_true",
                    help="save the model at the end, skip the evaluation (whole-process timing)")
    args = ap.parse_args()

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    if args.sac:
        sac_main(args.seed, args.process)
        return

    env = Monitor(gym.make("CartPole-v1"))
    model = TimedPPO(
        "MlpPolicy",
        env,
        n_steps=2048,
        batch_size=64,
        n_epochs=10,
        learning_rate=3e-4,
        gamma=0.99,
        gae_lambda=0.95,
        clip_range=0.2,
        ent_coef=0.0,
        policy_kwargs=dict(net_arch=[64, 64], activation_fn=torch.nn.Tanh),
        device="cpu",
        seed=args.seed,
        verbose=0,
    )

    t0 = time.perf_counter()
    model.learn(total_timesteps=TOTAL_TIMESTEPS)
    total_s = time.perf_counter() - t0

    steps = model.num_timesteps  # whole rollouts: 49 * 2048 = 100352
    ep_rewards = [ep["r"] for ep in model.ep_info_buffer]
    last20 = float(np.mean(ep_rewards[-20:])) if ep_rewards else float("nan")
    if args.process:
        save_model(model)
        print(f"torch {torch.__version__}  threads {torch.get_num_threads()}  seed {args.seed}")
        print(f"env_steps        {steps}")
        print(f"total_s          {total_s:.2f}")
        print(f"final_mean_ep_reward_last20  {last20:.1f}")
        return

    eval_env = Monitor(gym.make("CartPole-v1"))
    eval_env.reset(seed=args.seed + 1000)
    eval_mean, eval_std = evaluate_policy(
        model, eval_env, n_eval_episodes=10, deterministic=True
    )

    print(f"torch {torch.__version__}  threads {torch.get_num_threads()}  seed {args.seed}")
    print(f"env_steps        {steps}")
    print(f"total_s          {total_s:.2f}")
    print(f"steps_per_s      {steps / total_s:.1f}")
    print(f"rollout_s        {model.rollout_s:.2f}")
    print(f"train_s          {model.train_s:.2f}")
    print(f"other_s          {total_s - model.rollout_s - model.train_s:.2f}")
    print(f"final_mean_ep_reward_last20  {last20:.1f}")
    print(f"eval_deterministic_10ep      {eval_mean:.1f} +/- {eval_std:.1f}")


if __name__ == "__main__":
    main()
