"""Observation encoders: vector MLP, visual CNNs, and the body that joins them.

Visual encoders follow ML-Agents' choices (``simple``: 2 convs; ``nature_cnn``: the DQN
net; ``resnet``: Release 22's IMPALA-style stacks; ``resnet_tf``: the TF-era ML-Agents
ResNet, trainer-learn's ``resnet`` before it became R22's; ``match3``: 2 SAME convs;
``fully_connected``: flatten + dense); each maps an image ``[B, H, W, C]`` to
``[B, hidden_units]`` before the shared body.
"""
from __future__ import annotations

import re
from typing import Optional, Sequence, Tuple

from envs.base_env import ObservationKind, ObservationSpec
from trainers.exceptions import ConfigError
from trainers.config import NetworkSettings
from trainers.tf import tf
from trainers.tf.attention import (
    ATTENTION_EMBEDDING_SIZE,
    NUM_HEADS,
    entity_embedding,
    get_zero_entities_mask,
    residual_self_attention,
    self_encoding,
)
from trainers.tf.layers import SWISH_BIAS_STD, Activation, conv2d, dense, flatten, get_activation, mlp, swish
from trainers.tf.normalizer import Normalizer

# Smallest image side each encoder accepts: R22's ``ModelUtils.MIN_RESOLUTION_FOR_ENCODER``
# (the VALID convolutions / pooling must leave >= 1 pixel: simple 20 -> 4 -> 1, nature_cnn
# 36 -> 8 -> 3 -> 1, resnet 15 -> 7 -> 3 -> 1). resnet_tf pools with SAME padding and would
# take any size; it keeps the TF era's 15.
MIN_RESOLUTION = {
    "simple": 20, "nature_cnn": 36, "resnet": 15, "resnet_tf": 15, "match3": 5, "fully_connected": 1,
}

#: Slope of the leaky ReLUs after the convolutions of simple, nature_cnn and match3:
#: TensorFlow's default, kept. R22's ``nn.LeakyReLU()`` is 0.01 (no variable depends on
#: it); with 0.01 the R22 visual learning cases (nature_cnn, simple, match3; PPO and SAC;
#: seeds 1-5) all still pass with the same last-5 means (+-0.008), but learn more slowly:
#: the mean of the run's summary rewards fell in 28 of 40 seed pairs, and in all 15 of
#: visual_ppo-discrete, visual_ppo-continuous and visual_sac-discrete (0.968 -> 0.942,
#: 0.899 -> 0.859, 0.787 -> 0.762). README, "Figures behind choices in the code".
LEAKY_RELU_SLOPE = 0.2

#: Names of variables only `_resnet_tf` creates (its residual blocks are ``res_<j>``,
#: `_resnet`'s ``block_<j>``): how a checkpoint tells which ResNet wrote it.
RESNET_TF_VARIABLE = re.compile(r"(?:^|/)visual_\d+/stack_\d+/res_\d+/")


def _flatten_channels_first(x: tf.Tensor) -> tf.Tensor:
    """``[B, H, W, C] -> [B, C*H*W]`` in channel-major order, as ML-Agents (NCHW) flattens.

    The exported model takes NCHW images and tf2onnx runs the convolutions in NCHW, so
    this transpose cancels against the one tf2onnx puts after the last convolution: the
    ONNX graph has no Transpose for Barracuda's layout conversion to reorder, and its
    flatten order is ML-Agents'. (Checkpoints of visual policies written before this
    order changed load, but their first dense layer after the CNN sees permuted inputs.)
    """
    return flatten(tf.transpose(x, [0, 3, 1, 2]))


def _leaky(x: tf.Tensor) -> tf.Tensor:
    return tf.nn.leaky_relu(x, alpha=LEAKY_RELU_SLOPE)


def _simple(x: tf.Tensor, act: Activation) -> tf.Tensor:
    x = _leaky(conv2d(x, 16, 8, 4, "conv_0"))
    x = _leaky(conv2d(x, 32, 4, 2, "conv_1"))
    return _flatten_channels_first(x)


def _nature(x: tf.Tensor, act: Activation) -> tf.Tensor:
    x = _leaky(conv2d(x, 32, 8, 4, "conv_0"))
    x = _leaky(conv2d(x, 64, 4, 2, "conv_1"))
    x = _leaky(conv2d(x, 64, 3, 1, "conv_2"))
    return _flatten_channels_first(x)


