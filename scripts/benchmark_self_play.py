"""What self-play costs: the same PPO run on the built-in two-team game with and without
``self_play``.

The env is ``builtin:Paddles`` (``--games`` games side by side, two teams of one behavior),
PPO as ``config/ppo/Paddles.yaml``. Without self-play both teams act through the policy
in one inference call per env step and every trajectory trains; with it the learning team
acts through the policy and the other through the ghost (two calls per env step), and
only the learning team's trajectories are built and trained on, while snapshots are taken
every ``save_steps`` and swapped every ``swap_steps`` ghost steps (small values here, so
the runs include many: ``--save-steps``, ``--swap-steps``, ``--team-change``).

Both runs take the same number of env steps (``--env-steps``): a self-play trainer counts
only the learning team's agent steps, so its ``max_steps`` is half the plain run's. The
two run back to back, ``--repeats`` times in alternating order; the best of each is kept
(other processes slow some runs down), and the median of each is printed beside it.
Printed per run: wall time per env step (the loop's, after graph building and env start),
the same without the update's time (the loop's own machinery: env, inference,
trajectories, self-play's bookkeeping), the update's share, and wall time per trainer
step (what ``max_steps`` counts); for self-play also the time of its own bookkeeping
(`trainers.loop.self_play`, timed by wrapping its methods). The goal: a self-play run
costs at most 10 % more per env step than the plain one. Per trainer step it costs about
twice the env work by definition (the ghost team's agents step and act, training nothing),
which the last line shows.

    python scripts/benchmark_self_play.py [--env-steps=2500] [--games=16] [--repeats=3]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from typing import Dict, List, Tuple

import numpy as np
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def config(self_play: bool, env_steps: int, games: int, save_steps: int, swap_steps: int, team_change: int) -> dict:
    """config/ppo/Paddles.yaml with the benchmark's sizes; no checkpoint before the end."""
    with open(os.path.join(ROOT, "config", "ppo", "Paddles.yaml")) as f:
        cfg = yaml.safe_load(f)
    behavior = cfg["behaviors"]["Paddles"]
    # Agent steps the trainer counts: the learning team's games (self-play) or both teams'.
    behavior["max_steps"] = env_steps * games * (1 if self_play else 2)
    behavior["summary_freq"] = 10**9
    behavior["checkpoint_interval"] = 10**9
    if self_play:
        behavior["self_play"].update(save_steps=save_steps, swap_steps=swap_steps, team_change=team_change)
    else:
        del behavior["self_play"]
    cfg["env_settings"]["env_args"]["num_agents"] = games
    cfg.pop("checkpoint_settings", None)
    return cfg


#: Seconds spent in self-play's own bookkeeping (`SelfPlay` methods the controller calls:
#: team changes, snapshots, swaps, ratings, step counts), and how many snapshots and swaps.
BOOKKEEPING = {"seconds": 0.0, "snapshots": 0, "swaps": 0}


def _time_self_play() -> None:
    """Wraps the methods of `trainers.loop.self_play` the loop calls, adding their time to
    `BOOKKEEPING`, and counts snapshots and swaps."""
    from trainers.loop import self_play as sp

    def timed(cls: type, name: str, counter: str = "") -> None:
        original = getattr(cls, name)

        def wrapper(*a: object, **k: object) -> object:
            start = time.perf_counter()
            try:
                return original(*a, **k)
            finally:
                if counter:
                    BOOKKEEPING[counter] += 1
                else:
                    BOOKKEEPING["seconds"] += time.perf_counter() - start

        setattr(cls, name, wrapper)

    for name in ("groups", "on_trajectory", "add_ghost_steps", "advance", "save"):
        timed(sp.SelfPlay, name)
    timed(sp.BehaviorGhost, "save_snapshot", "snapshots")
    timed(sp.BehaviorGhost, "swap_snapshots", "swaps")


