"""Speech recognition pieces of the model: the hybrid CTC loss, LAS sampling, CER/WER, alignment plots."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attend.attention import AdditiveAttention
from attend.data import Spectrogram
from attend.decoders import BahdanauDecoder, LuongDecoder
from attend.memory import Memory
from attend.metrics import CharErrorRate, Decoded, WordErrorRate
from attend.model import Seq2Seq
from attend.plots import close_figure, spectrogram_alignment
from attend.search import GreedySearch
from tests.helpers.tiny_recognizer import tiny_recognizer


def make_model(ctc_weight: float) -> tuple[Seq2Seq, dict]:
    """The tiny recognizer (tests/helpers/tiny_recognizer.py) searching greedily."""
    return tiny_recognizer(ctc_weight, GreedySearch())

def test_ctc_loss_reads_the_targets_without_specials():
    model, batch = make_model(ctc_weight=0.3)
    losses = model.teacher_forced_losses(batch)
    assert set(losses) == {"cross_entropy", "ctc"}
    log_probs = torch.log_softmax(model.ctc_head(batch["src"]), dim=-1)  # (B, N, V)
    tok = model.target_tokenizer
    expected = F.ctc_loss(
        log_probs.transpose(0, 1), torch.tensor(tok.encode("abc") + tok.encode("ca")), torch.tensor([9, 6]),
        torch.tensor([3, 2]), blank=tok.pad_id,
    )
    torch.testing.assert_close(losses["ctc"], expected)
    objective = model.objective(losses)
    torch.testing.assert_close(objective, 0.7 * losses["cross_entropy"] + 0.3 * losses["ctc"])
    objective.backward()
    assert model.ctc_head.weight.grad.abs().sum() > 0


def test_without_ctc_there_is_no_ctc_head_or_loss():
    model, batch = make_model(ctc_weight=0.0)
    assert model.ctc_head is None and set(model.teacher_forced_losses(batch)) == {"cross_entropy"}
    with pytest.raises(ValueError, match="ctc_weight"):
        make_model(ctc_weight=1.5)


@pytest.mark.parametrize("cls", [BahdanauDecoder, LuongDecoder])
def test_las_sampling_feeds_sampled_tokens_when_training_only(cls):
    memory = Memory(values=torch.randn(2, 5, 6), mask=torch.ones(2, 5, dtype=torch.bool))
    tgt_in = torch.randint(3, 20, (2, 7))
    torch.manual_seed(0)
    decoder = cls(20, 6, functools.partial(AdditiveAttention, hidden_dim=8), embedding_dim=8, hidden_size=12,
                  dropout=0.0, sampling_probability=1.0)
    decoder.eval()
    reference_logits, _ = decoder(tgt_in, memory)
    decoder.train()
    sampled_logits, attended = decoder(tgt_in, memory)
    assert sampled_logits.shape == reference_logits.shape and attended.weights.shape == (2, 7, 5)
    torch.testing.assert_close(sampled_logits[:, 0], reference_logits[:, 0])  # the first input is bos
    assert not torch.allclose(sampled_logits[:, 1:], reference_logits[:, 1:])  # later inputs were sampled
    decoder.sampling_probability = 0.0
    torch.testing.assert_close(decoder(tgt_in, memory)[0], reference_logits)


def test_error_rates_add_up_across_ranks():
    hypotheses = ["the cat sat", "a dog", "one two three", "zero"]
    references = ["the cat sat down", "the dog", "one two tree", "zero"]
    for metric_class in (CharErrorRate, WordErrorRate):
        whole = metric_class()
        whole.update(Decoded.text(hypotheses, references))
        # what DDP does: each rank counts its shard, the states (errors, totals) are summed
        ranks = [metric_class(), metric_class()]
        ranks[0].update(Decoded.text(hypotheses[:1], references[:1]))
        ranks[1].update(Decoded.text(hypotheses[1:], references[1:]))
        assert all(ranks[0]._reductions[name] is not None for name in ("errors", "total"))
        summed = {name: getattr(ranks[0], name) + getattr(ranks[1], name) for name in ("errors", "total")}
        torch.testing.assert_close(summed["errors"] / summed["total"], whole.compute())
    wer = WordErrorRate()
    wer.update(Decoded.text(hypotheses, references))
    assert float(wer.compute()) == pytest.approx(3 / 10)  # a deletion and two substitutions in 10 words


def test_alignment_plot_puts_spectrogram_and_weights_on_one_time_axis(tmp_path):
    features = np.random.default_rng(0).standard_normal((40, 200)).astype(np.float32)  # 2 s
    weights = np.zeros((5, 50), dtype=np.float32)
    weights[np.arange(5), np.arange(5) * 10] = 1.0  # a monotone alignment
    fig = spectrogram_alignment(weights, Spectrogram(features, 0.01), list("abcd") + ["</s>"], title="utt")
    top, bottom = fig.axes[:2]
    assert top.get_xlim() == pytest.approx((0.0, 2.0)) and bottom.get_xlim() == pytest.approx((0.0, 2.0))
    assert [label.get_text() for label in bottom.get_yticklabels()] == ["a", "b", "c", "d", "</s>"]
    fig.savefig(tmp_path / "alignment.png")
    close_figure(fig)
    assert (tmp_path / "alignment.png").stat().st_size > 1000


def test_a_long_output_keeps_the_alignment_panel_at_its_height_cap_and_labels_every_kth_token():
    features = np.zeros((40, 1500), dtype=np.float32)  # 15 s
    output = [chr(ord("a") + i % 26) for i in range(200)] + ["</s>"]
    weights = np.full((201, 375), 1 / 375, dtype=np.float32)
    fig = spectrogram_alignment(weights, Spectrogram(features, 0.01), output, max_panel_height=8.0)
    labels = [label.get_text() for label in fig.axes[1].get_yticklabels()]
    assert fig.get_size_inches()[1] == pytest.approx(1.6 + 8.0 + 1.0)  # spectrogram, capped panel, margins
    assert labels == output[::5]  # 201 rows of 0.16 in would be 32 in: every 5th label fits 8 in
    close_figure(fig)


def test_monotone_alignment_counts_steps_that_do_not_go_back():
    from attend.metrics import MonotoneAlignment
    from attend.search import SearchResult

    weights = torch.zeros(2, 4, 6)
    for t, s in enumerate([0, 2, 1, 5]):  # back by one (tolerated), then forward
        weights[0, t, s] = 1.0
    for t, s in enumerate([3, 0, 4, 0]):  # back by three, forward; the last step is padding
        weights[1, t, s] = 1.0
    result = SearchResult(tokens=torch.ones(2, 4, dtype=torch.long), lengths=torch.tensor([4, 3]), weights=weights,
                          scores=torch.zeros(2), eos_id=2)
    metric = MonotoneAlignment(tolerance=1)
    metric.update(Decoded({}, result, []))
    assert float(metric.compute()) == pytest.approx(100.0 * 4 / 5)
    strict = MonotoneAlignment(tolerance=0)
    strict.update(Decoded({}, result, []))
    assert float(strict.compute()) == pytest.approx(100.0 * 3 / 5)
