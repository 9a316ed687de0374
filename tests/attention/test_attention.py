"""Attention types: each formula against an independent computation, plus shared properties."""

from __future__ import annotations

import math

import hydra
import pytest
import torch
from omegaconf import OmegaConf

from attend.attention import (
    AdditiveAttention,
    Attention,
    CosineAttention,
    DotAttention,
    GeneralAttention,
    MultiHeadAttention,
    ScaledDotAttention,
    masked_softmax,
)
from attend.memory import Memory
from tests.helpers.paths import ROOT

CONF = ROOT / "conf" / "attention"
B, S, T = 3, 5, 4
LENGTHS = [5, 3, 1]

# name -> (class, kwargs, query_dim, value_dim)
CASES = {
    "additive": (AdditiveAttention, {"hidden_dim": 16}, 8, 6),
    "dot": (DotAttention, {}, 8, 8),
    "scaled_dot": (ScaledDotAttention, {}, 8, 8),
    "general": (GeneralAttention, {}, 8, 6),
    "cosine": (CosineAttention, {}, 8, 6),
    "cosine_same_dim": (CosineAttention, {}, 8, 8),
    "multihead": (MultiHeadAttention, {"num_heads": 2}, 8, 6),
    "multihead_out_dim": (MultiHeadAttention, {"num_heads": 4, "attn_dim": 12, "out_dim": 5}, 8, 6),
}


def make(name: str, seed: int = 0) -> tuple[Attention, torch.Tensor, Memory]:
    cls, kwargs, dq, dv = CASES[name]
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    attention = cls(query_dim=dq, value_dim=dv, **kwargs)
    query = torch.randn(B, T, dq, generator=gen)
    values = torch.randn(B, S, dv, generator=gen)
    mask = torch.arange(S)[None, :] < torch.tensor(LENGTHS)[:, None]  # (B, S)
    return attention, query, Memory(values=values, mask=mask)


