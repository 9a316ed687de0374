"""Location-aware attention against a hand-written computation, and the chunked additive energies."""

from __future__ import annotations

import functools

import hydra
import pytest
import torch
from omegaconf import OmegaConf

from attend.attention import AdditiveAttention, LocationAttention
from attend.attention.energy import additive_energies, chunk_sizes
from attend.decoders import BahdanauDecoder, LuongDecoder
from attend.memory import Memory
from attend.search import BeamSearch, GreedySearch, reorder_state
from tests.helpers.paths import ROOT

CONF = ROOT / "conf" / "attention" / "location.yaml"
B, S, DQ, DV = 3, 7, 8, 6
LENGTHS = [7, 4, 2]
SPECIAL = {"bos_id": 1, "eos_id": 2, "pad_id": 0}


def make(cumulative: bool = True, seed: int = 0, grid: tuple[int, int] | None = None, **kwargs):
    torch.manual_seed(seed)
    attention = LocationAttention(
        DQ, DV, hidden_dim=10, channels=4, kernel_size=5, grid_kernel_size=3, cumulative=cumulative, **kwargs
    ).double()
    positions = S if grid is None else grid[0] * grid[1]
    lengths = LENGTHS if grid is None else [positions, positions - 2, 1]
    values = torch.randn(B, positions, DV, dtype=torch.float64)
    mask = torch.arange(positions)[None, :] < torch.tensor(lengths)[:, None]  # (B, S)
    return attention, Memory(values=values, mask=mask, grid=grid)


