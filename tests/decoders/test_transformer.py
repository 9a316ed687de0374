"""Transformer encoder and decoder: stems, padding, incremental decoding, search and a copy task."""

from __future__ import annotations

import functools
import math

import pytest
import torch
import torch.nn.functional as F

from attend.attention import (
    AdditiveAttention,
    DotAttention,
    HardAttention,
    LocationAttention,
    MultiHeadAttention,
    SelfAttention,
)
from attend.decoders import TransformerDecoder
from attend.encoders import TransformerEncoder
from attend.encoders.transformer import GridPositions
from attend.layers import Positions
from attend.memory import Memory
from attend.search import BeamSearch, GreedySearch

SIZES = {"d_model": 16, "num_layers": 2, "num_heads": 2, "ff_dim": 32, "dropout": 0.0}
ATTENTIONS = {
    "multihead": functools.partial(MultiHeadAttention, num_heads=2),
    "additive": functools.partial(AdditiveAttention, hidden_dim=8),
    "location": functools.partial(LocationAttention, hidden_dim=8, channels=4, kernel_size=3),
    "dot": DotAttention,
}


@pytest.fixture(autouse=True)
def one_thread():
    """These tensors are tiny: a second thread only adds hand-offs (20x slower on a busy 2-core machine)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def text_encoder(**extra) -> TransformerEncoder:
    torch.manual_seed(0)
    return TransformerEncoder("text", vocab_size=40, pad_id=0, **{**SIZES, **extra}).eval()


def decoder(attention: str = "multihead", memory_dim: int = 16, **extra) -> TransformerDecoder:
    torch.manual_seed(1)
    return TransformerDecoder(30, memory_dim, ATTENTIONS[attention], pad_id=0, **{**SIZES, **extra}).eval()


@pytest.fixture
def transformer_memory(source_batch):
    return text_encoder()(*source_batch)


# -- encoder ------------------------------------------------------------------------------
def test_text_stem_shapes_and_mask(source_batch):
    memory = text_encoder()(*source_batch)
    assert memory.values.shape == (3, 7, 16) and memory.grid is None
    assert memory.lengths.tolist() == [7, 4, 2]
    assert memory.values[2, 2:].abs().sum() == 0  # padding positions are zero
    torch.testing.assert_close(memory.final[2], memory.values[2, :2].mean(dim=0))


@pytest.mark.parametrize("positions", ["sinusoidal", "learned"])
def test_audio_stem_keeps_a_quarter_of_the_frames(positions):
    torch.manual_seed(0)
    encoder = TransformerEncoder("audio", input_dim=10, positions=positions, **SIZES).eval()
    memory = encoder(torch.randn(3, 13, 10), torch.tensor([13, 9, 1]))
    assert memory.values.shape == (3, 4, 16)
    assert memory.lengths.tolist() == [math.ceil(n / 4) for n in (13, 9, 1)]


@pytest.mark.parametrize("positions", ["sinusoidal", "learned"])
def test_image_stem_gives_a_grid_with_2d_positions(positions):
    torch.manual_seed(0)
    encoder = TransformerEncoder("image", channels=[4, 8], positions=positions, **SIZES).eval()
    memory = encoder(torch.randn(2, 3, 32, 24))
    assert memory.grid == (8, 6) and memory.values.shape == (2, 48, 16) and bool(memory.mask.all())
    table = encoder.stem.positions(8, 6, memory.values)  # (48, 16)
    assert torch.unique(table, dim=0).size(0) == 48  # every cell has its own position
    # the first half encodes the row, the second the column
    rows, columns = table.view(8, 6, 16)[..., :8], table.view(8, 6, 16)[..., 8:]
    torch.testing.assert_close(rows, rows[:, :1].expand_as(rows))
    torch.testing.assert_close(columns, columns[:1].expand_as(columns))


MODALITIES = ("text", "audio", "image")


def test_the_stem_is_the_declared_modality_and_a_missing_size_is_named():
    sizes = {"vocab_size": 40, "input_dim": 10, "channels": [4, 8], **SIZES}  # every size: the modality decides
    stems = {modality: type(TransformerEncoder(modality, **sizes).stem).__name__ for modality in MODALITIES}
    assert stems == {"text": "TokenStem", "audio": "AudioStem", "image": "ImageStem"}
    with pytest.raises(ValueError, match="reads audio here and needs input_dim"):
        TransformerEncoder("audio", vocab_size=40, **SIZES)
    with pytest.raises(ValueError, match="text, image or audio; the data module's modality is 'video'"):
        TransformerEncoder("video", **SIZES)


def test_sinusoidal_positions_follow_the_paper():
    table = Positions(8)(0, 5, torch.zeros(()))  # (5, 8)
    position, i = 3, 1
    angle = position / 10000 ** (2 * i / 8)
    assert table[position, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
    assert table[position, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)
    torch.testing.assert_close(Positions(8)(3, 2, torch.zeros(())), table[3:5])  # a step's rows
    with pytest.raises(ValueError, match="max_positions"):
        Positions(8, "learned", max_positions=4)(0, 5, torch.zeros(()))
    with pytest.raises(ValueError, match="positions must be one of"):
        GridPositions(8, "rotary")


def test_padding_does_not_change_a_row(source_batch):
    encoder = text_encoder()
    src, lengths = source_batch
    batch = encoder(src, lengths)
    for row in range(3):
        n = int(lengths[row])
        alone = encoder(src[row : row + 1, :n], lengths[row : row + 1])
        torch.testing.assert_close(batch.values[row : row + 1, :n], alone.values, atol=1e-5, rtol=1e-5)


def test_audio_padding_does_not_change_a_row():
    torch.manual_seed(0)
    encoder = TransformerEncoder("audio", input_dim=10, **SIZES).eval()
    features = torch.randn(2, 17, 10)
    batch = encoder(features, torch.tensor([17, 9]))
    alone = encoder(features[1:, :9], torch.tensor([9]))
    torch.testing.assert_close(batch.values[1:, :3], alone.values, atol=1e-5, rtol=1e-5)


# -- self-attention -----------------------------------------------------------------------
@pytest.mark.parametrize("causal", [False, True])
def test_fused_self_attention_equals_the_explicit_softmax(causal):
    torch.manual_seed(0)
    attention = SelfAttention(16, num_heads=4).eval()
    x = torch.randn(3, 5, 16)
    mask = torch.tensor([[True] * 5, [True] * 3 + [False] * 2, [True] * 2 + [False] * 3])
    heads = attention.heads
    q, (k, v) = heads.queries(x), heads.keys_values(x)  # (B, H, T, dk)
    energies = q @ k.transpose(-1, -2) / math.sqrt(heads.head_dim)  # (B, H, T, T)
    allowed = mask[:, None, None, :] & (torch.ones(5, 5).tril().bool() if causal else True)
    expected = heads.merge(torch.softmax(energies.masked_fill(~allowed, -torch.inf), dim=-1) @ v)
    real = mask.unsqueeze(-1)  # padded queries are never read
    torch.testing.assert_close(attention(x, mask, causal) * real, expected * real, atol=1e-5, rtol=1e-5)


# -- decoder ------------------------------------------------------------------------------
@pytest.mark.parametrize("attention", ATTENTIONS)
def test_forward_equals_a_loop_of_steps(attention, transformer_memory):
    model = decoder(attention)
    tgt_in = torch.randint(3, 30, (3, 6))
    logits, attended = model(tgt_in, transformer_memory)
    assert logits.shape == (3, 6, 30) and attended.weights.shape == (3, 6, 7)
    memory = model.prepare(transformer_memory)
    state = model.init_state(memory)
    for t in range(6):
        step_logits, step_attended, state = model.step(tgt_in[:, t], memory, state)
        torch.testing.assert_close(step_logits, logits[:, t], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(step_attended.weights[:, 0], attended.weights[:, t], atol=1e-5, rtol=1e-5)
        if attention == "multihead":
            torch.testing.assert_close(
                step_attended.head_weights[:, :, 0], attended.head_weights[:, :, t], atol=1e-5, rtol=1e-5
            )
    assert attended.weights[2, :, 2:].abs().sum() == 0  # no weight on padding


def test_prepare_runs_every_layer_once_and_stacks_its_keys(transformer_memory):
    model = decoder("multihead")
    memory = model.prepare(transformer_memory)
    assert memory.keys.shape == (3, 2, 2, 7, 8) and memory.projected_values.shape == (3, 2, 2, 7, 8)  # (B, L, H, S, dk)
    assert model.prepare(transformer_memory).keys.shape[1] == SIZES["num_layers"]
    assert decoder("additive").prepare(transformer_memory).projected_values is None


def test_a_step_attends_with_one_query_and_the_cache_grows_by_one(transformer_memory, monkeypatch):
    model = decoder("additive")
    memory = model.prepare(transformer_memory)
    state = model.init_state(memory)
    assert all(layer["keys"].shape == (3, 2, 0, 8) for layer in state["layers"])
    shapes = []
    fused = F.scaled_dot_product_attention
    monkeypatch.setattr(
        F,
        "scaled_dot_product_attention",
        lambda q, k, v, **kw: shapes.append((q.shape, k.shape)) or fused(q, k, v, **kw),
    )
    for t in range(1, 5):
        shapes.clear()
        _, _, state = model.step(torch.full((3,), 4), memory, state)
        assert all(
            layer["keys"].shape == (3, 2, t, 8) and layer["values"].shape == (3, 2, t, 8) for layer in state["layers"]
        )
        assert shapes == [((3, 2, 1, 8), (3, 2, t, 8))] * SIZES["num_layers"]  # one query over t keys: O(t)


def test_greedy_and_beam_search_run_and_beam_one_is_greedy(transformer_memory):
    model = decoder("multihead")
    greedy = GreedySearch(max_len_b=5)(model, transformer_memory, bos_id=1, eos_id=2, pad_id=0)
    beam_one = BeamSearch(beam_size=1, length_penalty=0.0, max_len_b=5)(model, transformer_memory, 1, 2, 0)
    assert torch.equal(greedy.tokens, beam_one.tokens)
    torch.testing.assert_close(greedy.weights, beam_one.weights)
    beam = BeamSearch(beam_size=3, max_len_b=5)(model, transformer_memory, bos_id=1, eos_id=2, pad_id=0)
    steps = beam.tokens.size(1)
    assert beam.weights.shape == (3, steps, 7) and beam.head_weights.shape == (3, 2, steps, 7)  # (B, H, T, S)
    torch.testing.assert_close(beam.head_weights.mean(dim=1), beam.weights)


@pytest.mark.parametrize("beam_size", [3, 4])
def test_batched_beam_search_equals_one_sentence_at_a_time(beam_size, source_batch):
    """Sentences of different lengths searched together give what each gives alone (encoded alone, no padding):
    the same tokens, scores and attention weights (every head's) of the chosen hypothesis."""
    encoder, model = text_encoder(), decoder("multihead")
    src, lengths = source_batch
    search = BeamSearch(beam_size=beam_size, length_penalty=0.6, max_len_b=5)
    batched = search(model, encoder(src, lengths), bos_id=1, eos_id=2, pad_id=0)
    for row in range(3):
        n = int(lengths[row])
        alone = search(model, encoder(src[row : row + 1, :n], lengths[row : row + 1]), bos_id=1, eos_id=2, pad_id=0)
        steps = int(alone.lengths[0])
        assert batched.sequences()[row] == alone.sequences()[0] and int(batched.lengths[row]) == steps
        torch.testing.assert_close(batched.scores[row], alone.scores[0], atol=1e-5, rtol=1e-5)
        weights, heads = batched.weights[row], batched.head_weights[row]  # (T, S), (H, T, S)
        torch.testing.assert_close(weights[:steps, :n], alone.weights[0, :steps], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(heads[:, :steps, :n], alone.head_weights[0, :, :steps], atol=1e-5, rtol=1e-5)
        assert weights[steps:].abs().sum() == 0 and weights[:, n:].abs().sum() == 0  # none after the end, on padding


def test_memory_of_another_size_is_projected(source_batch):
    memory = TransformerEncoder("text", vocab_size=40, **{**SIZES, "d_model": 12}).eval()(*source_batch)
    model = decoder("dot", memory_dim=12)
    logits, attended = model(torch.randint(3, 30, (3, 4)), memory)
    assert logits.shape == (3, 4, 30) and model.prepare(memory).values.shape == (3, 7, 16)
    assert GreedySearch(max_len_b=3)(model, memory, 1, 2, 0).weights.shape[-1] == 7


def test_hard_attention_sums_log_prob_and_entropy_over_layers(transformer_memory):
    hard = functools.partial(HardAttention, scorer=ATTENTIONS["additive"], expected_context_probability=0.0)
    model = TransformerDecoder(30, 16, hard, **SIZES).train()
    layers = []
    for layer in model.layers:  # each layer's own output, recorded on the way
        layer.cross_attention.register_forward_hook(lambda module, args, out: layers.append(out))
    _, attended = model(torch.randint(3, 30, (3, 4)), transformer_memory)
    assert len(layers) == 2 and attended.log_prob.shape == (3, 4)
    torch.testing.assert_close(attended.log_prob, layers[0].log_prob + layers[1].log_prob)
    torch.testing.assert_close(attended.entropy, layers[0].entropy + layers[1].entropy)


def test_gradients_reach_every_parameter_and_tying_shares_the_embedding(source_batch):
    encoder = text_encoder().train()
    model = decoder("multihead", tie_embeddings=True).train()
    assert model.output_layer.weight is model.embedding.weight
    logits, _ = model(torch.randint(3, 30, (3, 5)), encoder(*source_batch))
    logits.logsumexp(-1).sum().backward()
    for module in (encoder, model):
        for name, parameter in module.named_parameters():
            assert parameter.grad is not None and parameter.grad.abs().sum() > 0, name


def test_sizes_that_cannot_split_into_heads_are_refused():
    with pytest.raises(ValueError, match="num_heads"):
        TransformerDecoder(30, 16, DotAttention, d_model=18, num_heads=4)
    with pytest.raises(ValueError, match="num_heads"):
        TransformerEncoder("text", vocab_size=30, d_model=18, num_heads=4)


def test_a_tiny_model_learns_to_copy():
    torch.manual_seed(0)
    sizes = {"d_model": 32, "num_layers": 1, "num_heads": 2, "ff_dim": 64, "dropout": 0.0}
    encoder = TransformerEncoder("text", vocab_size=12, **sizes)
    model = TransformerDecoder(12, 32, ATTENTIONS["multihead"], **sizes)
    parameters = [*encoder.parameters(), *model.parameters()]
    optimizer = torch.optim.Adam(parameters, lr=3e-3)
    lengths = torch.full((32,), 5)
    for _ in range(200):
        src = torch.randint(3, 12, (32, 5))
        tgt = torch.cat([torch.full((32, 1), 1), src, torch.full((32, 1), 2)], dim=1)  # bos ... eos
        logits, _ = model(tgt[:, :-1], encoder(src, lengths))
        loss = F.cross_entropy(logits.flatten(0, 1), tgt[:, 1:].flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    encoder.eval(), model.eval()
    src = torch.randint(3, 12, (32, 5), generator=torch.Generator().manual_seed(1))
    result = GreedySearch(max_len_a=1.0, max_len_b=2)(model, encoder(src, lengths), 1, 2, 0)
    copied = [hypothesis == reference for hypothesis, reference in zip(result.sequences(), src.tolist(), strict=True)]
    assert sum(copied) / len(copied) >= 0.9


def test_doubly_stochastic_penalty_reads_the_returned_weights(transformer_memory):
    model = decoder("additive", doubly_stochastic=0.5)
    _, attended = model(torch.randint(3, 30, (3, 4)), transformer_memory)
    target_mask = torch.ones(3, 4, dtype=torch.bool)
    totals = attended.weights.sum(dim=1)  # (B, S)
    expected = 0.5 * ((1 - totals) ** 2 * transformer_memory.mask).sum() / target_mask.sum()  # per target token
    torch.testing.assert_close(
        model.attention_penalty(attended.weights, target_mask, transformer_memory.mask), expected
    )


def test_context_only_multi_head_attention_equals_the_explicit_path(source_batch):
    torch.manual_seed(0)
    attention = MultiHeadAttention(16, 16, num_heads=4).eval()
    values = torch.randn(3, 7, 16)
    memory = attention.prepare(Memory(values=values, mask=torch.arange(7) < source_batch[1].unsqueeze(1)))
    query = torch.randn(3, 5, 16)
    fused = attention.context_only(query, memory)
    assert fused.weights is None  # skipped: nobody reads them
    torch.testing.assert_close(fused.context, attention(query, memory).context, atol=1e-6, rtol=1e-5)