def softmax_over_valid(energies: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Plain softmax over each row's valid positions; zeros elsewhere. energies (B, ..., T, S)."""
    weights = torch.zeros_like(energies)
    for b in range(energies.size(0)):
        valid = mask[b]
        weights[b][..., valid] = torch.softmax(energies[b][..., valid], dim=-1)
    return weights


def reference(attention: Attention, query: torch.Tensor, values: torch.Tensor, mask: torch.Tensor):
    """(weights, context) written out from each paper's formula with the module's own parameters."""
    if isinstance(attention, MultiHeadAttention):
        H, dk = attention.num_heads, attention.head_dim
        wq, bq = attention.query_proj.weight, attention.query_proj.bias
        wk = attention.key_proj.weight
        wv, bv = attention.value_proj.weight, attention.value_proj.bias
        head_weights, heads = [], []
        for h in range(H):
            rows = slice(h * dk, (h + 1) * dk)
            q = torch.einsum("btd,ad->bta", query, wq[rows]) + bq[rows]
            k = torch.einsum("bsd,ad->bsa", values, wk[rows])
            v = torch.einsum("bsd,ad->bsa", values, wv[rows]) + bv[rows]
            w = softmax_over_valid(torch.einsum("bta,bsa->bts", q, k) / math.sqrt(dk), mask)
            head_weights.append(w)
            heads.append(torch.einsum("bts,bsa->bta", w, v))
        context = attention.out_proj(torch.cat(heads, dim=-1))
        return torch.stack(head_weights, 1).mean(1), context
    if isinstance(attention, AdditiveAttention):
        wq = torch.einsum("btd,ad->bta", query, attention.query_proj.weight)
        uk = torch.einsum("bsd,ad->bsa", values, attention.key_proj.weight) + attention.key_proj.bias
        hidden = torch.tanh(wq[:, :, None, :] + uk[:, None, :, :])
        energies = torch.einsum("btsa,a->bts", hidden, attention.v.weight[0])
    elif isinstance(attention, ScaledDotAttention):
        energies = torch.einsum("btd,bsd->bts", query, values) / math.sqrt(query.size(-1))
    elif isinstance(attention, DotAttention):
        energies = torch.einsum("btd,bsd->bts", query, values)
    elif isinstance(attention, GeneralAttention):
        energies = torch.einsum("btd,de,bse->bts", query, attention.W_a.weight, values)
    elif isinstance(attention, CosineAttention):
        keys = values
        if isinstance(attention.key_proj, torch.nn.Linear):
            keys = torch.einsum("bsd,ad->bsa", values, attention.key_proj.weight) + attention.key_proj.bias
        dots = torch.einsum("btd,bsd->bts", query, keys)
        norms = query.norm(dim=-1)[:, :, None] * keys.norm(dim=-1)[:, None, :]
        energies = attention.scale * dots / norms
    else:
        raise AssertionError(f"no reference for {type(attention).__name__}")
    weights = softmax_over_valid(energies, mask)
    return weights, torch.einsum("bts,bsd->btd", weights, values)


def attend(attention: Attention, query: torch.Tensor, memory: Memory):
    prepared = attention.prepare(memory)
    return attention(query, prepared, attention.init_state(prepared))


@pytest.mark.parametrize("name", CASES)
def test_matches_formula(name):
    attention, query, memory = make(name)
    out = attend(attention, query, memory)
    weights, context = reference(attention, query, memory.values, memory.mask)
    assert out.weights.shape == (B, T, S)
    assert out.context.shape == (B, T, attention.output_dim)
    torch.testing.assert_close(out.weights, weights, atol=1e-5, rtol=0)
    torch.testing.assert_close(out.context, context, atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", CASES)
def test_masking(name):
    attention, query, memory = make(name)
    out = attend(attention, query, memory)
    padding = ~memory.mask[:, None, :].expand_as(out.weights)
    assert torch.all(out.weights[padding] == 0.0)
    torch.testing.assert_close(out.weights.sum(-1), torch.ones(B, T))
    noisy = memory.values.masked_fill(~memory.mask[..., None], 0.0) + 1e3 * torch.randn_like(
        memory.values
    ).masked_fill(memory.mask[..., None], 0.0)
    changed = attend(attention, query, memory.replace(values=noisy))
    torch.testing.assert_close(changed.context, out.context, atol=1e-6, rtol=0)
    torch.testing.assert_close(changed.weights, out.weights, atol=1e-6, rtol=0)


@pytest.mark.parametrize("name", CASES)
def test_many_queries_equal_loop_of_one(name):
    attention, query, memory = make(name)
    prepared = attention.prepare(memory)
    full = attention(query, prepared, {})
    steps = [attention(query[:, t : t + 1], prepared, {}) for t in range(T)]
    torch.testing.assert_close(full.weights, torch.cat([s.weights for s in steps], 1), atol=1e-6, rtol=0)
    torch.testing.assert_close(full.context, torch.cat([s.context for s in steps], 1), atol=1e-6, rtol=0)


@pytest.mark.parametrize("name", CASES)
def test_gradients_reach_every_parameter(name):
    attention, query, memory = make(name)
    query.requires_grad_(True)
    values = memory.values.clone().requires_grad_(True)
    out = attend(attention, query, memory.replace(values=values))
    (out.context * torch.randn_like(out.context)).sum().backward()
    for pname, p in attention.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, pname
    assert query.grad.abs().sum() > 0 and values.grad.abs().sum() > 0


def tensors_on(module: torch.nn.Module) -> dict[str, tuple]:
    """Every attribute of every submodule, with tensors identified by id (parameters included)."""
    return {
        f"{prefix}.{key}": (type(value), id(value) if torch.is_tensor(value) else None)
        for prefix, sub in module.named_modules()
        for key, value in vars(sub).items()
    } | {f"buffer:{k}": (id(v),) for k, v in module.named_buffers()}


@pytest.mark.parametrize("name", CASES)
def test_prepare_required_and_no_state_on_self(name):
    attention, query, memory = make(name)
    with pytest.raises(ValueError, match="prepare"):
        attention(query, memory)
    before = tensors_on(attention)
    attend(attention, query, memory)
    assert tensors_on(attention) == before
    for sub in attention.modules():
        assert not [k for k, v in vars(sub).items() if torch.is_tensor(v)]


@pytest.mark.parametrize("name", CASES)
def test_prepared_memory_survives_index_select(name):
    attention, query, memory = make(name)
    index = torch.tensor([2, 0, 0, 1])
    picked = attention(query[index], attention.prepare(memory).index_select(index), {})
    fresh = attention(query[index], attention.prepare(memory.index_select(index)), {})
    torch.testing.assert_close(picked.context, fresh.context)


@pytest.mark.parametrize("name", CASES)
def test_bf16_forward(name):
    attention, query, memory = make(name)
    attention = attention.to(torch.bfloat16)
    out = attend(attention, query.bfloat16(), memory.replace(values=memory.values.bfloat16()))
    assert torch.isfinite(out.weights).all() and torch.isfinite(out.context).all()
    assert torch.all(out.weights[~memory.mask[:, None, :].expand_as(out.weights)] == 0)


def test_masked_softmax_bf16():
    energies = (100 * torch.randn(B, T, S)).bfloat16()
    mask = torch.arange(S)[None, :] < torch.tensor(LENGTHS)[:, None]
    weights = masked_softmax(energies, mask)
    assert weights.dtype == torch.bfloat16 and torch.isfinite(weights).all()
    assert torch.all(weights[~mask[:, None, :].expand_as(weights)] == 0)
    torch.testing.assert_close(weights.float().sum(-1), torch.ones(B, T), atol=1e-2, rtol=0)


@pytest.mark.parametrize("cls", [DotAttention, ScaledDotAttention])
def test_dot_needs_equal_sizes(cls):
    with pytest.raises(ValueError, match=r"query_dim=8.*value_dim=6.*attention=general.*decoder.hidden_size=6"):
        cls(query_dim=8, value_dim=6)


def test_multihead_heads():
    attention, query, memory = make("multihead_out_dim")
    prepared = attention.prepare(memory)
    out = attention(query, prepared)
    assert prepared.keys.shape == prepared.projected_values.shape == (B, 4, S, 3)
    assert out.head_weights.shape == (B, 4, T, S)
    torch.testing.assert_close(out.weights, out.head_weights.mean(1))
    torch.testing.assert_close(
        attention.normalize(attention.score(query, prepared, {}), memory.mask), out.head_weights
    )
    with pytest.raises(ValueError, match="num_heads"):
        MultiHeadAttention(query_dim=8, value_dim=6, num_heads=3)


CLASSES = {
    "additive": AdditiveAttention,
    "dot": DotAttention,
    "scaled_dot": ScaledDotAttention,
    "general": GeneralAttention,
    "cosine": CosineAttention,
    "multihead": MultiHeadAttention,
}


def test_every_type_has_a_config():
    assert set(CLASSES) <= {f.stem for f in CONF.glob("*.yaml")}


@pytest.mark.parametrize("path", sorted(CONF.glob("*.yaml")), ids=lambda p: p.stem)
def test_config_instantiates(path):
    partial = hydra.utils.instantiate(OmegaConf.load(path))
    attention = partial(query_dim=8, value_dim=8)
    assert isinstance(attention, Attention)
    if path.stem in CLASSES:
        assert type(attention) is CLASSES[path.stem]
    query = torch.randn(2, 1, 8)
    memory = Memory(values=torch.randn(2, 3, 8), mask=torch.ones(2, 3, dtype=torch.bool))
    out = attend(attention, query, memory)
    assert out.context.shape == (2, 1, attention.output_dim)