def run(self_play: bool, args: argparse.Namespace) -> Dict[str, float]:
    """The timers of one training run (`trainers.loop.controller.Timers`), with
    ``self_play_seconds``: the time in self-play's bookkeeping."""
    from trainers.cli.learn import run_training
    from trainers.config import load_settings
    from trainers.layout import RunLayout

    with tempfile.TemporaryDirectory(prefix="bench_self_play_") as folder:
        path = os.path.join(folder, "config.yaml")
        with open(path, "w") as f:
            yaml.safe_dump(config(self_play, args.env_steps, args.games, args.save_steps, args.swap_steps,
                                  args.team_change), f)
        options = load_settings(path, {"run_id": "bench", "results_dir": folder})
        BOOKKEEPING.update(seconds=0.0, snapshots=0, swaps=0)
        run_training(options)
        with open(RunLayout(os.path.join(folder, "bench")).timers) as f:
            timers = json.load(f)
        timers.update(self_play_seconds=BOOKKEEPING["seconds"], snapshots=BOOKKEEPING["snapshots"],
                      swaps=BOOKKEEPING["swaps"])
        return timers


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--env-steps", type=int, default=2500, help="env steps per run")
    parser.add_argument("--games", type=int, default=16, help="Paddles games per env step")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--save-steps", type=int, default=2000)
    parser.add_argument("--swap-steps", type=int, default=1000)
    parser.add_argument("--team-change", type=int, default=8000)
    args = parser.parse_args()
    import trainers.loop.controller  # noqa: F401  (TensorFlow's import stays out of the figures)

    _time_self_play()

    best: Dict[bool, Tuple[float, Dict[str, float]]] = {}
    every: Dict[bool, List[float]] = {False: [], True: []}
    print(f"builtin:Paddles, {args.games} games, PPO as config/ppo/Paddles.yaml, {args.env_steps} env steps per run, "
          f"self-play save/swap/team change {args.save_steps}/{args.swap_steps}/{args.team_change}, "
          f"best of {args.repeats} (load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs)")
    for r in range(args.repeats):
        for variant in (False, True) if r % 2 == 0 else (True, False):
            timers = run(variant, args)
            per_step = timers["total"] / max(int(timers["env_steps"]), 1)
            every[variant].append(per_step)
            print(f"    run {r + 1} self_play={str(variant).lower():<5}  {per_step * 1000:.3f} ms/env step", flush=True)
            if variant not in best or per_step < best[variant][0]:
                best[variant] = (per_step, timers)
    figures = {}
    for variant in (False, True):
        per_step, t = best[variant]
        steps = max(int(t["env_steps"]), 1)
        agents = args.games * (1 if variant else 2)  # trainer steps per env step
        without_update = (t["total"] - t["update"]) / steps
        figures[variant] = (per_step, without_update)
        print(f"  self_play={str(variant).lower():<5}  {per_step * 1000:.3f} ms/env step, "
              f"{without_update * 1000:.3f} ms without updates (env {t['env'] / steps * 1000:.3f}, "
              f"inference {t['inference'] / steps * 1000:.3f}, trajectories {t['trajectories'] / steps * 1000:.3f}), "
              f"update {100 * t['update'] / t['total']:.0f} %, {per_step / agents * 1e6:.1f} us/trainer step")
        if variant:
            print(f"      self-play's bookkeeping {t['self_play_seconds'] / steps * 1000:.3f} ms/env step "
                  f"({100 * t['self_play_seconds'] / t['total']:.1f} % of the loop; {int(t['snapshots'])} snapshots, "
                  f"{int(t['swaps'])} swaps, in the run kept)")
    ratio = figures[True][0] / figures[False][0]
    machinery = figures[True][1] / figures[False][1]
    medians = {v: float(np.median(every[v])) for v in every}
    print(f"  self-play / plain per env step: {ratio:.3f}x best (goal <= 1.10), "
          f"{medians[True] / medians[False]:.3f}x median "
          f"({medians[True] * 1000:.3f} / {medians[False] * 1000:.3f} ms); "
          f"without updates: {machinery:.3f}x best")
    # Per trainer step the self-play run also steps and acts for the ghost team's agents,
    # which train nothing: twice the env work per trained step, by definition.
    print(f"  per trainer step: {2 * figures[True][0] / figures[False][0]:.3f}x best, "
          f"{2 * medians[True] / medians[False]:.3f}x median (self-play's trainer counts half the agents)")


if __name__ == "__main__":
    start = time.perf_counter()
    main()
    print(f"  ({time.perf_counter() - start:.0f} s in all)")
    sys.exit(0)
