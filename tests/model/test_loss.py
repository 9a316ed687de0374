"""model.loss_normalization: the summed cross-entropy over target tokens or over sentences."""

from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from attend.decoders import LuongDecoder
from attend.encoders import TextEncoder
from attend.model import Seq2Seq
from tests.helpers.parts import additive


def loss(normalization: str, logits, targets):
    model = SimpleNamespace(
        target_tokenizer=SimpleNamespace(pad_id=0), label_smoothing=0.1, loss_normalization=normalization
    )
    return Seq2Seq.loss(model, logits, targets)


def test_token_and_sentence_normalisation():
    torch.manual_seed(0)
    logits = torch.randn(3, 5, 7)  # (B, T, V)
    targets = torch.tensor([[4, 5, 2, 0, 0], [3, 2, 0, 0, 0], [6, 6, 6, 6, 2]])  # 10 real tokens
    per_token = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=0, label_smoothing=0.1)
    torch.testing.assert_close(loss("tokens", logits, targets), per_token)
    torch.testing.assert_close(loss("sentences", logits, targets), per_token * 10 / 3)


def test_unknown_normalisation_is_refused():
    encoder = TextEncoder(10, embedding_dim=4, hidden_size=4)
    decoder = LuongDecoder(10, 8, additive(), embedding_dim=4, hidden_size=8)
    with pytest.raises(ValueError, match="model.loss_normalization must be tokens or sentences"):
        Seq2Seq(
            encoder, decoder, tokenizers={"target": SimpleNamespace(pad_id=0, vocab_size=10)}, optimizer=None,
            val_search=None, test_search=None, metrics={}, loss_normalization="words",
        )