def _resnet(x: tf.Tensor, act: Activation) -> tf.Tensor:
    """Release 22's ``ResNetVisualEncoder`` body: ``[B, H, W, C] -> [B, 32*h*w]``.

    Three stacks of 16, 32, 32 channels; each a 3x3 convolution (stride 1, zero padding
    1 = SAME), a 3x3 max-pool of stride 2 without padding (``h -> (h - 3) // 2 + 1``: R22's
    ``pool_out_shape``), then two residual blocks ``x + conv(swish(conv(swish(x))))``; a
    swish before the flatten. Swish here whatever the network's activation, as R22.

    The convolutions start as R22's (torch's default init, `conv2d`'s ``torch_init``): with
    He init (2.5x the spread, zero biases) the residual sums grow stack by stack (the body's
    output starts with std ~10, against ~0.05 with torch's) and R22's visual_advanced resnet
    tests fell short of R22's own results; with it they match them. The other encoders keep
    He init, under which their PPO cases learned faster (README, "Figures behind choices in
    the code").
    """
    for i, ch in enumerate((16, 32, 32)):
        x = conv2d(x, ch, 3, 1, f"stack_{i}/conv", padding="SAME", torch_init=True)
        x = tf.nn.max_pool2d(x, 3, 2, padding="VALID")
        for j in range(2):
            h = conv2d(swish(x), ch, 3, 1, f"stack_{i}/block_{j}/conv_0", padding="SAME", torch_init=True)
            h = conv2d(swish(h), ch, 3, 1, f"stack_{i}/block_{j}/conv_1", padding="SAME", torch_init=True)
            x = x + h
    return _flatten_channels_first(swish(x))


def _resnet_tf(x: tf.Tensor, act: Activation) -> tf.Tensor:
    """The TF-era ML-Agents ResNet (trainer-learn's ``resnet`` before R22's): ReLU residual
    blocks ``res_<j>`` and max-pooling with SAME padding (``h -> ceil(h / 2)``):
    ``[B, H, W, C] -> [B, 32*h*w]``. Kept so that checkpoints written with it resume."""
    for i, ch in enumerate((16, 32, 32)):
        x = conv2d(x, ch, 3, 1, f"stack_{i}/conv", padding="SAME")
        x = tf.nn.max_pool2d(x, 3, 2, padding="SAME")
        for j in range(2):
            h = conv2d(tf.nn.relu(x), ch, 3, 1, f"stack_{i}/res_{j}/conv_0", padding="SAME")
            h = conv2d(tf.nn.relu(h), ch, 3, 1, f"stack_{i}/res_{j}/conv_1", padding="SAME")
            x = x + h
    return _flatten_channels_first(tf.nn.relu(x))


def _match3(x: tf.Tensor, act: Activation) -> tf.Tensor:
    x = _leaky(conv2d(x, 35, 3, 1, "conv_0", padding="SAME"))
    x = _leaky(conv2d(x, 144, 3, 1, "conv_1", padding="SAME"))
    return _flatten_channels_first(x)


def _fully_connected(x: tf.Tensor, act: Activation) -> tf.Tensor:
    return _flatten_channels_first(x)


_VISUAL = {
    "simple": _simple,
    "nature_cnn": _nature,
    "resnet": _resnet,
    "resnet_tf": _resnet_tf,
    "match3": _match3,
    "fully_connected": _fully_connected,
}


def check_visual_sizes(specs: Sequence[ObservationSpec], encoder: str) -> None:
    """Raises ConfigError when an image is too small for the chosen visual encoder."""
    smallest = MIN_RESOLUTION[encoder]
    for spec in specs:
        if spec.kind == ObservationKind.VISUAL and min(spec.shape[0], spec.shape[1]) < smallest:
            raise ConfigError(
                f"network_settings.vis_encode_type: {encoder} needs images of at least "
                f"{smallest}x{smallest}, but observation {spec.name!r} is {spec.shape[0]}x{spec.shape[1]}"
            )


