"""Exported ONNX models against what Unity's runtimes import (issue 16): the opset, every
op type of each kind of policy against the checked-in lists of Barracuda 2.x and Sentis
(``tests/data/unity_onnx_ops.json``), no NHWC Transpose for images, and sampling ops
without a fixed seed (each onnxruntime session draws its own noise).

To cover a new kind of policy (LSTM once export has ``recurrent_in``/``recurrent_out``:
add ``"lstm": (spec, NetworkSettings(memory=MemorySettings(...)))`` to ``MODELS``), add it
to ``MODELS``; every test below runs on it.
"""
from __future__ import annotations

import json
import os
from typing import Dict, Tuple

import numpy as np
import onnx
import pytest

from envs.base_env import ActionSpec, BehaviorSpec, ObservationSpec
from trainers.export import DEFAULT_OPSET, RANDOM_OPS, check_inputs, export_policy, model_feeds, onnx_session
from trainers.ppo.trainer import PPOTrainer
from trainers.config import NetworkSettings, TrainerSettings
from trainers.stats import StatsReporter

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, "..", "..", "data", "unity_onnx_ops.json"), encoding="utf-8") as _stream:
    UNITY = json.load(_stream)
SUPPORTED = set(UNITY["barracuda_2"]) & set(UNITY["sentis"])

# 40x36 images leave more than one pixel after every encoder's convolutions, so that the
# flatten order matters (with 1x1 feature maps NHWC and NCHW flatten alike).
_IMAGE = ObservationSpec((40, 36, 3), "camera", "visual")
_HYBRID = ActionSpec(2, (3, 2))
MODELS: Dict[str, Tuple[BehaviorSpec, NetworkSettings]] = {
    "continuous": (BehaviorSpec((ObservationSpec((4,)), ObservationSpec((3,))), ActionSpec(2)), NetworkSettings()),
    "discrete": (BehaviorSpec((ObservationSpec((6,)),), ActionSpec(0, (3, 2))), NetworkSettings()),
    "hybrid": (BehaviorSpec((ObservationSpec((5,)),), _HYBRID), NetworkSettings()),
    # Entity observations (BufferSensor): embeddings + masked residual self-attention.
    "entities": (
        BehaviorSpec((ObservationSpec((4,)), ObservationSpec((5, 3), "buffer", "entities")), _HYBRID),
        NetworkSettings(),
    ),
    **{
        f"visual_{encoder}": (
            BehaviorSpec((_IMAGE, ObservationSpec((4,))), _HYBRID),
            NetworkSettings(vis_encode_type=encoder),
        )
        for encoder in ("simple", "nature_cnn", "resnet", "match3", "fully_connected")
    },
}


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """kind -> (path of the exported .onnx at the default opset, spec), built on demand."""
    out = tmp_path_factory.mktemp("onnx")
    built: Dict[str, Tuple[str, BehaviorSpec]] = {}

    def get(kind: str) -> Tuple[str, BehaviorSpec]:
        if kind not in built:
            spec, network = MODELS[kind]
            settings = TrainerSettings(network_settings=network.__class__(**{
                **network.__dict__, "hidden_units": 16, "num_layers": 1, "normalize": True,
            }))
            trainer = PPOTrainer(kind, spec, settings, StatsReporter(kind, []), 0)
            try:
                # check=True: onnxruntime and TF agree with the training graph (1e-5).
                result = export_policy(trainer.policy, str(out / kind), formats=("onnx",))
            finally:
                trainer.close()
            built[kind] = (result.onnx_path, spec)
        return built[kind]

    return get


@pytest.mark.parametrize("kind", list(MODELS))
def test_ops_and_opset_are_ones_every_unity_runtime_imports(kind, exported):
    path, _ = exported(kind)
    model = onnx.load(path)
    opsets = {o.domain or "": o.version for o in model.opset_import}
    ops = sorted({node.op_type for node in model.graph.node})
    listing = f"{kind}: opset {opsets}, ops {ops}"
    assert opsets == {"": DEFAULT_OPSET}, listing
    assert UNITY["opsets"]["mlagents_export"] <= DEFAULT_OPSET <= UNITY["opsets"]["barracuda_2_max"], listing
    outside = sorted(set(ops) - SUPPORTED)
    assert not outside, f"{listing}: not imported by Barracuda 2.x and Sentis: {outside}"
    for node in model.graph.node:
        if node.op_type in ("Unsqueeze", "Squeeze"):
            # Barracuda before 2.3 reads the axes attribute only.
            assert len(node.input) == 1 and any(a.name == "axes" for a in node.attribute), listing
        if node.op_type in RANDOM_OPS:
            assert "seed" not in {a.name for a in node.attribute}, listing


@pytest.mark.parametrize("kind", [k for k in MODELS if k.startswith("visual")])
def test_images_need_no_transpose(kind, exported):
    """ML-Agents' layout: NCHW input, NCHW convolutions, channel-major flatten."""
    path, _ = exported(kind)
    ops = [node.op_type for node in onnx.load(path).graph.node]
    assert "Transpose" not in ops
    assert "Reshape" in ops


_SESSION_SCRIPT = """
import sys
import numpy as np
import onnxruntime as ort
feeds = dict(np.load(sys.argv[2]))
session = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
names = [o.name for o in session.get_outputs()]
np.savez(sys.argv[3], **dict(zip(names, session.run(names, feeds))))
"""


def test_sessions_draw_their_own_noise_and_agree_on_modes(exported, tmp_path):
    """Two onnxruntime sessions (in two processes, as two players or two runs would be)
    draw different stochastic actions; the deterministic outputs are identical. With the
    ``seed=0`` that tf2onnx writes, every session drew the same noise. (onnxruntime seeds
    unseeded random ops once per process, so two sessions in one process would agree.)"""
    import subprocess
    import sys

    path, spec = exported("hybrid")
    obs, masks = check_inputs(spec, n=256, seed=4)
    session = onnx_session(path)
    feeds = model_feeds([i.name for i in session.get_inputs()], spec, obs, masks, legacy=False)
    np.savez(tmp_path / "feeds.npz", **feeds)
    runs = []
    for k in range(2):
        out = tmp_path / f"out{k}.npz"
        subprocess.run([sys.executable, "-c", _SESSION_SCRIPT, path, str(tmp_path / "feeds.npz"), str(out)], check=True)
        runs.append(dict(np.load(out)))
    first, second = runs
    assert not np.array_equal(first["continuous_actions"], second["continuous_actions"])
    assert not np.array_equal(first["discrete_actions"], second["discrete_actions"])
    for key in ("deterministic_continuous_actions", "deterministic_discrete_actions"):
        np.testing.assert_array_equal(first[key], second[key])
    # One session draws fresh noise at every call too.
    a, b = (session.run(["continuous_actions"], feeds)[0] for _ in range(2))
    assert not np.array_equal(a, b)
