"""A tiny speech recogniser: the features are the memory (FrameEncoder), a small Bahdanau decoder, a CTC head at
``ctc_weight``, and one batch of two utterances for it."""

from __future__ import annotations

import functools

import torch

from attend.attention import AdditiveAttention
from attend.data import CharTokenizer
from attend.decoders import BahdanauDecoder
from attend.memory import Memory
from attend.metrics import CharErrorRate
from attend.model import Seq2Seq
from attend.search import GreedySearch


class FrameEncoder(torch.nn.Module):
    """Features (B, N, F) as the memory, unchanged: enough to test the losses."""

    output_dim = 6

    def forward(self, features, lengths):
        mask = torch.arange(features.size(1)).unsqueeze(0) < lengths.unsqueeze(1)
        return Memory(values=features, mask=mask)


def tiny_recognizer(ctc_weight: float, test_search, **options) -> tuple[Seq2Seq, dict]:
    """The model (test search ``test_search``, CER as its metric) and its batch."""
    tokenizer = CharTokenizer()
    tokenizer.fit(["abc cab"])
    torch.manual_seed(0)
    decoder_ = BahdanauDecoder(tokenizer.vocab_size, 6, functools.partial(AdditiveAttention, hidden_dim=8),
                               embedding_dim=8, hidden_size=12, dropout=0.0)
    model = Seq2Seq(FrameEncoder(), decoder_, {"target": tokenizer}, optimizer=torch.optim.Adam,
                    val_search=GreedySearch(max_len_a=0.5, max_len_b=2), test_search=test_search,
                    metrics={"cer": CharErrorRate()}, ctc_weight=ctc_weight, **options)
    references = ["abc", "ca"]
    tgt = torch.zeros(2, 5, dtype=torch.long)
    for row, text in enumerate(references):
        full = [tokenizer.bos_id, *tokenizer.encode(text), tokenizer.eos_id]
        tgt[row, : len(full)] = torch.tensor(full)
    batch = {"src": torch.randn(2, 9, 6), "src_lengths": torch.tensor([9, 6]), "tgt": tgt,
             "references": references, "ids": torch.tensor([0, 1]), "sources": ["a.wav", "b.wav"]}
    return model, batch
