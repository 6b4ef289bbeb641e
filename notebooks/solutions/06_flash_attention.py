"""Solutions to the exercises of 06_flash_attention.ipynb."""

import functools
import math

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

BLOCK_Q = BLOCK_K = 64


def flash_kernel(q_ref, k_ref, v_ref, o_ref, *, causal):
    block_q, dim = q_ref.shape
    seq = k_ref.shape[0]
    q = q_ref[...] * (1 / math.sqrt(dim))
    q_start = pl.program_id(1) * block_q

    def body(t, carry):
        m, l, acc = carry
        k = k_ref[pl.ds(t * BLOCK_K, BLOCK_K), :]
        v = v_ref[pl.ds(t * BLOCK_K, BLOCK_K), :]
        s = jnp.dot(q, k.T, preferred_element_type=jnp.float32)
        if causal:  # compile time: the non-causal kernel has no mask at all
            q_pos = q_start + jax.lax.broadcasted_iota(jnp.int32, s.shape, 0)
            k_pos = t * BLOCK_K + jax.lax.broadcasted_iota(jnp.int32, s.shape, 1)
            s = jnp.where(k_pos <= q_pos, s, -jnp.inf)
        m_new = jnp.maximum(m, s.max(axis=1))
        alpha = jnp.exp(m - m_new)
        p = jnp.exp(s - m_new[:, None])
        l = alpha * l + p.sum(axis=1)
        acc = alpha[:, None] * acc + jnp.dot(p, v, preferred_element_type=jnp.float32)
        return m_new, l, acc

    m = jnp.full((block_q,), -jnp.inf, jnp.float32)
    l = jnp.zeros((block_q,), jnp.float32)
    acc = jnp.zeros((block_q, dim), jnp.float32)
    # Causal: K blocks past this query block's last row hold only masked keys.
    stop = pl.cdiv(q_start + block_q, BLOCK_K) if causal else seq // BLOCK_K
    m, l, acc = jax.lax.fori_loop(0, stop, body, (m, l, acc))
    o_ref[...] = (acc / l[:, None]).astype(o_ref.dtype)


def attention(q, k, v, causal=False):
    batch_heads, seq, dim = q.shape
    whole = pl.BlockSpec((None, seq, dim), lambda b, i: (b, 0, 0))
    return pl.pallas_call(
        functools.partial(flash_kernel, causal=causal),
        out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
        grid=(batch_heads, seq // BLOCK_Q),
        in_specs=[pl.BlockSpec((None, BLOCK_Q, dim), lambda b, i: (b, i, 0)), whole, whole],
        out_specs=pl.BlockSpec((None, BLOCK_Q, dim), lambda b, i: (b, i, 0)),
    )(q, k, v)


SOLUTIONS = {"06.online_softmax": attention, "06.causal": attention}
