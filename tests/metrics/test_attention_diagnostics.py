"""Attention diagnostics: entropy, coverage deficit, and alignment error against the true date alignment."""

from __future__ import annotations

import datetime
import itertools
import math

import pytest
import torch
from babel import Locale
from babel.dates import format_date
from torchmetrics.utilities.data import dim_zero_sum

from attend.data import CharTokenizer, DatePairs, ParallelText, WordTokenizer
from attend.data.text.date_alignment import date_pieces, iso_alignment, normalized_positions
from attend.data.text.dates import DEFAULT_FORMATS, DEFAULT_LOCALES, WrittenDate
from attend.metrics import AlignmentError, AttentionEntropy, CoverageDeficit, Decoded
from attend.search import SearchResult
from tests.helpers.datamodules import text_datamodule
from tests.helpers.paths import MULTI30K


def search_result(weights, lengths, source_lengths=None, tokens=None, grid=None) -> SearchResult:
    """A search's result with these (B, T, S) weights; ``tokens`` (B, T) default to one dummy id."""
    batch, steps, _ = weights.shape
    return SearchResult(
        tokens=torch.full((batch, steps), 5, dtype=torch.long) if tokens is None else tokens,
        lengths=torch.tensor(lengths),
        weights=weights,
        scores=torch.zeros(batch),
        eos_id=2,
        source_lengths=None if source_lengths is None else torch.tensor(source_lengths),
        grid=grid,
    )


def one_hot(positions: list[int], size: int) -> torch.Tensor:
    """(T, S): step t attends only to positions[t]."""
    return torch.nn.functional.one_hot(torch.tensor(positions), size).float()


# entropy --------------------------------------------------------------------------------------
def padded_rows() -> SearchResult:
    """Row 0: 2 real steps uniform over its 4 valid positions; row 1: 3 one-hot steps over 5. Padding is garbage."""
    weights = torch.full((2, 4, 5), 0.7)  # steps past each row's length must be ignored
    weights[0, :2] = torch.tensor([0.25, 0.25, 0.25, 0.25, 0.0])
    weights[1, :3] = one_hot([4, 0, 2], 5)
    return search_result(weights, lengths=[2, 3], source_lengths=[4, 5])


def test_entropy_is_log_n_for_uniform_and_zero_for_one_hot_weights():
    metric = AttentionEntropy()
    metric.update(Decoded({}, padded_rows(), []))
    assert float(metric.compute()) == pytest.approx((2 * math.log(4) + 3 * 0.0) / 5)
    normalized = AttentionEntropy(normalized=True)
    normalized.update(Decoded({}, padded_rows(), []))
    assert float(normalized.compute()) == pytest.approx((2 * 100.0 + 3 * 0.0) / 5)


def test_entropy_without_source_lengths_counts_every_position_and_a_single_position_has_none():
    uniform = AttentionEntropy()
    uniform.update(Decoded({}, search_result(torch.full((1, 3, 6), 1 / 6), lengths=[3]), []))
    assert float(uniform.compute()) == pytest.approx(math.log(6))
    single = AttentionEntropy(normalized=True)  # log 1 = 0: no division by zero
    single.update(Decoded({}, search_result(torch.ones(1, 2, 1), lengths=[2], source_lengths=[1]), []))
    assert float(single.compute()) == 0.0


# coverage -------------------------------------------------------------------------------------
def test_coverage_deficit_is_zero_for_a_one_to_one_alignment():
    weights = torch.zeros(2, 5, 4)
    weights[0, :4] = one_hot([0, 1, 2, 3], 4)  # each position read once
    weights[0, 4] = 0.9  # after the end: ignored
    weights[1, :3] = one_hot([2, 0, 1], 4)  # a permutation is one-to-one too
    metric = CoverageDeficit()
    metric.update(Decoded({}, search_result(weights, lengths=[4, 3], source_lengths=[4, 3]), []))
    assert float(metric.compute()) == 0.0


def test_coverage_deficit_counts_positions_skipped_or_read_twice():
    weights = torch.zeros(1, 2, 3)
    weights[0] = one_hot([0, 0], 3)  # coverage (2, 0, 0): each position is one unit off
    metric = CoverageDeficit()
    metric.update(Decoded({}, search_result(weights, lengths=[2]), []))
    assert float(metric.compute()) == pytest.approx(1.0)
    assert not CoverageDeficit.higher_is_better and not AttentionEntropy.higher_is_better


# DDP ------------------------------------------------------------------------------------------
def summed_state_value(
    metric_class, whole: SearchResult, shards: list[tuple[dict, SearchResult]], batch=None, tokenizer=None
):
    """(the metric over all data, the metric from the shards' states summed as DDP does)."""
    full = metric_class()
    full.update(Decoded(batch or {}, whole, [], tokenizer))
    ranks = []
    for shard_batch, shard in shards:
        rank = metric_class()
        rank.update(Decoded(shard_batch, shard, [], tokenizer))
        ranks.append(rank)
    assert all(reduction is dim_zero_sum for reduction in ranks[0]._reductions.values())  # what DDP applies
    for rank in ranks[1:]:
        ranks[0].merge_state(rank)  # each state summed, as DDP's sync does
    return float(full.compute()), float(ranks[0].compute())


