"""ML-Agents Release 22's own learning tests on chosen training seeds (issue 32 yardstick).

Runs R22's trainer (not ours) on cases copied from R22's
``ml-agents/mlagents/trainers/tests/torch_entities/test_hybrid.py`` and
``test_simple_rl.py`` (commit ac576f9f): the same ``SimpleEnvironment`` arguments, the same
``attr.evolve`` of ``dummy_config``'s PPO/SAC settings, R22's own
``check_environment_trains`` (called with ``success_threshold=None`` so a failing seed does
not raise), and the figure that check compares with the threshold:
``default_reward_processor(env.final_rewards["1D"])`` = mean of the last 5 episode returns.
Each (case, seed) runs in a fresh interpreter (no state shared between seeds) and prints one
``RESULT {json}`` line; a summary table follows.

What ``training_seed`` seeds in R22: ``TrainerController.__init__`` calls
``np.random.seed(s)`` and ``torch.manual_seed(s)`` (the trainer/policy ``seed`` argument is
stored but not used to seed anything else). ``SimpleEnvironment``'s goal RNG is
``random.Random(str(<constructor args>))``: fixed per case, independent of the seed.

It runs under a separate virtualenv with R22 installed, NOT the project's interpreter::

    mkdir -p /tmp/mla22
    git --git-dir=/work/.mirror/chmosquera+ml-agents/repo archive ac576f9f ml-agents ml-agents-envs \
        | tar -x -C /tmp/mla22          # (an "invalid object" error for a Project/ demo file is harmless)
    python3 -m venv /tmp/mlavenv
    /tmp/mlavenv/bin/pip install /opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl
    /tmp/mlavenv/bin/pip install --no-deps --ignore-requires-python \
        -e /tmp/mla22/ml-agents-envs -e /tmp/mla22/ml-agents
    /tmp/mlavenv/bin/pip install "numpy==1.23.5" "cattrs>=1.1.0,<1.7" attrs pyyaml \
        "protobuf<3.21" grpcio Pillow tensorboard six cloudpickle filelock h5py "setuptools<70" pytest

(R22 pins Python <=3.10; with 3.11 the pins that matter are numpy<1.24 -- the test env uses
``np.bool`` -- cattrs<1.7, protobuf<3.21 and setuptools<70 for ``pkg_resources``; grpcio's
pin <=1.48.2 has no 3.11 wheel and the newest works for this.)

Usage::

    /tmp/mlavenv/bin/python scripts/ml_agents_yardstick.py CASE [CASE ...] [--seeds=1,2,3,4,5] [--pinned]

``--pinned`` adds the case's own R22 seed (its ``training_seed``, or 1337, the default of
``check_environment_trains``). ``--list`` prints the cases. Torch uses R22's own thread
choice (``cpu_utils.get_num_threads_to_use``: half the CPUs, at most 4).
"""
import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any, Callable, Dict, List, Tuple

BRAIN_NAME = "1D"


def _cases() -> Dict[str, Callable[[], Tuple[Any, Any, float, int]]]:
    """case name -> builder returning (env, trainer_config, success_threshold, R22 seed)."""
    import attr
    from mlagents.trainers.settings import EncoderType
    from mlagents.trainers.tests.dummy_config import ppo_dummy_config, sac_dummy_config
    from mlagents.trainers.tests.simple_test_envs import SimpleEnvironment

    def simple_ppo(action_sizes: Tuple[int, int]) -> Callable[[], Tuple[Any, Any, float, int]]:
        def build() -> Tuple[Any, Any, float, int]:
            cfg = ppo_dummy_config()
            env = SimpleEnvironment([BRAIN_NAME], action_sizes=action_sizes)
            return env, attr.evolve(cfg), 0.9, 1337
        return build

    def hybrid_ppo(action_size: Tuple[int, int]) -> Callable[[], Tuple[Any, Any, float, int]]:
        def build() -> Tuple[Any, Any, float, int]:
            cfg = ppo_dummy_config()
            env = SimpleEnvironment([BRAIN_NAME], action_sizes=action_size, step_size=0.8)
            hp = attr.evolve(cfg.hyperparameters, batch_size=64, buffer_size=1024, learning_rate=1e-3)
            config = attr.evolve(cfg, hyperparameters=hp,
                                 network_settings=attr.evolve(cfg.network_settings), max_steps=20000)
            return env, config, 0.9, 1337
        return build

    def hybrid_visual_ppo() -> Tuple[Any, Any, float, int]:
        cfg = ppo_dummy_config()
        env = SimpleEnvironment([BRAIN_NAME], num_visual=1, num_vector=0, action_sizes=(1, 1))
        hp = attr.evolve(cfg.hyperparameters, batch_size=64, buffer_size=1024, learning_rate=1e-4)
        return env, attr.evolve(cfg, hyperparameters=hp, max_steps=8000), 0.9, 1336

    def hybrid_visual_sac() -> Tuple[Any, Any, float, int]:
        cfg = sac_dummy_config()
        env = SimpleEnvironment([BRAIN_NAME], num_visual=1, num_vector=0, action_sizes=(1, 1))
        hp = attr.evolve(cfg.hyperparameters, buffer_size=50000, batch_size=128, learning_rate=3.0e-4)
        return env, attr.evolve(cfg, hyperparameters=hp, max_steps=3000), 0.9, 1337

    def visual_advanced(trainer: str, enc: str) -> Callable[[], Tuple[Any, Any, float, int]]:
        def build() -> Tuple[Any, Any, float, int]:
            env = SimpleEnvironment(
                [BRAIN_NAME], action_sizes=(0, 1), num_visual=1, num_vector=0, step_size=0.5,
                vis_obs_size=(5, 5, 5) if enc == "match3" else (3, 36, 36),
            )
            # R22 evolves SAC's network settings for both trainers.
            net = attr.evolve(sac_dummy_config().network_settings, vis_encode_type=EncoderType(enc))
            if trainer == "ppo":
                cfg = ppo_dummy_config()
                hp = attr.evolve(cfg.hyperparameters, learning_rate=3.0e-4)
                config = attr.evolve(cfg, hyperparameters=hp, network_settings=net,
                                     max_steps=900, summary_freq=100)
            else:
                cfg = sac_dummy_config()
                hp = attr.evolve(cfg.hyperparameters, batch_size=16, learning_rate=3e-4, buffer_init_steps=0)
                config = attr.evolve(cfg, hyperparameters=hp, network_settings=net, max_steps=100)
            return env, config, 0.5, 1337
        return build

    cases: Dict[str, Callable[[], Tuple[Any, Any, float, int]]] = {
        "simple_ppo-(0,1)": simple_ppo((0, 1)),
        "simple_ppo-(1,0)": simple_ppo((1, 0)),
        "hybrid_ppo-(1,1)": hybrid_ppo((1, 1)),
        "hybrid_visual_ppo": hybrid_visual_ppo,
        "hybrid_visual_sac": hybrid_visual_sac,
    }
    for enc in ("resnet", "nature_cnn", "match3"):
        cases[f"visual_advanced_ppo-{enc}"] = visual_advanced("ppo", enc)
        cases[f"visual_advanced_sac-{enc}"] = visual_advanced("sac", enc)
    return cases


