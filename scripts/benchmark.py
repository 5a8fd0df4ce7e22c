"""Training throughput benchmark: PPO on CartPole-v1 with Stable-Baselines3's PPO defaults.

1 environment, buffer 2048, batch 64, 10 epochs, lr 3e-4 (linear), gamma 0.99, lambda
0.95, clip 0.2, 2x64 tanh network, no entropy bonus, 100k steps (config/ppo/CartPole.yaml).
Prints env steps/s, the split of wall time between env stepping, inference, trajectory
processing and updates, and the final mean reward. Compare with scripts/sb3_reference.py.

    python scripts/benchmark.py [--steps=100000] [--seed=1] [--config=config/ppo/CartPole.yaml]

With ``--threaded``: the same run with ``threaded: true`` (each update in its own thread
while the env keeps stepping with the previous weights); the update's time then overlaps
the loop, so it is printed apart, with the time the loop waited for updates.

    python scripts/benchmark.py --threaded

With ``--signals``: PPO + curiosity + GAIL on the built-in Simple env, and the update time
per buffer with the one-run update beside the upstream-style mode that runs each network's
update in its own ``sess.run``.

    python scripts/benchmark.py --signals [--steps=20480]

With ``--profile``: the same run under cProfile counting CPU time (``time.process_time``,
so other processes on the machine do not inflate the figures; TensorFlow's own threads
are counted too), and the CPU time split by where it is spent (self time per group of
functions) plus the costliest functions.

    python scripts/benchmark.py --profile [--steps=100000]

With ``--memory``: PPO with an LSTM (memory_size 128, sequence_length 64, packed sequences)
on the built-in Memory env, beside the same run without memory (the same steps, settings and seed):
env steps/s in the training loop, update time per buffer, and the LSTM/feed-forward ratio
of the training loop's wall time (target <= 2x).

    python scripts/benchmark.py --memory [--steps=20480] [--repeat=3]

With ``--small-buffer``: ML-Agents' own learning-test settings (builtin Simple env,
discrete, batch 16, buffer 64, 3 epochs, 32x1 network; config/ppo/Simple_discrete.yaml
with ML-Agents' default checkpoint interval, 500k, so only the final checkpoint and
export), 20k steps. Prints the wall time and where it went: the env, TensorFlow's
``sess.run`` calls (inference, value estimates, updates) and the trainer's own Python
around them (trajectory assembly, GAE, buffer, stats, per-update work). ``--repeat=n``
runs it n times and prints the fastest (the least disturbed by other load).

    python scripts/benchmark.py --small-buffer [--steps=20000] [--repeat=3]

With ``--process``: the PPO run (CartPole, or ``--config``) or, with ``--small-buffer``, that
run, as whole ``trainer-learn`` processes (what a user waits for: imports, graph build,
final checkpoint and export included); ``--repeat=n`` runs n and prints each (wall and CPU
time) and the medians. ``--against=<checkout>`` runs another checkout of this project (the
code before a change: ``git worktree add /tmp/before HEAD``) in turn with this one, n
pairs, alternating which goes first, and prints the ratios.

    python scripts/benchmark.py --small-buffer --process [--repeat=5] [--against=/tmp/before]
    python scripts/benchmark.py --process [--repeat=2] [--against=/tmp/before]

``--against-command="<command>"`` runs any command line in turn with ours instead: another
trainer on the same task, as a whole process (Stable-Baselines3 in its own virtualenv,
scripts/README_sb3.md; ML-Agents' ``mlagents-learn`` with the same settings).

    python scripts/benchmark.py --process --repeat=2 \\
        --against-command="/tmp/sb3venv/bin/python scripts/sb3_reference.py 1 --threads 1 --process"

With ``--sac``: SAC on Pendulum-v1 with Stable-Baselines3's zoo SAC settings
(config/sac/Pendulum.yaml: 256x256, batch 256, buffer 1e6, 100 steps before learning, one
update per step, 20k steps); compare with ``scripts/sb3_reference.py --sac``. With ``--sac --profile`` the
SAC training loop runs under cProfile, split between the inference call, the update call
and the rest.

    python scripts/benchmark.py --sac [--steps=20000] [--profile]
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Callable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(config: str, steps: int, seed: int, extra: dict | None = None, profile: bool = False) -> dict:
    # Imported before the clock starts (TensorFlow's import takes seconds), as the SB3 reference
    # imports torch before timing learn().
    import trainers.loop.controller  # noqa: F401
    import trainers.export  # noqa: F401
    from trainers.cli.learn import run_training
    from trainers.layout import RunLayout
    from trainers.config import load_settings

    with tempfile.TemporaryDirectory(prefix="bench_") as results:
        overrides = {"run_id": "bench", "results_dir": results, "max_steps": steps, "seed": seed}
        overrides.update(extra or {})
        options = load_settings(config, overrides)
        profiler = None
        if profile:
            import cProfile

            profiler = cProfile.Profile()
        start = time.perf_counter()
        if profiler is not None:
            code = profiler.runcall(run_training, options)
        else:
            code = run_training(options)
        wall = time.perf_counter() - start
        if code != 0:
            # Ctrl-C (or SIGTERM) is "save and stop" to the trainer, which then returns 130
            # (143): the benchmark stops too instead of timing a cut run and starting the next.
            raise KeyboardInterrupt
        layout = RunLayout(os.path.join(results, "bench"))
        with open(layout.timers) as f:
            timers = json.load(f)
        behavior = next(iter(options.behaviors))
        with open(layout.stats_csv(behavior)) as f:
            rewards = [float(r["mean"]) for r in csv.DictReader(f) if r["tag"] == "Environment/Cumulative Reward"]
    return {
        "wall": wall, "timers": timers, "final_reward": rewards[-1] if rewards else float("nan"), "steps": steps,
        "profiler": profiler, "behavior": behavior, "trainer": options.behavior_settings(behavior).trainer_type,
    }


def print_profile(profiler, steps: int) -> None:
    """The per-step path from cProfile: the inference call, the update call (their
    ``sess.run``), and the Python around them; then the top functions by own time."""
    import pstats

    stats = pstats.Stats(profiler)
    wanted = {
        "Policy.act (inference call)": ("policy.py", "act"),
        "FastCallable (every sess.run)": ("session.py", "__call__"),
        "SACTrainer.update (update call)": ("trainer.py", "update"),
        "SACOptimizer.update": ("optimizer.py", "update"),
        "ReplayBuffer.sample": ("replay.py", "sample"),
        "process_trajectory": ("trainer.py", "process_trajectory"),
        "env step (Gymnasium adapter)": ("in_process.py", "step"),
    }
    rows = {}
    for (path, _, func), (cc, nc, tt, ct, callers) in stats.stats.items():
        for label, (file_end, name) in wanted.items():
            if path.endswith(file_end) and func == name and ct > rows.get(label, (0, 0, 0))[1]:
                rows[label] = (nc, ct, tt)
    total = stats.total_tt
    print(f"  cProfile (adds overhead; total {total:.1f} s, {1e3 * total / steps:.2f} ms per step):")
    for label, (nc, ct, tt) in rows.items():
        print(f"    {label:<34} {ct:7.1f} s cumulative  {nc:7d} calls  {1e6 * ct / max(nc, 1):8.0f} us/call")
    print("  top 12 functions by own time:")
    stats.sort_stats("tottime")
    for (path, line, func), (cc, nc, tt, ct, callers) in sorted(stats.stats.items(), key=lambda kv: -kv[1][2])[:12]:
        print(f"    {tt:7.1f} s  {nc:7d}  {os.path.basename(path)}:{line}({func})")


SIGNALS_CONFIG = {
    "behaviors": {
        "Simple": {
            "trainer_type": "ppo",
            "hyperparameters": {"batch_size": 128, "buffer_size": 2048, "num_epoch": 3, "learning_rate": 3.0e-4},
            "network_settings": {"hidden_units": 128, "num_layers": 2},
            "reward_signals": {
                "extrinsic": {"strength": 1.0, "gamma": 0.99},
                "curiosity": {"strength": 0.02, "gamma": 0.99, "encoding_size": 64},
                "gail": {"strength": 0.01, "gamma": 0.99, "encoding_size": 128, "use_actions": True,
                         "demo_path": os.path.join(ROOT, "config", "demos", "SimpleDiscrete.demo")},
            },
            "time_horizon": 64,
            "summary_freq": 100000,
            "checkpoint_interval": 1000000,
        }
    },
    "env_settings": {"env_path": "builtin:Simple", "env_args": {"continuous": 0, "discrete": 1}},
}


def signals_benchmark(steps: int, seed: int) -> None:
    import yaml

    from trainers.ppo.trainer import PPOTrainer

    folder = tempfile.TemporaryDirectory(prefix="bench_cfg_")
    path = os.path.join(folder.name, "signals.yaml")
    with open(path, "w") as f:
        yaml.safe_dump(SIGNALS_CONFIG, f)
    per_buffer = {}
    for mode, separate in (("one sess.run per minibatch", False), ("one sess.run per network", True)):
        PPOTrainer.separate_signal_updates = separate
        res = run(path, steps, seed)
        # The first update also compiles the update callables: left out.
        durations = sorted(res["timers"]["update_durations"][1:])
        per_buffer[mode] = durations[len(durations) // 2]
        print(
            f"  {mode:<28} update time per buffer (median of {len(durations)}): {per_buffer[mode] * 1000:7.1f} ms"
            f" (min {durations[0] * 1000:.1f})"
        )
    PPOTrainer.separate_signal_updates = False
    folder.cleanup()
    one, sep = per_buffer.values()  # medians
    print(f"  the one-run update takes {100 * (1 - one / sep):.0f} % less time than separate runs")


PROFILE_GROUPS = (
    ("TensorFlow session runs", lambda f, fn: "TF_Session" in fn),
    ("Gymnasium (the env itself)", lambda f, fn: "/gymnasium/" in f),
    ("envs/ (env API, Gymnasium adapter, managers)", lambda f, fn: "/envs/" in f),
    ("trainers/loop/controller.py", lambda f, fn: f.endswith("trainers/loop/controller.py")),
    ("trainers/loop/trajectory.py", lambda f, fn: f.endswith("trainers/loop/trajectory.py")),
    ("trainers/policy.py + tf/session.py", lambda f, fn: f.endswith(("trainers/policy.py", "tf/session.py"))),
    ("trainers/ (other: trainer, buffer, stats...)", lambda f, fn: "/trainers/" in f),
    ("numpy (Python level and C calls cProfile sees)", lambda f, fn: "numpy" in f or "numpy" in fn),
)


def profile(config: str, steps: int, seed: int) -> None:
    import cProfile
    import pstats

    import trainers.loop.controller  # noqa: F401  (imports stay out of the profile)
    import trainers.export  # noqa: F401

    profiler = cProfile.Profile(time.process_time)
    profiler.enable()
    res = run(config, steps, seed)
    profiler.disable()
    stats = pstats.Stats(profiler)
    totals = {name: 0.0 for name, _ in PROFILE_GROUPS}
    totals["other (Python builtins, imports, TensorFlow Python)"] = 0.0
    loop_calls = 0
    for (filename, _, function), (_, calls, tottime, _, _) in stats.stats.items():  # type: ignore[attr-defined]
        for name, match in PROFILE_GROUPS:
            if match(filename, function):
                totals[name] += tottime
                break
        else:
            totals["other (Python builtins, imports, TensorFlow Python)"] += tottime
        if function == "_act" and filename.endswith("controller.py"):
            loop_calls = calls
    cpu = sum(totals.values())
    print(f"cProfile, CPU time: {cpu:.1f} s for {res['steps']} steps ({loop_calls} controller steps), "
          f"{1e6 * cpu / max(res['steps'], 1):.0f} us per step; final reward {res['final_reward']:.1f}")
    for name, value in sorted(totals.items(), key=lambda kv: -kv[1]):
        print(f"  {name:<52} {value:7.1f} s  ({100 * value / cpu:4.1f} %)  {1e6 * value / res['steps']:6.1f} us/step")
    print("Costliest functions (self CPU time):")
    stats.sort_stats("tottime").print_stats(25)


MEMORY_CONFIG = {
    "behaviors": {
        "Memory": {
            "trainer_type": "ppo",
            # Packed: the same 2048 real steps per update as the feed-forward run, so the
            # ratio is the LSTM's cost; the default padded layout updates every ~50
            # episodes of this env instead (a different schedule, not a cost).
            "hyperparameters": {"batch_size": 256, "buffer_size": 2048, "num_epoch": 3, "learning_rate": 3.0e-4,
                                "pack_sequences": True},
            "network_settings": {"hidden_units": 128, "num_layers": 2,
                                 "memory": {"memory_size": 128, "sequence_length": 64}},
            "reward_signals": {"extrinsic": {"strength": 1.0, "gamma": 0.99}},
            "time_horizon": 64,
            "summary_freq": 100000,
            "checkpoint_interval": 1000000,
        }
    },
    "env_settings": {"env_path": "builtin:Memory", "env_args": {"continuous": 0, "discrete": 1, "num_agents": 4}},
}


def memory_benchmark(steps: int, seed: int, repeat: int = 1) -> None:
    """LSTM and feed-forward runs in turn, ``repeat`` pairs: one ratio per pair (this
    machine's run-to-run noise is ~15%, so a single pair can mislead), then the median.

    The pairs alternate which run goes first, so that what the first run in the process
    pays once (TensorFlow's and oneDNN's first-use work) and any drift of the machine
    within a pair do not always fall on the LSTM run."""
    import copy

    import yaml

    folder = tempfile.TemporaryDirectory(prefix="bench_cfg_")
    ratios = []
    for pair in range(repeat):
        results = {}
        for mode in ("LSTM", "feed-forward") if pair % 2 == 0 else ("feed-forward", "LSTM"):
            config = copy.deepcopy(MEMORY_CONFIG)
            if mode == "feed-forward":
                del config["behaviors"]["Memory"]["network_settings"]["memory"]
            path = os.path.join(folder.name, f"{mode}.yaml")
            with open(path, "w") as f:
                yaml.safe_dump(config, f)
            res = run(path, steps, seed)
            t = res["timers"]
            durations = sorted(t["update_durations"][1:])  # the first one compiles the update
            median = durations[len(durations) // 2] if durations else float("nan")
            results[mode] = t["total"]
            print(
                f"  {mode:<13} loop {t['total']:6.1f} s, {steps / t['total']:6.0f} steps/s; env {t['env']:.1f} s, "
                f"inference {t['inference']:.1f} s, trajectories {t['trajectories']:.1f} s, update {t['update']:.1f} s; "
                f"update per buffer (median of {len(durations)}) {median * 1000:.0f} ms; "
                f"final reward {res['final_reward']:.3f}"
            )
        ratios.append(results["LSTM"] / results["feed-forward"])
        print(f"  LSTM / feed-forward training-loop wall time: {ratios[-1]:.2f}x (target <= 2x)")
    folder.cleanup()
    if repeat > 1:
        listed = ", ".join(f"{r:.2f}" for r in ratios)
        print(f"  {repeat} pairs: {listed}; median {statistics.median(ratios):.2f}x (target <= 2x)")


def write_config(source: str, folder: str, name: str, edit: Callable[[dict], None]) -> str:
    """The YAML config ``source`` changed by ``edit`` (in place), written to ``folder/name``."""
    import yaml

    with open(source) as f:
        config = yaml.safe_load(f)
    edit(config)
    path = os.path.join(folder, name)
    with open(path, "w") as f:
        yaml.safe_dump(config, f)
    return path


def write_threaded_config(config: str, folder: str) -> str:
    """``config`` with ``threaded: true`` for every behavior, written to ``folder``."""

    def edit(settings: dict) -> None:
        for behavior in settings["behaviors"].values():
            behavior["threaded"] = True

    return write_config(config, folder, "threaded.yaml", edit)


def write_small_buffer_config(folder: str) -> str:
    """``config/ppo/Simple_discrete.yaml`` with ML-Agents' default checkpoint interval
    (500k, so one final save, as ML-Agents' test settings keep it), written to ``folder``."""

    def edit(settings: dict) -> None:
        settings["behaviors"]["Simple"]["checkpoint_interval"] = 500000

    return write_config(os.path.join(ROOT, "config", "ppo", "Simple_discrete.yaml"), folder, "small_buffer.yaml", edit)


def small_buffer_benchmark(steps: int, seed: int, repeat: int) -> None:
    from trainers.tf import session as tf_session

    # Time spent inside TensorFlow: every per-step and per-minibatch run goes through
    # FastCallable (inference, value estimates, updates).
    tf_time = [0.0, 0]
    original_call = tf_session.FastCallable.__call__

    def timed_call(self: object, *args: object) -> list:
        t = time.perf_counter()
        try:
            return original_call(self, *args)  # type: ignore[arg-type]
        finally:
            tf_time[0] += time.perf_counter() - t
            tf_time[1] += 1

    folder = tempfile.TemporaryDirectory(prefix="bench_cfg_")
    path = write_small_buffer_config(folder.name)
    tf_session.FastCallable.__call__ = timed_call  # type: ignore[method-assign]
    best = None
    try:
        for _ in range(repeat):
            tf_time[:] = [0.0, 0]
            res = run(path, steps, seed)
            res["tf"], res["tf_calls"] = tf_time[0], tf_time[1]
            if best is None or res["wall"] < best["wall"]:
                best = res
    finally:
        tf_session.FastCallable.__call__ = original_call  # type: ignore[method-assign]
        folder.cleanup()
    assert best is not None
    t = best["timers"]
    loop = t["total"]
    python = loop - t["env"] - best["tf"]
    print(f"PPO builtin:Simple (discrete), batch 16, buffer 64, 3 epochs, {steps} steps, seed {seed}"
          f" (fastest of {repeat})")
    print(f"  wall time after imports (graph build, env, final checkpoint and export): {best['wall']:.2f} s")
    print(f"  training loop {loop:.2f} s: env {t['env']:.2f} s ({100 * t['env'] / loop:.0f} %),"
          f" TensorFlow runs {best['tf']:.2f} s ({100 * best['tf'] / loop:.0f} %, {best['tf_calls']} calls),"
          f" trainer Python {python:.2f} s ({100 * python / loop:.0f} %)")
    print(f"  by loop part: inference {t['inference']:.2f} s, trajectories {t['trajectories']:.2f} s,"
          f" updates {t['update']:.2f} s ({len(t['update_durations'])} updates)")
    print(f"  final mean reward (last summary): {best['final_reward']:.3f}")


def process_runs(
    config: str, title: str, steps: int, seed: int, repeat: int, against: str | None, against_command: str | None = None
) -> None:
    """Whole ``trainer-learn`` processes, as a user starts them: interpreter start, imports
    (TensorFlow's is the largest part), graph build, the loop, the final checkpoint and
    export, interpreter exit. Every run is printed: wall time, and CPU time (user + system
    of the process and any it started), which other load on the machine inflates less.

    ``against``: another checkout of this project (the code before a change, say), run the
    same way in turn with this one, ``repeat`` pairs; the pairs alternate which goes first,
    so that drift of the machine's load does not always fall on the same side. Each side
    runs its own code (its folder is the working directory and first on ``PYTHONPATH``)
    on the same config file. ``against_command``: instead, any command line (another
    trainer on the same task, e.g. ``scripts/sb3_reference.py --process`` in its own
    virtualenv), run from this checkout's folder, in turn with ours the same way.
    """
    sides = [("this", ROOT)]
    if against:
        sides.append(("other", os.path.abspath(against)))
    elif against_command:
        sides.append(("other", None))
    for _, checkout in sides:
        if checkout is not None and not os.path.isfile(os.path.join(checkout, "trainers", "learn.py")):
            raise SystemExit(f"{checkout}: not a checkout of this project (no trainers/learn.py)")
    other = sides[1][1] or against_command if len(sides) > 1 else None
    walls: dict = {name: [] for name, _ in sides}
    cpus: dict = {name: [] for name, _ in sides}
    print(f"{title}, {steps} steps, seed {seed}: whole trainer-learn processes"
          + (f", alternated with {other}" if other else ""))
    if other:
        print(f"  this = {ROOT}")
    with tempfile.TemporaryDirectory(prefix="bench_proc_") as folder:
        for i in range(repeat):
            order = sides if i % 2 == 0 else sides[::-1]
            line = []
            for name, checkout in order:
                if checkout is None:
                    command, cwd, env = shlex.split(against_command or ""), ROOT, dict(os.environ)
                else:
                    command = [sys.executable, "-m", "trainers.learn", config, "--run-id=bench",
                               f"--results-dir={os.path.join(folder, name)}", f"--max-steps={steps}",
                               f"--seed={seed}", "--force"]
                    path = os.pathsep.join(filter(None, [checkout, os.environ.get("PYTHONPATH")]))
                    cwd, env = checkout, dict(os.environ, PYTHONPATH=path)
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                start = time.perf_counter()
                done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
                wall = time.perf_counter() - start
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                if done.returncode != 0:
                    raise SystemExit(f"{' '.join(command)} (in {cwd}) failed:\n{done.stderr[-2000:]}")
                cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
                walls[name].append(wall)
                cpus[name].append(cpu)
                line.append(f"{name} {wall:.2f} s (CPU {cpu:.2f} s)")
            print(f"  run {i + 1}: " + ", ".join(line), flush=True)
    for name, _ in sides:
        listed = ", ".join(f"{w:.2f}" for w in walls[name])
        print(f"  {name}: wall per process {listed} s; median {statistics.median(walls[name]):.2f} s;"
              f" CPU median {statistics.median(cpus[name]):.2f} s")
    if other:
        ratios = [o / t for t, o in zip(walls["this"], walls["other"])]
        cpu_ratios = [o / t for t, o in zip(cpus["this"], cpus["other"])]
        print(f"  other / this, per pair: wall {', '.join(f'{r:.3f}' for r in ratios)} (median"
              f" {statistics.median(ratios):.3f}); CPU {', '.join(f'{r:.3f}' for r in cpu_ratios)} (median"
              f" {statistics.median(cpu_ratios):.3f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=None, help="default 100000 (20480 with --signals)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--config", default=os.path.join(ROOT, "config", "ppo", "CartPole.yaml"))
    parser.add_argument("--signals", action="store_true", help="PPO + curiosity + GAIL update-time comparison")
    parser.add_argument("--profile", action="store_true", help="cProfile split of the run (CPU time)")
    parser.add_argument("--memory", action="store_true", help="LSTM vs feed-forward on builtin:Memory")
    parser.add_argument("--small-buffer", action="store_true", help="ML-Agents' test settings on builtin:Simple")
    parser.add_argument(
        "--repeat", type=int, default=1,
        help="--small-buffer: runs, fastest printed; --memory: LSTM/FF pairs; --process: runs (pairs with --against)"
    )
    parser.add_argument(
        "--process", action="store_true",
        help="time whole trainer-learn processes (imports and export too) of the PPO run or --small-buffer",
    )
    parser.add_argument(
        "--against", default=None,
        help="--process: another checkout of this project, run in turn with this one (--repeat pairs)",
    )
    parser.add_argument(
        "--against-command", default=None,
        help="--process: a command line (another trainer on the same task) run in turn with this one",
    )
    parser.add_argument("--sac", action="store_true", help="SAC on Pendulum-v1 (SB3 zoo settings)")
    parser.add_argument("--threaded", action="store_true", help="the run with threaded: true (updates in a thread)")
    args = parser.parse_args()
    # Options that only some modes read: an error, not a run that silently ignores them.
    if args.process and (args.signals or args.memory or args.sac or args.threaded or args.profile):
        parser.error("--process times the PPO run (CartPole or --config) or --small-buffer")
    if (args.against or args.against_command) and not args.process:
        parser.error("--against and --against-command compare whole processes; add --process")
    if args.against and args.against_command:
        parser.error("--against or --against-command, not both")
    if args.threaded and (args.signals or args.memory or args.small_buffer or args.profile or args.sac):
        parser.error("--threaded applies to the PPO run (CartPole or --config) only")
    if args.profile and not args.sac:
        profile(args.config, args.steps or 100_000, args.seed)
        return None
    if args.process:
        with tempfile.TemporaryDirectory(prefix="bench_cfg_") as folder:
            if args.small_buffer:
                config = write_small_buffer_config(folder)
                title, steps = "PPO builtin:Simple (discrete), batch 16, buffer 64, 3 epochs", args.steps or 20000
            else:
                config, title, steps = args.config, f"PPO {os.path.basename(args.config)}", args.steps or 100_000
            process_runs(config, title, steps, args.seed, args.repeat, args.against, args.against_command)
        return None
    if args.small_buffer:
        small_buffer_benchmark(args.steps or 20000, args.seed, args.repeat)
        return None
    if args.memory:
        steps = args.steps or 20480
        print(f"PPO on builtin:Memory (4 agents), {steps} steps, memory_size 128, sequence_length 64 vs no memory")
        memory_benchmark(steps, args.seed, args.repeat)
        return None
    if args.signals:
        steps = args.steps or 20480
        print(f"PPO + curiosity + GAIL on builtin:Simple, {steps} steps")
        signals_benchmark(steps, args.seed)
        return None
    config = args.config
    steps = args.steps or 100_000
    if args.sac:
        config = os.path.join(ROOT, "config", "sac", "Pendulum.yaml") if config == parser.get_default("config") else config
        steps = args.steps or 20_000
    with tempfile.TemporaryDirectory(prefix="bench_cfg_") as folder:
        if args.threaded:
            config = write_threaded_config(config, folder)
        res = run(config, steps, args.seed, profile=args.profile)
    t = res["timers"]
    loop = t["total"]
    threaded = " (threaded: true)" if args.threaded else ""
    print(f"{res['trainer'].upper()} {res['behavior']}, {res['steps']} steps, seed {args.seed}{threaded}")
    print(f"  wall time after imports (graph build, env start, checkpoints, exports): {res['wall']:.1f} s")
    print(f"  env steps/s: {res['steps'] / res['wall']:.0f} overall, {res['steps'] / loop:.0f} in the training loop")
    # A threaded run's updates overlap the loop: their time is not a share of it.
    parts = ("env", "inference", "trajectories") + (() if args.threaded else ("update",))
    for part in parts:
        print(f"  {part:<13} {t[part]:7.1f} s  ({100 * t[part] / loop:4.1f} %)")
    other = loop - sum(t[p] for p in parts) - t["update_wait"]  # update_wait: 0 unthreaded
    print(f"  {'other':<13} {other:7.1f} s  ({100 * other / loop:4.1f} %)")
    if args.threaded:
        print(f"  update thread {t['update']:7.1f} s  (beside the loop; the loop waited {t['update_wait']:.2f} s"
              f" for updates)")
    print(f"  final mean reward (last summary): {res['final_reward']:.1f}")
    if res["profiler"] is not None:
        print_profile(res["profiler"], res["steps"])


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("benchmark.py: interrupted", file=sys.stderr)
        sys.exit(130)