def softmax_over_valid(energies: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Softmax over each row's valid positions, zeros elsewhere: energies (B, S)."""
    weights = torch.zeros_like(energies)
    for b in range(energies.size(0)):
        weights[b, mask[b]] = torch.softmax(energies[b, mask[b]], dim=-1)
    return weights


def conv1d_by_hand(alpha: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """f[b, c, j] = sum_{i, k} F[c, i, k] alpha[b, i, j + k - K//2] (zero outside): (B, C_in, S) -> (B, C, S)."""
    batch, channels_in, positions = alpha.shape
    half = weight.size(2) // 2
    out = alpha.new_zeros(batch, weight.size(0), positions)
    for j in range(positions):
        for k in range(weight.size(2)):
            source = j + k - half
            if 0 <= source < positions:
                out[:, :, j] += torch.einsum("ci,bi->bc", weight[:, :, k], alpha[:, :, source])
    return out


def conv2d_by_hand(alpha: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """The same over a grid: (B, C_in, H, W) -> (B, C, H, W)."""
    batch, _, height, width = alpha.shape
    half = weight.size(2) // 2
    out = alpha.new_zeros(batch, weight.size(0), height, width)
    for y in range(height):
        for x in range(width):
            for dy in range(weight.size(2)):
                for dx in range(weight.size(3)):
                    sy, sx = y + dy - half, x + dx - half
                    if 0 <= sy < height and 0 <= sx < width:
                        out[:, :, y, x] += torch.einsum("ci,bi->bc", weight[:, :, dy, dx], alpha[:, :, sy, sx])
    return out


def reference_steps(attention: LocationAttention, queries: torch.Tensor, memory: Memory) -> torch.Tensor:
    """Eqs. (8)-(9) step by step with the module's parameters: queries (B, T, Dq) -> weights (B, T, S)."""
    mask = memory.mask
    lengths = mask.sum(1, keepdim=True).to(queries.dtype)
    previous = mask.to(queries.dtype) / lengths  # uniform over the valid positions
    cumulative = torch.zeros_like(previous)
    keys = memory.values @ attention.key_proj.weight.T + attention.key_proj.bias  # V h_j + b
    out = []
    for t in range(queries.size(1)):
        alpha = torch.stack([previous, cumulative], 1) if attention.cumulative else previous[:, None]
        if memory.grid is None:
            f = conv1d_by_hand(alpha, attention.conv.weight)  # (B, C, S)
        else:
            f = conv2d_by_hand(alpha.unflatten(2, memory.grid), attention.grid_conv.weight).flatten(2)
        uf = torch.einsum("bcs,ac->bsa", f, attention.location_proj.weight)
        ws = queries[:, t] @ attention.query_proj.weight.T  # (B, A)
        hidden = torch.tanh(ws[:, None, :] + keys + uf)  # (B, S, A)
        weights = softmax_over_valid(hidden @ attention.v.weight[0], mask)  # (B, S)
        out.append(weights)
        previous, cumulative = weights, cumulative + weights
    return torch.stack(out, 1)


@pytest.mark.parametrize("cumulative", [True, False])
@pytest.mark.parametrize("grid", [None, (3, 4)], ids=["sequence", "grid"])
def test_matches_formula_over_several_steps(cumulative, grid):
    attention, memory = make(cumulative, grid=grid)
    queries = torch.randn(B, 4, DQ, dtype=torch.float64)
    out = attention(queries, attention.prepare(memory))
    expected = reference_steps(attention, queries, memory)
    torch.testing.assert_close(out.weights, expected)
    torch.testing.assert_close(out.context, expected @ memory.values)
    padding = ~memory.mask[:, None, :].expand_as(out.weights)
    assert torch.all(out.weights[padding] == 0.0)
    torch.testing.assert_close(out.weights.sum(-1), torch.ones(B, 4, dtype=torch.float64))


def test_initial_state_and_its_update():
    attention, memory = make()
    prepared = attention.prepare(memory)
    state = attention.init_state(prepared)
    assert state["previous"].shape == state["cumulative"].shape == (B, S)
    torch.testing.assert_close(state["previous"].sum(1), torch.ones(B, dtype=torch.float64))
    assert torch.all(state["previous"][~memory.mask] == 0) and torch.all(state["cumulative"] == 0)
    assert state["previous"][1, 0] == 0.25
    steps = []
    for _ in range(3):
        out = attention(torch.randn(B, 1, DQ, dtype=torch.float64), prepared, state)
        steps.append(out.weights[:, 0])
        torch.testing.assert_close(out.state["previous"], steps[-1])
        torch.testing.assert_close(out.state["cumulative"], sum(steps))
        state = out.state


@pytest.mark.parametrize("grid", [None, (3, 4)], ids=["sequence", "grid"])
def test_many_queries_equal_loop_of_one(grid):
    attention, memory = make(grid=grid)
    prepared = attention.prepare(memory)
    queries = torch.randn(B, 5, DQ, dtype=torch.float64)
    full = attention(queries, prepared, {})
    state = attention.init_state(prepared)
    for t in range(5):
        step = attention(queries[:, t : t + 1], prepared, state)
        torch.testing.assert_close(step.weights[:, 0], full.weights[:, t])
        torch.testing.assert_close(step.context[:, 0], full.context[:, t])
        state = step.state
    for key in state:
        torch.testing.assert_close(state[key], full.state[key])


def test_padding_does_not_change_a_row():
    """A padded row attends exactly as the same row alone without padding (the conv sees zeros)."""
    attention, memory = make()
    queries = torch.randn(B, 3, DQ, dtype=torch.float64)
    batched = attention(queries, attention.prepare(memory))
    for b, length in enumerate(LENGTHS):
        alone = Memory(values=memory.values[b : b + 1, :length], mask=memory.mask[b : b + 1, :length])
        out = attention(queries[b : b + 1], attention.prepare(alone))
        torch.testing.assert_close(out.weights[0], batched.weights[b, :, :length])
        torch.testing.assert_close(out.context[0], batched.context[b])


def test_reorder_state_for_beams():
    attention, memory = make()
    prepared = attention.prepare(memory)
    state = attention(torch.randn(B, 2, DQ, dtype=torch.float64), prepared).state
    index = torch.tensor([2, 0, 0, 1])
    query = torch.randn(4, 1, DQ, dtype=torch.float64)
    picked = attention(query, prepared.index_select(index), reorder_state(state, index))
    for i, row in enumerate(index.split(1)):
        alone = attention(query[i : i + 1], prepared.index_select(row), reorder_state(state, row))
        torch.testing.assert_close(picked.weights[i : i + 1], alone.weights)
    torch.testing.assert_close(picked.state["cumulative"], state["cumulative"][index] + picked.weights[:, 0])


def test_gradients_and_the_unused_filter():
    """Every parameter gets a gradient (DDP needs no unused ones); the other filter's is zero."""
    for grid, used, unused in ((None, "conv", "grid_conv"), ((3, 4), "grid_conv", "conv")):
        attention, memory = make(grid=grid)
        out = attention(torch.randn(B, 3, DQ, dtype=torch.float64), attention.prepare(memory))
        (out.context * torch.randn_like(out.context)).sum().backward()
        for name, p in attention.named_parameters():
            assert p.grad is not None, name
            assert (p.grad.abs().sum() == 0) == name.startswith(f"{unused}."), name
        assert getattr(attention, used).weight.grad.abs().sum() > 0


def test_errors_and_bf16():
    with pytest.raises(ValueError, match="odd kernel_size"):
        LocationAttention(DQ, DV, kernel_size=4)
    attention, memory = make()
    with pytest.raises(ValueError, match="prepare"):
        attention(torch.randn(B, 1, DQ, dtype=torch.float64), memory)
    with pytest.raises(ValueError, match="grid"):
        attention.prepare(memory.replace(grid=(2, 2)))
    attention = attention.to(torch.bfloat16)
    bf16 = memory.replace(values=memory.values.bfloat16())
    out = attention(torch.randn(B, 3, DQ).bfloat16(), attention.prepare(bf16))
    assert torch.isfinite(out.weights).all()
    assert torch.all(out.weights[~memory.mask[:, None].expand_as(out.weights)] == 0)


def test_config_and_chunked_location_agree():
    partial = hydra.utils.instantiate(OmegaConf.load(CONF))
    attention = partial(query_dim=DQ, value_dim=DV)
    assert isinstance(attention, LocationAttention) and attention.max_elements == 2**25
    small = make()[0]
    small.max_elements = 16
    reference, memory = make()
    queries = torch.randn(B, 3, DQ, dtype=torch.float64)
    chunked = small(queries, small.prepare(memory))
    torch.testing.assert_close(chunked.weights, reference(queries, reference.prepare(memory)).weights)


# -- the chunked additive energies ---------------------------------------------------------------


def energies_inputs(batch=3, steps=5, positions=7, size=4):
    torch.manual_seed(0)
    v = torch.nn.Linear(size, 1, bias=False).double()
    queries = torch.randn(batch, steps, size, dtype=torch.float64, requires_grad=True)
    keys = torch.randn(batch, positions, size, dtype=torch.float64, requires_grad=True)
    return queries, keys, v


@pytest.mark.parametrize("max_elements", [1, 4, 9, 28, 29, 90, 200, 10**9])
def test_chunked_energies_equal_direct(max_elements):
    queries, keys, v = energies_inputs()
    direct = torch.tanh(queries[:, :, None] + keys[:, None]) @ v.weight[0]  # (B, T, S)
    grad = torch.randn_like(direct)
    expected = torch.autograd.grad(direct, [queries, keys, v.weight], grad)
    energies = additive_energies(queries, keys, v, max_elements=max_elements)
    torch.testing.assert_close(energies, direct)
    for got, want in zip(torch.autograd.grad(energies, [queries, keys, v.weight], grad), expected, strict=True):
        torch.testing.assert_close(got, want)
    with torch.no_grad():
        torch.testing.assert_close(additive_energies(queries, keys, v, max_elements=max_elements), direct)


def test_chunk_sizes_respect_the_limit():
    shapes = [(3, 5, 7, 4, 200), (3, 5, 7, 4, 50), (3, 5, 7, 4, 10), (2, 1, 9, 3, 2)]
    for batch, steps, positions, size, limit in shapes:
        b, t, s = chunk_sizes(batch, steps, positions, size, limit)
        assert b * t * s * size <= max(limit, size)
        assert 1 <= b <= batch and 1 <= t <= steps and 1 <= s <= positions


def new_saved_sizes(fn, inputs: list[torch.Tensor]) -> list[int]:
    """Elements of every tensor autograd saves for backward while ``fn`` runs, except views of ``inputs``."""
    shared = {t.untyped_storage().data_ptr() for t in inputs}
    sizes: list[int] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        if t.untyped_storage().data_ptr() not in shared:
            sizes.append(t.numel())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn()
    out.sum().backward()  # the saved tensors (and the recomputation) still give gradients
    return sizes


def test_chunked_energies_keep_no_big_tensor_for_backward():
    batch, steps, positions, size = 4, 6, 50, 16
    total = batch * steps * positions * size
    queries, keys, v = energies_inputs(batch, steps, positions, size)
    inputs = [queries, keys, v.weight]
    direct = new_saved_sizes(lambda: additive_energies(queries, keys, v, max_elements=total), inputs)
    assert max(direct) >= total  # the direct path keeps its tanh output: what chunking must avoid
    limit = 1000
    chunked = new_saved_sizes(lambda: additive_energies(queries, keys, v, max_elements=limit), inputs)
    assert max(chunked, default=0) <= limit
    assert sum(chunked) < total // 100
    assert keys.grad is not None and queries.grad is not None


# -- in both decoders and both searches ----------------------------------------------------------


def location(**kwargs):
    return functools.partial(LocationAttention, hidden_dim=8, channels=3, kernel_size=3, **kwargs)


DECODERS = {
    "bahdanau": (BahdanauDecoder, {}),
    "luong-feed": (LuongDecoder, {"input_feeding": True}),
    "luong-nofeed": (LuongDecoder, {"input_feeding": False}),
}


def random_memory(grid: tuple[int, int] | None):
    generator = torch.Generator().manual_seed(1)
    positions = 7 if grid is None else grid[0] * grid[1]
    lengths = torch.tensor([positions, 4, 2]) if grid is None else torch.full((3,), positions)
    values = torch.randn(3, positions, 16, generator=generator)
    mask = torch.arange(positions)[None, :] < lengths[:, None]
    return Memory(values=values, mask=mask, grid=grid, final=values[:, 0])


@pytest.mark.parametrize("grid", [None, (2, 3)], ids=["sequence", "grid"])
@pytest.mark.parametrize("name", DECODERS)
def test_decoders_and_search(name, grid):
    cls, kwargs = DECODERS[name]
    torch.manual_seed(0)
    decoder = cls(30, 16, location(), embedding_dim=12, hidden_size=16, dropout=0.0, **kwargs).eval()
    memory = random_memory(grid)
    tgt_in = torch.randint(3, 30, (3, 5))
    logits, attended = decoder(tgt_in, memory)
    weights = attended.weights
    assert logits.shape == (3, 5, 30) and weights.shape == (3, 5, memory.values.size(1))
    prepared = decoder.prepare(memory)
    state = decoder.init_state(prepared)
    for t in range(5):
        step_logits, step_attended, state = decoder.step(tgt_in[:, t], prepared, state)
        step_weights = step_attended.weights[:, 0]
        torch.testing.assert_close(step_logits, logits[:, t], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(step_weights, weights[:, t], atol=1e-6, rtol=1e-5)
    greedy = GreedySearch(max_len_a=1.0, max_len_b=3)(decoder, memory, **SPECIAL)
    beam1 = BeamSearch(beam_size=1, length_penalty=0.0, max_len_a=1.0, max_len_b=3)(decoder, memory, **SPECIAL)
    assert greedy.sequences() == beam1.sequences()
    torch.testing.assert_close(greedy.scores, beam1.scores)
    search = BeamSearch(beam_size=3, max_len_a=1.0, max_len_b=3)
    batched = search(decoder, memory, **SPECIAL)
    assert batched.grid == grid
    assert torch.all(batched.weights[~memory.mask[:, None].expand_as(batched.weights)] == 0)
    for i in range(3):
        alone = search(decoder, memory.index_select(torch.tensor([i])), **SPECIAL)
        assert alone.sequences()[0] == batched.sequences()[i]
        torch.testing.assert_close(alone.scores[0], batched.scores[i])


def test_additive_unchanged_by_max_elements():
    torch.manual_seed(0)
    attention = AdditiveAttention(DQ, DV, hidden_dim=5)
    memory = Memory(values=torch.randn(B, S, DV), mask=torch.ones(B, S, dtype=torch.bool))
    prepared = attention.prepare(memory)
    queries = torch.randn(B, 4, DQ)
    direct = attention(queries, prepared)
    attention.max_elements = 7
    torch.testing.assert_close(attention(queries, prepared).weights, direct.weights)
