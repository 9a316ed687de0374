"""Opt-in torch.compile (model.compile_parts): compiled in place, the same loss, checkpoints unchanged."""

from __future__ import annotations

import pytest
import torch

from attend.decoders import LuongDecoder
from attend.encoders import TextEncoder
from attend.model import compile_in_place
from tests.helpers.parts import additive


class Pair(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = TextEncoder(40, embedding_dim=8, hidden_size=8, dropout=0.0)
        self.decoder = LuongDecoder(
            vocab_size=30, embedding_dim=8, hidden_size=16, memory_dim=16, attention=additive(), pad_id=0, dropout=0.0,
            input_feeding=False,  # teacher forcing in one RNN call: a short compile
        )


def teacher_forced(model: Pair, source_batch) -> torch.Tensor:
    logits, _ = model.decoder(torch.tensor([[1, 5, 6, 7]] * 3), model.encoder(*source_batch))
    return logits


def test_compiled_parts_give_the_same_outputs_and_the_same_state_dict(source_batch):
    torch.manual_seed(0)
    eager = Pair().eval()
    compiled = Pair().eval()
    compiled.load_state_dict(eager.state_dict())
    # aot_eager: TorchDynamo's capture and AOTAutograd's graphs without generating C++, so the test stays fast
    compile_in_place(compiled, ["encoder", "decoder"], {"backend": "aot_eager", "dynamic": True})
    assert compiled.encoder._compiled_call_impl is not None and compiled.decoder._compiled_call_impl is not None
    torch.testing.assert_close(teacher_forced(compiled, source_batch), teacher_forced(eager, source_batch))
    assert list(compiled.state_dict()) == list(eager.state_dict())  # no _orig_mod. prefix: checkpoints load either way


def test_an_unknown_part_is_refused_by_name():
    with pytest.raises(ValueError, match="names 'encoder_rnn'.*use encoder, decoder"):
        compile_in_place(Pair(), ["encoder_rnn"], {})