def test_entropy_and_coverage_states_add_up_across_ranks():
    whole = padded_rows()
    rows = [slice(0, 1), slice(1, 2)]  # one row for each of two ranks
    shards = [
        ({}, search_result(whole.weights[r], whole.lengths[r].tolist(), whole.source_lengths[r].tolist())) for r in rows
    ]
    for metric_class in (AttentionEntropy, CoverageDeficit):
        full, merged = summed_state_value(metric_class, whole, shards)
        assert merged == pytest.approx(full)


# date alignment -------------------------------------------------------------------------------
def spans_text(source: str, alignment: list) -> list[str | None]:
    return [None if span is None else source[span[0] : span[1]] for span in alignment]


@pytest.mark.parametrize(
    "locale,format,source,year,month,day",
    [
        ("de_DE", "long", "5. März 2021", "2021", "März", "5"),
        ("de_DE", "full", "Freitag, 5. März 2021", "2021", "März", "5"),
        ("en_US", "short", "3/5/21", "21", "3", "5"),
        ("es_ES", "full", "viernes, 5 de marzo de 2021", "2021", "marzo", "5"),
        ("nl_NL", "short", "05-03-2021", "2021", "03", "05"),
    ],
)
def test_date_spans_by_hand(locale, format, source, year, month, day):
    written = WrittenDate(datetime.date(2021, 3, 5), format, Locale.parse(locale))
    assert written.pair() == (source, "2021-03-05")
    assert spans_text(source, written.alignment()) == [year] * 4 + [None] + [month] * 2 + [None] + [day] * 2


def test_german_long_date_spans_are_character_indices():
    alignment = WrittenDate(datetime.date(2021, 3, 5), "long", Locale.parse("de_DE")).alignment()
    # "5. März 2021": day at 0, month at 3..6, year at 8..11
    assert alignment == [(8, 12)] * 4 + [None] + [(3, 7)] * 2 + [None] + [(0, 1)] * 2


def test_spans_follow_whitespace_normalisation():
    assert normalized_positions("  a\u00a0 bc ") == [None, None, 0, None, None, 2, 3, None]
    written = WrittenDate(datetime.date(1999, 12, 31), "'  'd  MMMM\u00a0y ", Locale.parse("en_GB"))
    assert written.pair()[0] == "31 December 1999"
    assert written.alignment() == [(12, 16)] * 4 + [None] + [(3, 11)] * 2 + [None] + [(0, 2)] * 2


def test_a_field_written_twice_or_not_at_all_has_no_span():
    written = WrittenDate(datetime.date(2001, 2, 3), "d/M/y (M)", Locale.parse("en_GB"))
    assert written.alignment() == [(4, 8)] * 4 + [None] * 3 + [None] + [(0, 1)] * 2
    assert WrittenDate(datetime.date(2001, 2, 3), "d MMM", Locale.parse("en_GB")).alignment()[:4] == [None] * 4


DAYS = [datetime.date(1950, 1, 1), datetime.date(2049, 12, 31)] + [
    datetime.date(1961 + month, month, day) for month in range(1, 13) for day in (1, 9, 10, 28)
]


@pytest.mark.parametrize("locale", DEFAULT_LOCALES)
def test_field_by_field_rebuild_equals_format_date_for_every_locale_and_format(locale):
    for format, date in itertools.product(DEFAULT_FORMATS, DAYS):
        pieces = date_pieces(date, format, locale)
        text = format_date(date, format, locale=locale)
        assert "".join(piece for piece, _ in pieces) == text, (locale, format, date)
        normalized = " ".join(text.split())
        year, month, day = (normalized[start:end] for start, end in (iso_alignment(pieces)[i] for i in (0, 5, 8)))
        assert date.isoformat()[:4].endswith(year) and len(year) in (2, 4)
        assert int(day) == date.day
        assert not month.isdigit() or int(month) == date.month


def test_date_pairs_carry_their_alignments_in_val_and_test():
    source = DatePairs(n_train=200, n_val=30, n_test=30, seed=7)
    splits = source.splits()
    assert all(len(pair) == 2 for pair in splits["train"])  # only the scored splits need alignments
    assert not hasattr(source, "alignments")
    for split in ("val", "test"):
        assert len(splits[split]) == 30
        for written, iso, alignment in splits[split]:
            assert len(alignment) == len(iso) == 10
            year, month, day = (spans_text(written, alignment)[i] for i in (0, 5, 8))
            assert int(day) == int(iso[8:]) and iso[:4].endswith(year)
            assert not month.isdigit() or int(month) == int(iso[5:7])


