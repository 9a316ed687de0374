"""The model asks its parts, never their types: every metric gets the Decoded batch, the decoder declares its
attention penalty and whether it samples, and a metric declares that it may headline the progress bar."""

from __future__ import annotations

import pytest
import torch
from torchmetrics import Metric

from attend.data import CharTokenizer
from attend.decoders import LuongDecoder
from attend.encoders import TextEncoder
from attend.metrics import BLEU, AttentionEntropy, Decoded, ExactMatch
from attend.model import Seq2Seq
from attend.search import GreedySearch
from tests.helpers.parts import additive

TEXTS = ["abc", "ba"]


class Spy(Metric):
    """A metric written outside Attend: it keeps every ``Decoded`` it is given."""

    def __init__(self) -> None:
        super().__init__()
        self.add_state("rows", default=torch.tensor(0), dist_reduce_fx="sum")
        self.received: list[Decoded] = []

    def update(self, decoded: Decoded) -> None:
        self.received.append(decoded)
        self.rows += len(decoded.hypotheses)

    def compute(self) -> torch.Tensor:
        return self.rows


def tokenizer() -> CharTokenizer:
    chars = CharTokenizer()
    chars.fit(TEXTS)
    return chars


def model(metrics: dict[str, Metric], **decoder_options) -> Seq2Seq:
    torch.manual_seed(0)
    chars = tokenizer()
    encoder = TextEncoder(chars.vocab_size, embedding_dim=4, hidden_size=4, dropout=0.0)
    decoder = LuongDecoder(
        chars.vocab_size, encoder.output_dim, additive(), embedding_dim=4, hidden_size=8, dropout=0.0,
        **decoder_options,
    )
    search = GreedySearch(max_len_a=0.0, max_len_b=4)
    return Seq2Seq(
        encoder, decoder, {"target": chars}, optimizer=torch.optim.Adam, val_search=search, test_search=search,
        metrics=metrics,
    ).eval()


def batch() -> dict:
    """The texts as sources and as targets (bos ... eos), padded."""
    chars = tokenizer()
    src = torch.nn.utils.rnn.pad_sequence([torch.tensor(chars.encode(t)) for t in TEXTS], batch_first=True)
    targets = [torch.tensor([chars.bos_id, *chars.encode(t), chars.eos_id]) for t in TEXTS]
    return {
        "src": src, "src_lengths": torch.tensor([len(t) for t in TEXTS]),
        "tgt": torch.nn.utils.rnn.pad_sequence(targets, batch_first=True, padding_value=chars.pad_id),
        "references": TEXTS, "sources": TEXTS, "ids": torch.arange(len(TEXTS)),
    }


@pytest.mark.filterwarnings("ignore:You are trying to `self.log")  # no trainer: nothing is logged
def test_a_metric_of_any_class_receives_the_batch_the_search_result_and_the_hypotheses():
    seq2seq = model({"spy": Spy()})
    given = batch()
    seq2seq.validation_step(given, 0)
    (decoded,) = seq2seq.val_metrics["spy"].received
    assert decoded.batch is given and decoded.references == TEXTS
    assert decoded.result.weights.shape[:2] == decoded.result.tokens.shape  # (B, T, S) of the chosen outputs
    chars = tokenizer()
    assert decoded.hypotheses == [chars.decode(ids) for ids in decoded.result.sequences()]
    assert [len(decoded.output_tokens(i)) for i in range(2)] == decoded.result.lengths.tolist()  # one per step
    assert decoded.text_rows([1]) == Decoded.text(decoded.hypotheses[1:], TEXTS[1:])


def test_the_attention_penalty_is_a_loss_only_when_the_decoder_has_one():
    assert "attention_penalty" not in model({}).teacher_forced_losses(batch())
    losses = model({}, doubly_stochastic=1.0).teacher_forced_losses(batch())
    assert float(losses["attention_penalty"].detach()) > 0


def test_the_progress_bar_shows_the_first_metric_that_declares_headline():
    assert model({"entropy": AttentionEntropy(), "exact": ExactMatch(), "bleu": BLEU()}).headline_metric == "exact"
    assert model({"entropy": AttentionEntropy(), "spy": Spy()}).headline_metric is None