def run_one(case: str, seed: int) -> Dict[str, Any]:
    """Train R22 on ``case`` with ``training_seed=seed`` in this process; its figures."""
    import contextlib
    import io

    import torch
    from mlagents.plugins.trainer_type import register_trainer_plugins
    from mlagents.trainers.tests.check_env_trains import (
        check_environment_trains,
        default_reward_processor,
    )

    register_trainer_plugins()  # what mlagents-learn does at start (ppo, sac, poca)
    # The final checkpoint's ONNX export needs onnx/onnxscript with torch 2.x; it runs after
    # the last update and cannot change the figures, so it is skipped (the .pt is still saved).
    from mlagents.trainers.torch_entities.model_serialization import ModelSerializer
    ModelSerializer.export_policy_model = lambda self, output_filepath: None  # type: ignore
    env, config, threshold, _ = _cases()[case]()
    t0 = time.time()
    log = io.StringIO()
    with contextlib.redirect_stdout(log):  # DebugWriter prints every summary
        check_environment_trains(env, {BRAIN_NAME: config}, success_threshold=None,
                                 training_seed=seed)
        final = float(default_reward_processor(env.final_rewards[BRAIN_NAME]))
    wall = time.time() - t0
    rewards = env.final_rewards[BRAIN_NAME]
    return {
        "case": case, "seed": seed, "final": round(final, 4), "threshold": threshold,
        "passed": bool(final > threshold), "episodes": len(rewards),
        "last5": [round(float(r), 4) for r in rewards[-5:]], "wall_s": round(wall, 1),
        "torch_threads": torch.get_num_threads(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("cases", nargs="*")
    parser.add_argument("--seeds", default="1,2,3,4,5")
    parser.add_argument("--pinned", action="store_true", help="also R22's own seed for the case")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.list:
        print("\n".join(_cases()))
        return
    if args.one:  # child: exactly one case and one seed
        print("RESULT " + json.dumps(run_one(args.cases[0], int(args.seeds))), flush=True)
        return
    known = _cases()
    bad = [c for c in args.cases if c not in known]
    if bad or not args.cases:
        sys.exit(f"error: unknown or no case(s) {bad}; known: {', '.join(known)}")
    results: List[Dict[str, Any]] = []
    for case in args.cases:
        seeds = [int(s) for s in args.seeds.split(",") if s]
        if args.pinned:
            pinned = known[case]()[3]
            if pinned not in seeds:
                seeds.append(pinned)
        for seed in seeds:
            proc = subprocess.run(
                [sys.executable, os.path.abspath(__file__), case, f"--seeds={seed}", "--one"],
                capture_output=True, text=True,
            )
            lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
            if proc.returncode != 0 or not lines:
                res = {"case": case, "seed": seed, "error": proc.stderr.strip().splitlines()[-1:]}
            else:
                res = json.loads(lines[-1][len("RESULT "):])
            print("RESULT " + json.dumps(res), flush=True)
            results.append(res)
    print("\ncase | seed | final | pass | episodes | wall s")
    for r in results:
        if "error" in r:
            print(f"{r['case']} | {r['seed']} | ERROR {r['error']}")
        else:
            print(f"{r['case']} | {r['seed']} | {r['final']:.4f} | {r['passed']} | {r['episodes']} | {r['wall_s']}")
    for case in args.cases:
        ok = [r for r in results if r["case"] == case and "final" in r]
        print(f"{case}: {sum(r['passed'] for r in ok)} of {len(ok)} above {ok[0]['threshold'] if ok else '?'}")


if __name__ == "__main__":
    main()
