"""Per-head attention plots: one panel per head in each task's plot, and the search result they come from."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

from attend.attention import MultiHeadAttention
from attend.data import Spectrogram
from attend.decoders import LuongDecoder
from attend.plots import close_figure, image_attention, spectrogram_alignment, text_heatmap
from attend.search import BeamSearch, GreedySearch

HEADS, STEPS = 3, 4


def normalised(*shape: int) -> np.ndarray:
    weights = np.random.default_rng(0).random(shape).astype(np.float32)
    return weights / weights.sum(axis=-1, keepdims=True)  # in [0, 1]: all the plots need


def panels(fig) -> list:
    """Axes that show data (colorbars have no title and no y label, and are left out)."""
    return [ax for ax in fig.axes if ax.images and (ax.get_title() or ax.get_ylabel())]


def test_text_heatmap_draws_one_panel_per_head():
    source, output = ["a", "b", "c", "d", "e"], ["x", "y", "z", "</s>"]
    fig = text_heatmap(normalised(HEADS, STEPS, 5), source, output, title="ex")
    try:
        assert [ax.get_title() for ax in panels(fig)] == [f"ex head {h}" for h in (1, 2, 3)]
    finally:
        close_figure(fig)
    fig = text_heatmap(normalised(STEPS, 5), source, output, title="ex")
    try:
        assert [ax.get_title() for ax in panels(fig)] == ["ex"]
    finally:
        close_figure(fig)


def test_image_attention_draws_one_row_per_head():
    words = ["a", "red", "circle", "</s>"]
    image = np.full((32, 32, 3), 255, dtype=np.uint8)
    fig = image_attention(normalised(HEADS, STEPS, 4, 4), image, words, title="img")
    try:
        titles = [ax.get_title() for ax in fig.axes if ax.images]
        assert len(titles) == HEADS * (len(words) + 1)
        assert [t for t in titles if t.startswith("img")] == [f"img head {h}" for h in (1, 2, 3)]
    finally:
        close_figure(fig)


def test_spectrogram_alignment_draws_one_panel_per_head():
    spectrogram = Spectrogram(np.random.default_rng(0).random((20, 100)).astype(np.float32), 0.01)
    fig = spectrogram_alignment(normalised(HEADS, STEPS, 25), spectrogram, list("abc") + ["</s>"], title="utt")
    try:
        labels = [ax.get_ylabel() for ax in fig.axes if ax.images]
        assert labels == ["mel bin", "head 1", "head 2", "head 3"]
    finally:
        close_figure(fig)


SEARCHES = [GreedySearch(max_len_a=1.0, max_len_b=3), BeamSearch(3, max_len_a=1.0, max_len_b=3)]


@pytest.mark.parametrize("search", SEARCHES)
def test_search_returns_each_heads_weights_of_the_chosen_output(memory, search):
    torch.manual_seed(0)
    heads = functools.partial(MultiHeadAttention, num_heads=2)
    decoder = LuongDecoder(30, 16, heads, embedding_dim=8, hidden_size=16, dropout=0.0).eval()
    result = search(decoder, memory, bos_id=1, eos_id=2, pad_id=0)
    batch, steps, positions = result.weights.shape
    assert result.head_weights.shape == (batch, 2, steps, positions)
    torch.testing.assert_close(result.head_weights.mean(dim=1), result.weights)
    for i, tokens in enumerate(result.sequences()):  # teacher forcing the chosen output gives the same heads
        row = memory.index_select(torch.tensor([i]))
        attended = decoder(torch.tensor([[1] + tokens]), row)[1]
        length = len(tokens) + 1
        torch.testing.assert_close(
            attended.head_weights[0], result.head_weights[i, :, :length, : attended.weights.size(-1)],
            atol=1e-5, rtol=1e-4,
        )
