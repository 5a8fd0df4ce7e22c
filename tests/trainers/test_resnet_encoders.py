"""``vis_encode_type: resnet`` is Release 22's ResNet; ``resnet_tf`` the TF-era one it
replaced, which runs written before the change resume with (issue 32).

R22: ``ml-agents/mlagents/trainers/torch_entities/encoders.py`` (``ResNetBlock``,
``ResNetVisualEncoder``, ``pool_out_shape``) and ``utils.py``
(``MIN_RESOLUTION_FOR_ENCODER``), commit ac576f9f.
"""
from __future__ import annotations

import json
import os
import textwrap
from typing import Dict, List, Tuple

import numpy as np
import onnx
import pytest
import yaml

from envs.base_env import ActionSpec, BehaviorSpec, ObservationKind, ObservationSpec
from trainers.config import CuriositySettings, ExtrinsicSettings, NetworkSettings, TrainerSettings
from trainers.exceptions import CheckpointError, ConfigError
from trainers.tf import tf
from trainers.tf.encoder_compat import resnet_tf_settings
from trainers.tf.encoders import _VISUAL, MIN_RESOLUTION, check_visual_sizes


def _pool(n: int) -> int:
    """R22's ``pool_out_shape``: a 3x3 max-pool of stride 2 without padding."""
    return (n - 3) // 2 + 1


def _body(encoder: str, shape: Tuple[int, int, int], seed: int = 0):
    graph = tf.Graph()
    with graph.as_default():
        tf.set_random_seed(seed)
        x = tf.placeholder(tf.float32, (None,) + shape)
        with tf.variable_scope("visual_0"):
            out = _VISUAL[encoder](x, tf.nn.relu)
    return graph, x, out


def test_resnet_flat_size_is_r22s():
    """Three stacks of pooling: 36 -> 17 -> 8 -> 3, so 32 * 3 * 3 = 288 features (R22's
    ``final_flat_size``); 15 -> 7 -> 3 -> 1 (32); 40 -> 19 -> 9 -> 4; 84 -> 41 -> 20 -> 9."""
    hand = {15: 1, 36: 3, 40: 4, 84: 9}
    for h, w in [(15, 15), (36, 36), (40, 36), (84, 84)]:
        assert _pool(_pool(_pool(h))) == hand[h] and _pool(_pool(_pool(w))) == hand[w]
        _, _, out = _body("resnet", (h, w, 3))
        assert out.shape.as_list() == [None, 32 * hand[h] * hand[w]], (h, w)
    # The TF era's SAME pooling keeps ceil(n / 2): 36 -> 18 -> 9 -> 5.
    _, _, old = _body("resnet_tf", (36, 36, 3))
    assert old.shape.as_list() == [None, 32 * 5 * 5]


def _swish(x: np.ndarray) -> np.ndarray:
    return x / (1.0 + np.exp(-x))