# batches --------------------------------------------------------------------------------------
def test_val_and_test_batches_carry_alignments_onto_source_character_positions():
    dm = text_datamodule(DatePairs(n_train=300, n_val=20, n_test=20, seed=5), CharTokenizer(), CharTokenizer())
    dm.setup("fit")
    assert "alignments" not in next(iter(dm.train_dataloader()))  # only scored splits need them
    for loader in (dm.val_dataloader(), dm.test_dataloader()):
        for batch in loader:
            assert len(batch["alignments"]) == len(batch["references"])
            rows = zip(batch["sources"], batch["references"], batch["alignments"], strict=True)
            for i, (source, reference, alignment) in enumerate(rows):
                # one id per character and no bos/eos on the source: memory position j is source character j
                assert int(batch["src_lengths"][i]) == len(source) == len(dm.plugin.tokenizer.encode(source))
                assert batch["src"][i, : len(source)].tolist() == dm.plugin.tokenizer.encode(source)
                assert len(alignment) == len(reference)
                assert all(span is None or 0 <= span[0] < span[1] <= len(source) for span in alignment)


def test_sources_without_alignments_give_batches_without_them():
    dm = text_datamodule(ParallelText(MULTI30K), WordTokenizer(), WordTokenizer(), batch_size=4)
    dm.setup("fit")
    assert "alignments" not in next(iter(dm.val_dataloader()))


# alignment error ------------------------------------------------------------------------------
SOURCE = "5. März 2021"
REFERENCE = "2021-03-05"
SPANS = WrittenDate(datetime.date(2021, 3, 5), "long", Locale.parse("de_DE")).alignment()


def date_tokenizer() -> CharTokenizer:
    tokenizer = CharTokenizer()
    tokenizer.fit(["0123456789-"])
    return tokenizer


def date_result(peaks: list[int], hypothesis: str = REFERENCE, grid=None) -> SearchResult:
    """A decoded ``hypothesis`` + eos whose step t attends only to source position peaks[t]."""
    tokenizer = date_tokenizer()
    tokens = torch.tensor([tokenizer.encode(hypothesis) + [tokenizer.eos_id]])
    weights = one_hot(peaks + [len(SOURCE) - 1], len(SOURCE)).unsqueeze(0)  # (1, 11, 12)
    return search_result(weights, lengths=[tokens.size(1)], source_lengths=[len(SOURCE)], tokens=tokens, grid=grid)


def alignment_error(result: SearchResult, batch: dict | None = None) -> AlignmentError:
    metric = AlignmentError()
    batch = {"alignments": [SPANS], "references": [REFERENCE]} if batch is None else batch
    metric.update(Decoded(batch, result, [], date_tokenizer()))
    return metric


def test_alignment_error_is_zero_when_each_character_attends_its_field():
    peaks = [8, 9, 10, 11, 1, 3, 6, 7, 0, 0]  # year digits on the year, month on "März", day on "5"
    metric = alignment_error(date_result(peaks))
    assert float(metric.compute()) == 0.0 and int(metric.count) == 8  # the hyphens are not counted


def test_alignment_error_is_hundred_percent_when_every_character_looks_elsewhere():
    metric = alignment_error(date_result([0, 0, 0, 0, 1, 8, 8, 2, 3, 11]))
    assert float(metric.compute()) == 100.0 and int(metric.count) == 8


def test_alignment_error_compares_only_correctly_decoded_characters():
    wrong_month = "2021-04-05"  # the month's second character differs from the reference: not counted
    metric = alignment_error(date_result([8, 9, 10, 11, 1, 3, 0, 7, 0, 0], hypothesis=wrong_month))
    assert int(metric.count) == 7 and float(metric.compute()) == 0.0


def test_alignment_error_skips_grids_rows_and_batches_without_alignments():
    peaks = [0] * 10
    assert int(alignment_error(date_result(peaks, grid=(3, 4))).count) == 0
    assert int(alignment_error(date_result(peaks), {"references": [REFERENCE]}).count) == 0
    assert int(alignment_error(date_result(peaks), {"alignments": [None], "references": [REFERENCE]}).count) == 0


def test_alignment_error_states_add_up_across_ranks():
    tokenizer = date_tokenizer()
    good, bad = date_result([8, 9, 10, 11, 1, 3, 6, 7, 0, 0]), date_result([0, 0, 0, 0, 1, 8, 8, 2, 3, 11])
    whole = search_result(
        torch.cat([good.weights, bad.weights]), lengths=[11, 11], source_lengths=[12, 12],
        tokens=torch.cat([good.tokens, bad.tokens]),
    )
    batch = {"alignments": [SPANS, SPANS], "references": [REFERENCE, REFERENCE]}
    shard_batch = {"alignments": [SPANS], "references": [REFERENCE]}
    shards = [(shard_batch, good), (shard_batch, bad)]
    full, merged = summed_state_value(AlignmentError, whole, shards, batch, tokenizer)
    assert full == merged == pytest.approx(50.0)
