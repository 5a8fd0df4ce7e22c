"""Benchmark of model export and exported-model inference.

For a CartPole-sized policy (obs 4, discrete [2], 2x64 tanh) and a visual policy (84x84x3,
nature_cnn and simple): the time `export_policy` takes (pb + ONNX, with the built-in check),
and the latency of one inference call with onnxruntime (every output, as Unity's runtime
fetches them; 1 intra-op thread) at batch 1 and 64, next to the live TF policy's
``act(deterministic=True)`` for reference.

Usage: python scripts/benchmark_export.py [--calls=N] [--threads=N]
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time


def _time_calls(fn, calls: int) -> float:
    """Median seconds per call after a few warm-up calls."""
    for _ in range(5):
        fn()
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()

    from envs.base_env import ActionSpec, BehaviorSpec, ObservationSpec
    from trainers.export import check_inputs, export_policy, model_feeds, onnx_session
    from trainers.ppo.trainer import PPOTrainer
    from trainers.config import NetworkSettings, TrainerSettings
    from trainers.stats import StatsReporter

    cases = [
        (
            "cartpole (4 -> [2], 2x64 tanh)",
            BehaviorSpec((ObservationSpec((4,)),), ActionSpec(0, (2,))),
            NetworkSettings(hidden_units=64, num_layers=2, activation="tanh", normalize=True),
        ),
        (
            "visual 84x84x3 nature_cnn",
            BehaviorSpec((ObservationSpec((84, 84, 3), "camera", "visual"),), ActionSpec(0, (3,))),
            NetworkSettings(hidden_units=128, num_layers=2, vis_encode_type="nature_cnn"),
        ),
        (
            "visual 84x84x3 simple",
            BehaviorSpec((ObservationSpec((84, 84, 3), "camera", "visual"),), ActionSpec(2)),
            NetworkSettings(hidden_units=128, num_layers=2, vis_encode_type="simple"),
        ),
    ]
    rows = []
    with tempfile.TemporaryDirectory() as out:
        for title, spec, network in cases:
            trainer = PPOTrainer("Bench", spec, TrainerSettings(network_settings=network), StatsReporter("Bench", []), 1)
            policy = trainer.policy
            export_policy(policy, out, check=False)  # warm-up: tf2onnx imports, first conversion
            start = time.perf_counter()
            result = export_policy(policy, out, check=True)
            export_s = time.perf_counter() - start
            session = onnx_session(result.onnx_path, threads=args.threads)
            outputs = [o.name for o in session.get_outputs()]
            row = [title, export_s, result.max_diff]
            for n in (1, 64):
                obs, masks = check_inputs(spec, n=n)
                feeds = model_feeds(result.input_names, spec, obs, masks, legacy=False)
                row.append(_time_calls(lambda: session.run(outputs, feeds), args.calls))
                row.append(_time_calls(lambda: policy.act(obs, masks, deterministic=True), args.calls))
            rows.append(row)
            trainer.close()
    header = (
        f"{'policy':32s} {'export s':>9s} {'max diff':>9s} "
        f"{'ort b1 us':>10s} {'tf b1 us':>9s} {'ort b64 us':>11s} {'tf b64 us':>10s}"
    )
    print(header)
    print("-" * len(header))
    for title, export_s, diff, o1, t1, o64, t64 in rows:
        print(
            f"{title:32s} {export_s:9.2f} {diff:9.1e} "
            f"{o1 * 1e6:10.0f} {t1 * 1e6:9.0f} {o64 * 1e6:11.0f} {t64 * 1e6:10.0f}"
        )


if __name__ == "__main__":
    main()