def _conv_same(x: np.ndarray, kernel: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """3x3, stride 1, zero padding 1 (``nn.Conv2d(c, c, [3, 3], [1, 1], padding=1)``)."""
    b, h, w, _ = x.shape
    padded = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    out = np.zeros((b, h, w, kernel.shape[-1]))
    for i in range(3):
        for j in range(3):
            out += padded[:, i:i + h, j:j + w, :] @ kernel[i, j]
    return out + bias


def _max_pool(x: np.ndarray) -> np.ndarray:
    """``nn.MaxPool2d([3, 3], [2, 2])``: no padding."""
    h, w = _pool(x.shape[1]), _pool(x.shape[2])
    return np.stack([np.stack([x[:, 2 * i:2 * i + 3, 2 * j:2 * j + 3, :].max(axis=(1, 2)) for j in range(w)], 1)
                     for i in range(h)], 1)


def test_resnet_computes_r22s_forward_pass():
    """The graph against R22's ``ResNetVisualEncoder.sequential`` written out in numpy with
    the graph's own weights (the flatten channel-major, as NCHW torch reshapes)."""
    graph, x, out = _body("resnet", (17, 16, 3), seed=3)
    images = np.random.default_rng(0).uniform(0, 1, (2, 17, 16, 3))
    with tf.Session(graph=graph) as sess:
        sess.run(tf.variables_initializer(graph.get_collection(tf.GraphKeys.GLOBAL_VARIABLES)))
        got = sess.run(out, {x: images})
        weights = {v.op.name: sess.run(v) for v in graph.get_collection(tf.GraphKeys.GLOBAL_VARIABLES)}
    names = sorted(weights)
    assert not [n for n in names if "/res_" in n] and "visual_0/stack_2/block_1/conv_1/kernel" in names
    h = images
    for i in range(3):
        stack = f"visual_0/stack_{i}"
        h = _max_pool(_conv_same(h, weights[f"{stack}/conv/kernel"], weights[f"{stack}/conv/bias"]))
        for j in range(2):
            scope = f"visual_0/stack_{i}/block_{j}"
            r = _conv_same(_swish(h), weights[f"{scope}/conv_0/kernel"], weights[f"{scope}/conv_0/bias"])
            h = h + _conv_same(_swish(r), weights[f"{scope}/conv_1/kernel"], weights[f"{scope}/conv_1/bias"])
    want = _swish(h).transpose(0, 3, 1, 2).reshape(2, -1)  # 17x16 -> 1x1 after 3 pools: [2, 32]
    assert got.shape == want.shape == (2, 32)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_min_resolution_is_r22s():
    assert {k: MIN_RESOLUTION[k] for k in ("fully_connected", "match3", "simple", "nature_cnn", "resnet")} == {
        "fully_connected": 1, "match3": 5, "simple": 20, "nature_cnn": 36, "resnet": 15,
    }
    check_visual_sizes([ObservationSpec((15, 15, 3), "cam", "visual")], "resnet")
    with pytest.raises(ConfigError) as err:
        check_visual_sizes([ObservationSpec((14, 20, 3), "cam", "visual")], "resnet")
    assert str(err.value) == (
        "network_settings.vis_encode_type: resnet needs images of at least 15x15, but observation 'cam' is 14x20"
    )


def _names(*scopes: str) -> List[str]:
    return [f"{s}/encoder/visual_0/stack_0/res_1/conv_0/kernel" for s in scopes] + ["global_step"]


def test_legacy_settings_change_only_the_networks_whose_variables_are_old():
    resnet = NetworkSettings(hidden_units=16, vis_encode_type="resnet")
    settings = TrainerSettings(network_settings=resnet, reward_signals={
        "extrinsic": ExtrinsicSettings(), "curiosity": CuriositySettings(network_settings=resnet),
    })
    # A checkpoint of the new ResNet, or without images: nothing changes.
    new = ["policy/encoder/visual_0/stack_0/block_1/conv_0/kernel"]
    assert resnet_tf_settings(settings, new) == (settings, [])
    # Old policy and critic, new curiosity network.
    built, changed = resnet_tf_settings(settings, _names("policy", "critic") + new)
    assert changed == ["network_settings.vis_encode_type"]
    assert built.network_settings.vis_encode_type == "resnet_tf"
    assert built.reward_signals["curiosity"].network_settings.vis_encode_type == "resnet"
    # Everything old (a run written before the change).
    built, changed = resnet_tf_settings(settings, _names("policy", "curiosity"))
    assert changed == ["network_settings.vis_encode_type", "reward_signals.curiosity.network_settings.vis_encode_type"]
    assert built.reward_signals["curiosity"].network_settings.vis_encode_type == "resnet_tf"
    # Another encoder configured: left for the restore to report.
    simple = TrainerSettings(network_settings=NetworkSettings(vis_encode_type="simple"))
    assert resnet_tf_settings(simple, _names("policy")) == (simple, [])


def _encoder_graph(encoder: str):
    """A `BehaviorGraph` holding one 16x16 visual body (all a checkpoint's encoder
    variables are), finalized."""
    from trainers.graph import BehaviorGraph

    spec = BehaviorSpec((ObservationSpec((16, 16, 3), "cam", ObservationKind.VISUAL),), ActionSpec(0, (2,)))
    behavior = BehaviorGraph(TrainerSettings(), spec, seed=0)
    with behavior.graph.as_default(), tf.variable_scope("policy/encoder/visual_0"):
        _VISUAL[encoder](tf.placeholder(tf.float32, (None, 16, 16, 3)), tf.nn.relu)
    behavior.finalize()
    return behavior


def test_old_checkpoint_does_not_restore_into_the_new_resnet(tmp_path):
    """Why the resume path below is needed: the variables differ (one clear line, no
    TensorFlow traceback, when nothing chooses resnet_tf)."""
    prefix = str(tmp_path / "checkpoint-1")
    old = _encoder_graph("resnet_tf")
    try:
        old.save(prefix)
    finally:
        old.close()
    new = _encoder_graph("resnet")
    try:
        with pytest.raises(CheckpointError) as err:
            new.restore(prefix)
    finally:
        new.close()
    assert "cannot restore checkpoint" in str(err.value) and "\n" not in str(err.value)


CONFIG = """\
behaviors:
  Simple:
    trainer_type: ppo
    hyperparameters: {{batch_size: 16, buffer_size: 16, num_epoch: 1}}
    network_settings: {{hidden_units: 8, num_layers: 1, vis_encode_type: {encoder}}}
    max_steps: 32
    checkpoint_interval: 32
    summary_freq: 32
env_settings:
  env_path: builtin:Simple
  env_args: {{num_visual: 1, num_vector: 0, vis_obs_size: [16, 16, 3], continuous: 0, discrete: 1}}
"""


def test_run_written_with_the_old_resnet_resumes_under_resnet(run_cli, tmp_path, capsys):
    """A run trained with ``resnet_tf`` (= ``resnet`` before R22's), resumed with a config
    that says ``resnet``: it builds resnet_tf, says so in one line, records it in
    configuration.yaml, and continues from the checkpoint (exports checked as usual);
    trainer-export of the run does the same."""
    config = tmp_path / "run.yaml"
    config.write_text(textwrap.dedent(CONFIG.format(encoder="resnet_tf")))
    code, _, err = run_cli(str(config), "--run-id=old")
    assert code == 0, err
    run_dir = run_cli.results / "old"
    # As a run written before the change: its configuration.yaml says resnet.
    saved_path = run_dir / "configuration.yaml"
    saved = yaml.safe_load(saved_path.read_text())
    saved["behaviors"]["Simple"]["network_settings"]["vis_encode_type"] = "resnet"
    saved_path.write_text(yaml.safe_dump(saved, sort_keys=False))
    from trainers.cli.export import main as export_main

    assert export_main([str(run_dir), f"--out={tmp_path / 'exported'}", "--format=pb"]) == 0
    out = capsys.readouterr().out
    assert [line for line in out.splitlines() if "TF-era ResNet" in line] != [], out
    assert (tmp_path / "exported" / "Simple.pb").exists()

    config.write_text(textwrap.dedent(CONFIG.format(encoder="resnet")))
    code, out, err = run_cli(str(config), "--run-id=old", "--resume", "--max-steps=48")
    assert code == 0, err
    lines = [line for line in out.splitlines() if "TF-era ResNet" in line]
    assert len(lines) == 1 and "behaviors.Simple.network_settings.vis_encode_type: resnet_tf" in lines[0], out
    saved = yaml.safe_load((run_dir / "configuration.yaml").read_text())
    assert saved["behaviors"]["Simple"]["network_settings"]["vis_encode_type"] == "resnet_tf"
    assert (run_dir / "Simple" / "checkpoint-48.index").exists()
    status: Dict = json.loads((run_dir / "run_logs" / "training_status.json").read_text())
    assert status["behaviors"]["Simple"]["step"] == 48
    # Both runs exported resnet_tf with the export's own check (ONNX and frozen graph against
    # the live graph, 1e-5); its ops are ones Barracuda 2.x and Sentis import (R22's resnet:
    # tests/trainers/export/test_onnx_runtimes.py).
    with open(os.path.join(os.path.dirname(__file__), "..", "data", "unity_onnx_ops.json"), encoding="utf-8") as f:
        unity = json.load(f)
    ops = {node.op_type for node in onnx.load(str(run_dir / "Simple" / "Simple-48.onnx")).graph.node}
    assert {"Conv", "MaxPool", "Relu"} <= ops and not ops - (set(unity["barracuda_2"]) & set(unity["sentis"])), ops
    assert (run_dir / "Simple" / "Simple-48.pb").exists()
