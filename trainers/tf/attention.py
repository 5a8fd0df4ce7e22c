"""Entity embeddings and masked residual self-attention (variable-length observations).

ML-Agents' attention block (``torch_entities/attention.py``), in TF1 graph ops with
``get_variable``: an observation of up to ``E`` entities ``[B, E, F]`` (Unity's
BufferSensor; absent entities are zero rows) is embedded entity by entity, optionally
with the agent's own encoding concatenated to every entity (ego-centric attention), then
a multi-head self-attention whose keys skip the absent entities, a residual connection,
layer norm, and a mean over the present entities gives one vector per agent ``[B, H]``.

Every op here is one the export's Barracuda and Sentis lists hold (MatMul, Add, Mul, Sub,
Div, Reshape, Transpose, Concat, ReduceSum, ReduceMean, Sqrt, Softmax, Sigmoid, Less,
Cast); dense layers on entities run on ``[B*E, F]`` reshaped rows so every MatMul is the
rank-2 one every runtime has, and the attention's query-key product follows ML-Agents'
transposes (which Sentis runs).
"""
from __future__ import annotations

from typing import Any, Optional

from trainers.tf import tf

#: ML-Agents' fixed attention embedding size (`ObservationEncoder.ATTENTION_EMBEDDING_SIZE`).
ATTENTION_EMBEDDING_SIZE = 128
#: ML-Agents' `ResidualSelfAttention` default number of heads.
NUM_HEADS = 4
#: What masked logits are pushed to before the softmax (ML-Agents' `NEG_INF`): finite, so
#: a row whose every entity is absent still gets a (uniform) finite softmax.
NEG_INF = -1e6
#: Added to the count of present entities in the mean, so zero present entities give 0.
EPSILON = 1e-7
#: An entity is absent when the sum of its squared features is below this (ML-Agents').
ZERO_THRESHOLD = 0.01


def get_zero_entities_mask(entities: tf.Tensor) -> tf.Tensor:
    """``[B, E, F]`` -> ``[B, E]`` float32: 1.0 where an entity row is (all but) zero.

    As ML-Agents, "zero" is ``sum(x^2) < 0.01``: padding rows are exact zeros, and a
    present entity whose features are all that small is treated as padding there too.
    No gradient flows through the mask.
    """
    squared = tf.reduce_sum(tf.square(tf.stop_gradient(entities)), axis=2)
    return tf.cast(squared < ZERO_THRESHOLD, tf.float32)


def _normal_init(size: int) -> Any:
    """ML-Agents' T-Fixup init for attention layers: N(0, 1) scaled by sqrt(0.125 / size)."""
    return tf.random_normal_initializer(0.0, (0.125 / size) ** 0.5)


def _linear(x: tf.Tensor, units: int, name: str, init_size: int) -> tf.Tensor:
    """Dense layer over the last axis of ``[..., in]`` -> ``[..., units]``, zero biases.

    Rank-3 inputs are reshaped to ``[-1, in]`` and back (inner sizes static), so the
    exported MatMul is rank 2.
    """
    in_size = int(x.shape[-1])
    with tf.variable_scope(name):
        kernel = tf.get_variable("kernel", [in_size, units], dtype=x.dtype, initializer=_normal_init(init_size))
        bias = tf.get_variable("bias", [units], dtype=x.dtype, initializer=tf.zeros_initializer())
    if x.shape.ndims == 2:
        return tf.matmul(x, kernel) + bias
    # A dynamic inner size (POCA's groupmates, `[B, None, F]`) reshapes with tf.shape.
    inner = [tf.shape(x)[k + 1] if d is None else int(d) for k, d in enumerate(x.shape.as_list()[1:-1])]
    flat = tf.reshape(x, [-1, in_size])
    # -1 cannot be inferred from zero rows (a group with no mates): the batch size then.
    lead = -1 if all(isinstance(d, int) for d in inner) else tf.shape(x)[0]
    return tf.reshape(tf.matmul(flat, kernel) + bias, [lead, *inner, units])


def _swish(x: tf.Tensor) -> tf.Tensor:
    return x * tf.nn.sigmoid(x)


def self_encoding(encoded: tf.Tensor, embedding_size: int, name: str) -> tf.Tensor:
    """The agent's own encodings, joined ``[B, S_in]``, -> ``[B, embedding_size]``.

    ML-Agents' ``x_self_encoder``: one swish layer over the concatenated non-entity
    encodings, whose output `entity_embedding` concatenates to every entity.
    """
    with tf.variable_scope(name):
        return _swish(_linear(encoded, embedding_size, "dense", embedding_size))


