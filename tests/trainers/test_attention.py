"""`trainers.tf.attention`: ML-Agents' entity embedding and masked residual self-attention.

Checked against a numpy transcription of ML-Agents' torch modules (``attention.py`` at
Release 22), and by the properties the trainers rely on: absent entities (mask 1) never
change the output, the output does not depend on the entities' order, and a row with no
entity present is finite (zeros), gradients included.
"""
from __future__ import annotations

import numpy as np
import pytest

from trainers.tf import tf
from trainers.tf.attention import (
    entity_embedding,
    get_zero_entities_mask,
    residual_self_attention,
    self_encoding,
)

B, E, F, S, H, HEADS = 6, 5, 3, 4, 8, 2


def _swish(x):
    return x / (1.0 + np.exp(-x))


def _layer_norm(x):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-5)


def _softmax(x):
    z = np.exp(x - x.max(-1, keepdims=True))
    return z / z.sum(-1, keepdims=True)


def _reference_rsa(emb, mask, w, heads):
    """ML-Agents' ResidualSelfAttention.forward in numpy (``w``: the block's variables)."""
    b, e, h = emb.shape
    hs = h // heads
    inp = _layer_norm(emb)
    q, k, v = (inp @ w[f"fc_{n}/kernel"] + w[f"fc_{n}/bias"] for n in "qkv")
    q = q.reshape(b, e, heads, hs).transpose(0, 2, 1, 3)
    k = k.reshape(b, e, heads, hs).transpose(0, 2, 3, 1)
    v = v.reshape(b, e, heads, hs).transpose(0, 2, 1, 3)
    qk = q @ k
    km = mask.reshape(b, 1, 1, e)
    qk = (1 - km) * qk / np.sqrt(h) + km * -1e6
    att = _softmax(qk) @ v
    att = att.transpose(0, 2, 1, 3).reshape(b, e, h)
    out = _layer_norm(att @ w["fc_out/kernel"] + w["fc_out/bias"] + inp)
    return (out * (1 - mask)[:, :, None]).sum(1) / ((1 - mask).sum(1, keepdims=True) + 1e-7)


class _Block:
    """One graph: entities -> mask; self -> self encoding -> entity embedding -> attention."""

    def __init__(self, seed: int = 0):
        self.graph = tf.Graph()
        with self.graph.as_default():
            tf.set_random_seed(seed)
            self.entities = tf.placeholder(tf.float32, [None, E, F])
            self.self_obs = tf.placeholder(tf.float32, [None, S])
            self.emb_in = tf.placeholder(tf.float32, [None, E, H])
            self.mask_in = tf.placeholder(tf.float32, [None, E])
            self.mask = get_zero_entities_mask(self.entities)
            self.encoded_self = self_encoding(self.self_obs, H, "self")
            self.embedded = entity_embedding(self.entities, H, "ent", self_obs=self.encoded_self)
            self.embedded_alone = entity_embedding(self.entities, H, "ent_alone")
            self.rsa = residual_self_attention(self.emb_in, self.mask_in, HEADS, "rsa")
            with tf.variable_scope(tf.get_variable_scope(), reuse=True):  # the same weights
                self.full = residual_self_attention(self.embedded, self.mask, HEADS, "rsa")
            grads = tf.gradients(tf.reduce_sum(self.full), tf.trainable_variables())
            self.grads = [g for g in grads if g is not None]
            self.sess = tf.Session(graph=self.graph)
            self.sess.run(tf.global_variables_initializer())
            self.vars = {
                v.name[: -len(":0")]: val
                for v, val in zip(tf.global_variables(), self.sess.run(tf.global_variables()))
            }

    def weights(self, scope):
        return {k[len(scope) + 1 :]: v for k, v in self.vars.items() if k.startswith(scope + "/")}


@pytest.fixture(scope="module")
def block():
    return _Block()


def test_zero_entities_mask_follows_ml_agents_threshold(block):
    ent = np.ones((2, E, F), np.float32)
    ent[0, 1] = 0.0  # padding row
    ent[0, 3] = [0.05, 0.05, 0.05]  # sum of squares 0.0075 < 0.01: absent, as ML-Agents
    ent[1, 4] = [0.1, 0.0, 0.0]  # 0.01, not below: present
    mask = block.sess.run(block.mask, {block.entities: ent})
    assert mask.dtype == np.float32 and mask.shape == (2, E)
    np.testing.assert_array_equal(mask, [[0, 1, 0, 1, 0], [0, 0, 0, 0, 0]])