def body_bias_std(network: NetworkSettings, normalizers: Sequence[Optional[Normalizer]]) -> float:
    """Spread of the body layers' initial biases: SWISH_BIAS_STD for swish on normalised
    vector observations, else 0.

    Normalised observations have zero mean; with zero biases every swish unit then starts
    centred on 0 (spread ~0.3 under orthogonal init), where swish is x/2 + x^2/4, so all
    units compute the same near-linear function of the observation. On Gymnasium
    Acrobot-v1 (normalize on) PPO stayed at -500 for 200k steps in 3 of 3 seeds; without
    normalisation, or normalising without centring, or with these biases, it learns (4 of
    4 seeds above -250 at 120k; README, "Swish on normalised observations"). Raw
    observations keep their own offsets (Acrobot's cos terms sit near 1), and tanh is odd
    and centred on 0, so both keep ML-Agents' zero biases (with biases, tanh on Acrobot
    learned later).
    """
    if network.activation == "swish" and any(n is not None for n in normalizers):
        return SWISH_BIAS_STD
    return 0.0


def build_body(
    obs: Sequence[tf.Tensor],
    specs: Sequence[ObservationSpec],
    network: NetworkSettings,
    normalizers: Sequence[Optional[Normalizer]],
    name: str,
    num_layers: Optional[int] = None,
    extra: Optional[tf.Tensor] = None,
) -> tf.Tensor:
    """Encodes every observation and joins them: ``obs[i]`` ``[B, *shape_i]`` -> ``[B, hidden]``.

    Vector observations are normalised (when a normalizer is given) and concatenated; each
    visual observation goes through its own CNN to ``hidden_units``; entity observations
    ``[B, E_i, F_i]`` go through `encode_entities` (``[B, 128]``, after the others); the
    concatenation then goes through ``num_layers`` dense layers (the argument, when given,
    else the network's; 0 leaves the joined encodings as they are). ``extra`` ``[B, k]``
    (SAC's Q networks: the action) joins the concatenation before those layers.
    """
    act = get_activation(network.activation)
    parts = []
    entities = []
    with tf.variable_scope(name):
        for i, (x, spec, norm) in enumerate(zip(obs, specs, normalizers)):
            if spec.kind == ObservationKind.VISUAL:
                with tf.variable_scope(f"visual_{i}"):
                    h = _VISUAL[network.vis_encode_type](x, act)
                    parts.append(dense(h, network.hidden_units, "dense", act))
            elif spec.kind == ObservationKind.ENTITIES:
                entities.append((i, x))  # never normalised, as ML-Agents' EntityEmbedding
            else:
                parts.append(norm.normalize(x) if norm is not None else x)
        if entities:
            parts.append(encode_entities(entities, parts))
        if extra is not None:
            parts.append(extra)
        joined = parts[0] if len(parts) == 1 else tf.concat(parts, axis=1)
        layers = network.num_layers if num_layers is None else num_layers
        return mlp(joined, network.hidden_units, layers, act, "body", body_bias_std(network, normalizers))


def encode_entities(entities: Sequence[Tuple[int, tf.Tensor]], others: Sequence[tf.Tensor]) -> tf.Tensor:
    """ML-Agents' variable-length branch of `ObservationEncoder`: ``[B, 128]``.

    ``entities``: (observation index, ``[B, E_i, F_i]``) for each entity observation;
    ``others``: the other observations' encodings ``[B, k_j]`` (normalised vectors, CNN
    outputs). As ML-Agents: the others, concatenated, go through one swish layer to the
    agent's "self" ``[B, 128]``, concatenated to every entity of every entity observation
    (`entity_embedding`, one per observation, scope ``entities_<i>``); the embeddings of
    all entity observations are joined ``[B, sum E_i, 128]`` and go through one
    `residual_self_attention` (4 heads) whose mask is the zero rows
    (`get_zero_entities_mask`). Without other observations the entities are embedded
    alone.
    """
    encoded_self = None
    if others:
        joined = others[0] if len(others) == 1 else tf.concat(list(others), axis=1)
        encoded_self = self_encoding(joined, ATTENTION_EMBEDDING_SIZE, "self_encoding")
    embeddings = [
        entity_embedding(x, ATTENTION_EMBEDDING_SIZE, f"entities_{i}", self_obs=encoded_self) for i, x in entities
    ]
    masks = [get_zero_entities_mask(x) for _, x in entities]
    qkv = embeddings[0] if len(embeddings) == 1 else tf.concat(embeddings, axis=1)
    mask = masks[0] if len(masks) == 1 else tf.concat(masks, axis=1)
    return residual_self_attention(qkv, mask, NUM_HEADS, "attention")