def entity_embedding(
    entities: tf.Tensor, embedding_size: int, name: str, self_obs: Optional[tf.Tensor] = None
) -> tf.Tensor:
    """Embeds each entity: ``[B, E, F]`` (and ``self_obs`` ``[B, S]``) -> ``[B, E, embedding_size]``.

    ML-Agents' `EntityEmbedding`: with ``self_obs``, every entity row becomes
    ``concat(self_obs, entity)`` ``[S + F]``; one swish layer maps it to the embedding.
    ``E`` (the maximum number of entities) must be static: the export needs it, as
    ML-Agents' ``entity_num_max_elements``. Absent entities get embeddings too; the mask
    keeps them out of `residual_self_attention`.
    """
    num_entities = entities.shape[1]
    if entities.shape[2] is None or (num_entities is None and self_obs is not None):
        raise ValueError(f"entity_embedding {name!r}: entities need static [E, F], got {entities.shape}")
    with tf.variable_scope(name):
        if self_obs is not None:
            num_entities = int(num_entities)
            self_size = int(self_obs.shape[-1])
            expanded = tf.reshape(self_obs, [-1, 1, self_size])
            # E copies concatenated (ML-Agents' own export form) rather than Tile.
            repeated = tf.concat([expanded] * num_entities, axis=1) if num_entities > 1 else expanded
            entities = tf.concat([repeated, entities], axis=2)
        return _swish(_linear(entities, embedding_size, "dense", embedding_size))


def _layer_norm(x: tf.Tensor) -> tf.Tensor:
    """ML-Agents' `LayerNorm` over the last axis, without gain or bias: (x - mean) / sqrt(var + 1e-5)."""
    mean = tf.reduce_mean(x, axis=-1, keepdims=True)
    centred = x - mean
    var = tf.reduce_mean(centred * centred, axis=-1, keepdims=True)
    return centred / tf.sqrt(var + 1e-5)


def residual_self_attention(embeddings: tf.Tensor, mask: tf.Tensor, num_heads: int, name: str) -> tf.Tensor:
    """ML-Agents' `ResidualSelfAttention`: ``[B, E, H]``, mask ``[B, E]`` (1 = absent) -> ``[B, H]``.

    Layer norm; query, key and value projections; ``num_heads``-head attention whose
    logits ``q.k / sqrt(H)`` to absent keys are replaced by `NEG_INF`; an output
    projection added back to the normalised input (residual); layer norm; the mean over
    present entities. Absent entities' embeddings therefore never reach the output; a row
    with no entity present gives zeros (finite). ``H`` must divide by ``num_heads``.
    """
    # Static E (observations, the export); dynamic (None) for POCA's groups, not exported.
    num_entities = tf.shape(embeddings)[1] if embeddings.shape[1] is None else int(embeddings.shape[1])
    size = int(embeddings.shape[2])
    if num_heads < 1 or size % num_heads != 0:
        raise ValueError(f"residual_self_attention {name!r}: embedding size {size} is not divisible by {num_heads} heads")
    head = size // num_heads
    with tf.variable_scope(name):
        inp = _layer_norm(embeddings)
        query = _linear(inp, size, "fc_q", size)
        key = _linear(inp, size, "fc_k", size)
        value = _linear(inp, size, "fc_v", size)

        # [B, E, H] -> [B, heads, E, head]
        query = tf.transpose(tf.reshape(query, [-1, num_entities, num_heads, head]), [0, 2, 1, 3])
        key = tf.transpose(tf.reshape(key, [-1, num_entities, num_heads, head]), [0, 2, 1, 3])
        value = tf.transpose(tf.reshape(value, [-1, num_entities, num_heads, head]), [0, 2, 1, 3])
        # key^T as a second transpose of the same key (ML-Agents' form: Sentis refuses the
        # single fused permutation [0, 2, 3, 1] the two would otherwise become).
        key_t = tf.transpose(key, [0, 1, 3, 2])  # [B, heads, head, E]
        logits = tf.matmul(query, key_t)  # [B, heads, E_q, E_k]
        key_mask = tf.reshape(mask, [-1, 1, 1, num_entities])
        logits = (1.0 - key_mask) * logits / (size**0.5) + key_mask * NEG_INF
        weights = tf.nn.softmax(logits, axis=3)
        attended = tf.matmul(weights, value)  # [B, heads, E, head]
        attended = tf.reshape(tf.transpose(attended, [0, 2, 1, 3]), [-1, num_entities, size])

        output = _layer_norm(_linear(attended, size, "fc_out", size) + inp)
        present = tf.reshape(1.0 - mask, [-1, num_entities, 1])
        numerator = tf.reduce_sum(output * present, axis=1)  # [B, H]
        denominator = tf.reduce_sum(1.0 - mask, axis=1, keepdims=True) + EPSILON  # [B, 1]
        return numerator / denominator
