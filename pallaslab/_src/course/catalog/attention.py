"""Notebook 06: flash attention."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from pallaslab._src.course.catalog._helpers import case, f32
from pallaslab._src.course.spec import Exercise, Mistake

NOTEBOOK = "06_flash_attention"
BLOCK_K = 64


def attention_reference(q, k, v, causal=False):  # type: ignore[no-untyped-def]
    """softmax(q k^T / sqrt(d)) v over (batch·heads, seq, dim) arrays, in float32."""
    s = jnp.einsum("bqd,bkd->bqk", q, k, preferred_element_type=jnp.float32)
    s = s / math.sqrt(q.shape[-1])
    if causal:
        seq = q.shape[1]
        s = jnp.where(jnp.tril(jnp.ones((seq, k.shape[1]), bool)), s, -jnp.inf)
    p = jax.nn.softmax(s, axis=-1)
    return jnp.einsum("bqk,bkd->bqd", p, v.astype(jnp.float32)).astype(q.dtype)


def _no_rescale(q, k, v, causal=False):  # type: ignore[no-untyped-def]
    # The running sum and accumulator never rescaled when the running max grows:
    # each K block's exp is taken against the max so far, and old terms keep theirs.
    scale = 1 / math.sqrt(q.shape[-1])
    s = jnp.einsum("bqd,bkd->bqk", q, k) * scale
    seq = k.shape[1]
    m = jnp.full(s.shape[:-1], -jnp.inf)
    total = jnp.zeros(s.shape[:-1])
    acc = jnp.zeros(q.shape)
    for start in range(0, seq, BLOCK_K):
        block = s[..., start : start + BLOCK_K]
        m = jnp.maximum(m, block.max(axis=-1))
        p = jnp.exp(block - m[..., None])
        total = total + p.sum(axis=-1)
        acc = acc + jnp.einsum("bqk,bkd->bqd", p, v[:, start : start + BLOCK_K])
    return (acc / total[..., None]).astype(q.dtype)


EXERCISES = (
    Exercise(
        id="06.online_softmax",
        notebook=NOTEBOOK,
        title="Rescale when the running max grows",
        task=(
            "Complete the loop body of attention(q, k, v): online softmax over K/V blocks "
            "of 64, keeping a running max m, a running sum l and an accumulator acc, for "
            "float32 (batch·heads, seq, dim) inputs."
        ),
        reference=attention_reference,
        cases=(
            case(f32(2, 128, 64), f32(2, 128, 64), f32(2, 128, 64)),
            case(f32(1, 256, 32), f32(1, 256, 32), f32(1, 256, 32)),
        ),
        hint=(
            "When the max grows from m to m_new, every term summed so far was exp(s - m): "
            "multiply l and acc by alpha = exp(m - m_new) before adding the new block."
        ),
        mistakes=(
            Mistake(
                "no-rescale",
                _no_rescale,
                "l and acc hold terms exp(s - m) computed with the old max: when the max "
                "grows, scale both by alpha = exp(m - m_new) before adding the new block's "
                "terms.",
            ),
        ),
    ),
    Exercise(
        id="06.causal",
        notebook=NOTEBOOK,
        title="Causal masking",
        task=(
            "Make attention(q, k, v, causal=True) causal: query i attends to keys j <= i "
            "only, and the loop stops after the last K block a query block needs "
            "(causal=False stays as it was)."
        ),
        reference=attention_reference,
        cases=(
            case(f32(2, 128, 64), f32(2, 128, 64), f32(2, 128, 64), causal=True),
            case(f32(1, 256, 32), f32(1, 256, 32), f32(1, 256, 32), causal=True),
            case(f32(1, 128, 32), f32(1, 128, 32), f32(1, 128, 32), causal=False),
        ),
        hint=(
            "Mask the scores with jnp.where(k_pos <= q_pos, s, -jnp.inf), positions from "
            "jax.lax.broadcasted_iota plus the blocks' starts."
        ),
        mistakes=(
            Mistake(
                "not-causal",
                lambda q, k, v, causal=False: attention_reference(q, k, v, causal=False),
                "Every query attends to every key: with causal=True, set the scores of "
                "keys after the query (k_pos > q_pos) to -inf before the softmax.",
            ),
        ),
    ),
)