def test_entity_embedding_concatenates_self_to_every_entity(block):
    rng = np.random.default_rng(1)
    ent = rng.normal(size=(B, E, F)).astype(np.float32)
    me = rng.normal(size=(B, S)).astype(np.float32)
    emb, alone, enc = block.sess.run(
        [block.embedded, block.embedded_alone, block.encoded_self], {block.entities: ent, block.self_obs: me}
    )
    assert emb.shape == (B, E, H) and alone.shape == (B, E, H) and enc.shape == (B, H)
    ws, we, wa = block.weights("self"), block.weights("ent"), block.weights("ent_alone")
    np.testing.assert_allclose(enc, _swish(me @ ws["dense/kernel"] + ws["dense/bias"]), atol=1e-5)
    joined = np.concatenate([np.repeat(enc[:, None], E, axis=1), ent], axis=2)
    assert we["dense/kernel"].shape == (H + F, H)
    np.testing.assert_allclose(emb, _swish(joined @ we["dense/kernel"] + we["dense/bias"]), atol=1e-5)
    np.testing.assert_allclose(alone, _swish(ent @ wa["dense/kernel"] + wa["dense/bias"]), atol=1e-5)
    # ML-Agents' T-Fixup init: N(0, 0.125 / size), zero biases.
    assert np.all(we["dense/bias"] == 0) and 0.05 < we["dense/kernel"].std() < 0.2  # sqrt(0.125/8) = 0.125


def test_residual_self_attention_matches_ml_agents(block):
    rng = np.random.default_rng(2)
    emb = rng.normal(size=(B, E, H)).astype(np.float32)
    mask = (rng.random((B, E)) < 0.4).astype(np.float32)
    out = block.sess.run(block.rsa, {block.emb_in: emb, block.mask_in: mask})
    assert out.shape == (B, H)
    np.testing.assert_allclose(out, _reference_rsa(emb, mask, block.weights("rsa"), HEADS), atol=1e-5)


def test_one_present_entity_attends_to_itself(block):
    """Closed form: one present entity's softmax is 1 on itself whatever the others hold."""
    rng = np.random.default_rng(3)
    emb = rng.normal(size=(1, E, H)).astype(np.float32)
    mask = np.ones((1, E), np.float32)
    mask[0, 2] = 0.0
    w = block.weights("rsa")
    x = _layer_norm(emb[0, 2])
    v = x @ w["fc_v/kernel"] + w["fc_v/bias"]
    expected = _layer_norm(v @ w["fc_out/kernel"] + w["fc_out/bias"] + x)
    out = block.sess.run(block.rsa, {block.emb_in: emb, block.mask_in: mask})
    np.testing.assert_allclose(out[0], expected, atol=1e-5)


def test_masked_entities_never_change_the_output(block):
    """Property over 40 random masks (seed 4): absent entities' embeddings are replaced by
    large random values and the entities are permuted; the output stays the same."""
    rng = np.random.default_rng(4)
    for _ in range(40):
        emb = rng.normal(size=(B, E, H)).astype(np.float32)
        mask = (rng.random((B, E)) < rng.random()).astype(np.float32)
        base = block.sess.run(block.rsa, {block.emb_in: emb, block.mask_in: mask})
        garbage = np.where(mask[:, :, None] == 1, rng.normal(scale=50.0, size=emb.shape), emb).astype(np.float32)
        perm = rng.permutation(E)
        out = block.sess.run(block.rsa, {block.emb_in: garbage[:, perm], block.mask_in: mask[:, perm]})
        np.testing.assert_allclose(out, base, atol=2e-5)


def test_absent_entities_end_to_end_from_zero_rows(block):
    """From raw entities: adding zero rows (absent) leaves the pooled output unchanged."""
    rng = np.random.default_rng(5)
    ent = np.zeros((B, E, F), np.float32)
    ent[:, :2] = rng.normal(size=(B, 2, F)) + 2.0
    me = rng.normal(size=(B, S)).astype(np.float32)
    two = block.sess.run(block.full, {block.entities: ent, block.self_obs: me})
    shuffled = ent[:, ::-1].copy()  # the same two entities in the last slots
    out = block.sess.run(block.full, {block.entities: shuffled, block.self_obs: me})
    np.testing.assert_allclose(out, two, atol=2e-5)
    ent3 = ent.copy()
    ent3[:, 2] = 5.0  # a third entity present changes it
    assert not np.allclose(block.sess.run(block.full, {block.entities: ent3, block.self_obs: me}), two, atol=1e-3)


def test_no_entity_present_is_finite_with_finite_gradients(block):
    rng = np.random.default_rng(6)
    ent = np.zeros((3, E, F), np.float32)
    ent[0, 0] = 1.0  # one row with an entity, two without any
    me = rng.normal(size=(3, S)).astype(np.float32)
    out, grads = block.sess.run([block.full, block.grads], {block.entities: ent, block.self_obs: me})
    assert np.all(np.isfinite(out))
    np.testing.assert_array_equal(out[1:], 0.0)
    assert len(grads) == 12 and all(np.all(np.isfinite(g)) for g in grads)  # self, ent, 4 rsa layers


def test_heads_must_divide_the_embedding():
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, E, 6])
        with pytest.raises(ValueError, match="not divisible by 4 heads"):
            residual_self_attention(x, tf.zeros([1, E]), 4, "rsa")
