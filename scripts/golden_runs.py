"""Fixed-seed golden runs: record what a few short trainings write, then check a later tree
writes the same (a restructuring must not change behaviour).

    python scripts/golden_runs.py record golden.json    # before
    python scripts/golden_runs.py compare golden.json   # after: one line per difference

Each run (`--seed`, `--cpu`, 2-3k steps: PPO Simple, LSTM Memory, GAIL + BC, SAC) is a whole
``trainer-learn`` process. What is compared, per run:

- every checkpoint tensor (sha256 of its bytes, per variable name),
- ``stats.csv`` without its wall-time column,
- the exported ``.onnx`` and ``.pb`` files (sha256),
- ``configuration.yaml`` (sha256).
"""
from __future__ import annotations

import argparse
import csv
import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from typing import Dict, List

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: (name, config, extra options)
RUNS = [
    ("ppo_simple", "config/ppo/Simple_discrete.yaml", ["--max-steps=2000"]),
    ("lstm_memory", "config/ppo/Memory.yaml", ["--max-steps=2000"]),
    ("gail_bc", "config/ppo/Simple_gail.yaml", ["--max-steps=1000"]),
    ("sac_simple", "config/sac/Simple_continuous.yaml", ["--max-steps=1000"]),
]


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def _graph_sha(path: str) -> str:
    """A frozen GraphDef, serialised deterministically (protobuf writes map fields, such as
    node attributes, in no fixed order: the same graph has several byte strings)."""
    from tensorflow.core.framework import graph_pb2

    graph = graph_pb2.GraphDef()
    with open(path, "rb") as f:
        graph.ParseFromString(f.read())
    return _sha(graph.SerializeToString(deterministic=True))


def _onnx_sha(path: str) -> str:
    """An ONNX model up to the names tf2onnx gives folded constants (``const_fold_opt__N``
    is numbered in an order that differs from run to run): the nodes' ops, the graph's
    inputs and outputs, and every initializer's type, shape and bytes, sorted."""
    import onnx

    model = onnx.load(path)
    graph = model.graph
    parts = [n.op_type for n in graph.node]
    parts += [f"in:{i.name}" for i in graph.input] + [f"out:{o.name}" for o in graph.output]
    parts += sorted(f"{t.data_type}{list(t.dims)}{_sha(t.raw_data)}" for t in graph.initializer)
    parts += sorted(f"{p.key}={p.value}" for p in model.metadata_props)
    return _sha("\n".join(parts).encode())


def digest_run(run_dir: str) -> Dict[str, str]:
    """``{what: sha}`` of everything a run wrote that must not change."""
    import numpy as np

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import trainers.tf  # noqa: F401  (TensorFlow the project's way)
    import tensorflow as tf
    from trainers.layout import CONFIGURATION_FILE, RUN_LOGS_DIR, STATS_FILE, RunLayout

    layout = RunLayout(run_dir)
    with open(layout.configuration, "rb") as f:
        # Paths of this checkout (a demo_path) are not behaviour.
        config = f.read().replace(ROOT.encode(), b"<checkout>")
    out: Dict[str, str] = {CONFIGURATION_FILE: _sha(config)}
    for behavior_dir in sorted(p for p in glob.glob(os.path.join(run_dir, "*")) if os.path.isdir(p)):
        behavior = os.path.basename(behavior_dir)
        if behavior == RUN_LOGS_DIR:
            continue
        for index in sorted(glob.glob(os.path.join(behavior_dir, "checkpoint-*.index"))):
            prefix = index[: -len(".index")]
            reader = tf.train.load_checkpoint(prefix)
            for name in sorted(reader.get_variable_to_shape_map()):
                value = np.asarray(reader.get_tensor(name))
                out[f"{behavior}/{os.path.basename(prefix)}/{name}"] = _sha(value.tobytes())
        for path in sorted(glob.glob(os.path.join(behavior_dir, "*.pb"))):
            out[f"{behavior}/{os.path.basename(path)}"] = _graph_sha(path)
        for path in sorted(glob.glob(os.path.join(behavior_dir, "*.onnx"))):
            out[f"{behavior}/{os.path.basename(path)}"] = _onnx_sha(path)
        stats = os.path.join(behavior_dir, STATS_FILE)
        if os.path.isfile(stats):
            with open(stats, newline="") as f:
                rows: List[str] = []
                for row in csv.DictReader(f):
                    row.pop("wall_time", None)
                    row.pop("time", None)
                    # Time-valued stats (seconds) differ from run to run by nature.
                    if "time" in row.get("tag", "").lower() or "seconds" in row.get("tag", "").lower():
                        continue
                    rows.append(json.dumps(row, sort_keys=True))
            out[f"{behavior}/{STATS_FILE}"] = _sha("\n".join(rows).encode())
    return out


def run_all(results: str) -> Dict[str, Dict[str, str]]:
    digests: Dict[str, Dict[str, str]] = {}
    for name, config, extra in RUNS:
        cmd = [sys.executable, "-m", "trainers.learn", config, f"--run-id={name}", f"--results-dir={results}",
               "--seed=7", "--cpu", *extra]
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"{name}: exit {done.returncode}\n{done.stderr[-2000:]}")
        digests[name] = digest_run(os.path.join(results, name))
        print(f"{name}: {len(digests[name])} items", flush=True)
    return digests


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["record", "compare"])
    parser.add_argument("file")
    parser.add_argument("--results-tag", default="runs", help="names the fixed results folder (two checkouts at once)")
    args = parser.parse_args()
    # One fixed folder: the resolved configuration.yaml records it (a random temporary
    # folder would make every configuration.yaml differ).
    results = os.path.join(tempfile.gettempdir(), f"trainer-learn-golden-{args.results_tag}")
    shutil.rmtree(results, ignore_errors=True)
    try:
        digests = run_all(results)
    finally:
        shutil.rmtree(results, ignore_errors=True)
    if args.mode == "record":
        with open(args.file, "w") as f:
            json.dump(digests, f, indent=1, sort_keys=True)
        print(f"recorded {args.file}")
        return 0
    with open(args.file) as f:
        golden = json.load(f)
    differences = 0
    for run in sorted(set(golden) | set(digests)):
        old, new = golden.get(run, {}), digests.get(run, {})
        for key in sorted(set(old) | set(new)):
            if old.get(key) != new.get(key):
                differences += 1
                print(f"{run}: {key}: {old.get(key)} -> {new.get(key)}")
        if all(old.get(k) == new.get(k) for k in set(old) | set(new)):
            print(f"{run}: identical ({len(new)} items)")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
