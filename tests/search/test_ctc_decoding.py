"""Joint CTC/attention decoding: the CTC prefix scorer against a brute-force sum over every alignment and against
ctc_loss, joint beam search (batched, exhaustive, peaked CTC, lambda 0 unchanged), best-path CTC decoding, the
start-up check and the CTC-only metric that validation and test log."""

from __future__ import annotations

import itertools
import math
from collections import defaultdict

import lightning as L
import pytest
import torch
import torch.nn.functional as F
from omegaconf import OmegaConf
from torch.utils.data import DataLoader

from attend.checkpoints.saved_config import search_overrides
from attend.config.checks import check_config
from attend.config.compose import compose_config
from attend.config.errors import ConfigError
from attend.decoders import BahdanauDecoder, LuongDecoder
from attend.metrics import CharErrorRate
from attend.search import BeamSearch, CTCPrefixScores, ctc_best_path
from tests.helpers.parts import decoder
from tests.helpers.paths import CONF
from tests.helpers.tiny_recognizer import tiny_recognizer
from tests.helpers.toy_search import SPECIAL, ToyDecoder, hashed, toy_memory

BLANK, EOS = SPECIAL["pad_id"], SPECIAL["eos_id"]  # CTC's blank is the pad id


def random_log_probs(batch: int, frames: int, vocab: int, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.log_softmax(1.5 * torch.randn(batch, frames, vocab, generator=generator), dim=-1)  # (B, S, V)


# -- the prefix scorer against every alignment ------------------------------------------------------------------
def collapse(path: tuple[int, ...]) -> tuple[int, ...]:
    """CTC's many-to-one map: repeats merged, then blanks dropped."""
    return tuple(symbol for symbol, _ in itertools.groupby(path) if symbol != BLANK)


def label_sequence_probs(log_probs: torch.Tensor, length: int) -> dict[tuple[int, ...], float]:
    """P(label sequence) of one utterance (log_probs (S, V)), summed over every path of its first ``length`` frames."""
    probs = log_probs[:length].double().exp().tolist()
    sums: dict[tuple[int, ...], float] = defaultdict(float)
    for path in itertools.product(range(len(probs[0])), repeat=length):
        sums[collapse(path)] += math.prod(probs[t][symbol] for t, symbol in enumerate(path))
    return sums


def expected_score(sums: dict, prefix: tuple[int, ...], candidate: int) -> float:
    """log P(prefix) for the end token, else the log prefix probability of prefix + candidate (-inf for 0)."""
    if candidate == EOS:
        total = sums.get(prefix, 0.0)
    else:
        extended = (*prefix, candidate)
        total = sum(p for sequence, p in sums.items() if sequence[: len(extended)] == extended)
    return math.log(total) if total > 0 else -math.inf


def assert_scores(scores: torch.Tensor, expected: list[list[float]]) -> None:
    expected_t = torch.tensor(expected, dtype=torch.float64)
    assert torch.equal(scores.isinf(), expected_t.isinf()) and not scores.isnan().any()
    finite = expected_t.isfinite()
    # float32 frame distributions sum to 1 within 1e-7, which prefix probabilities assume of the frames after
    torch.testing.assert_close(scores[finite], expected_t[finite], rtol=1e-6, atol=1e-6)


def test_prefix_and_whole_sequence_scores_sum_over_every_alignment():
    """Two utterances (5 frames, and 3 of 5 whose 2 padding frames hold log-probs that must not count), two beams
    each, over 5 symbols: prefix scores and end-token scores equal the brute-force sums over the 5^5 and 5^3
    paths, through a repeated label, beams swapped and a sentence dropped."""
    lengths = torch.tensor([5, 3])
    log_probs = random_log_probs(2, 5, 5)
    sums = [label_sequence_probs(log_probs[i], int(lengths[i])) for i in range(2)]
    scorer = CTCPrefixScores(log_probs, lengths, beam_size=2, blank=BLANK, eos=EOS)
    candidates = [EOS, 3, 4]
    prefixes = [(), (), (), ()]  # row n belongs to sentence n // 2
    sentences = [0, 0, 1, 1]
    moves = [  # (rows of the step's hypotheses, tokens, sentences kept)
        ([0, 1, 2, 3], [3, 4, 3, 4], None),
        ([1, 0, 2, 2], [3, 3, 3, 4], None),  # the beams of sentence 0 swap; (3, 3) repeats a label
        ([3, 2], [3, 4], [1]),  # sentence 0 leaves: (3, 4, 3) fits 3 frames, (3, 3, 4) does not
        None,
    ]
    for move in moves:
        scores = scorer.score(torch.tensor([candidates] * len(prefixes)))
        live = zip(prefixes, sentences, strict=True)
        assert_scores(scores, [[expected_score(sums[s], p, c) for c in candidates] for p, s in live])
        if move is None:
            break
        rows, tokens, keep = move
        scorer.advance(torch.tensor(rows), torch.tensor(tokens), None if keep is None else torch.tensor(keep))
        prefixes = [(*prefixes[r], token) for r, token in zip(rows, tokens, strict=True)]
        sentences = [sentences[r] for r in rows]
        # the live prefix's own probability is the score it was chosen with
        chosen = [[expected_score(sums[s], p[:-1], p[-1])] for p, s in zip(prefixes, sentences, strict=True)]
        assert_scores(scorer.prefix.unsqueeze(1), chosen)
    assert prefixes[1] == (3, 3, 4) and scores[1].isinf().all()  # 4 frames needed, 3 given: no path


def test_the_whole_sequence_score_is_minus_the_ctc_loss():
    lengths = torch.tensor([12, 9, 5])
    log_probs = random_log_probs(3, 12, 6, seed=1)
    targets = [[3, 3, 4, 5, 5], [5, 4], [4, 4]]
    scorer = CTCPrefixScores(log_probs, lengths, beam_size=1, blank=BLANK, eos=EOS)
    whole = torch.zeros(3, dtype=torch.float64)
    for step in range(max(map(len, targets)) + 1):
        following = [target[step] if step < len(target) else 3 for target in targets]
        scores = scorer.score(torch.tensor([[EOS, token] for token in following]))  # (3, 2)
        for row, target in enumerate(targets):
            if step == len(target):
                whole[row] = scores[row, 0]
        scorer.advance(torch.arange(3), torch.tensor(following))
    loss = F.ctc_loss(log_probs.transpose(0, 1), torch.tensor(sum(targets, [])), lengths,
                      torch.tensor([len(t) for t in targets]), blank=BLANK, reduction="none")
    torch.testing.assert_close(whole.float(), -loss, rtol=1e-5, atol=1e-5)


# -- joint beam search ---------------------------------------------------------------------------------------------
def test_ctc_weight_zero_is_the_plain_beam_search(memory):
    """lambda 0 takes the plain search's code path: the same tokens, scores and weights to the bit."""
    for cls in (BahdanauDecoder, LuongDecoder):
        dec = decoder(cls, seed=3)
        plain = BeamSearch(4, max_len_a=1.0, max_len_b=4)(dec, memory, **SPECIAL)
        log_probs = random_log_probs(3, 7, 30)
        for result in (
            BeamSearch(4, max_len_a=1.0, max_len_b=4, ctc_weight=0.0)(dec, memory, **SPECIAL),
            BeamSearch(4, max_len_a=1.0, max_len_b=4, ctc_weight=0.0)(dec, memory, **SPECIAL, ctc_log_probs=log_probs),
        ):
            assert torch.equal(result.tokens, plain.tokens) and torch.equal(result.scores, plain.scores)
            assert torch.equal(result.weights, plain.weights)


def test_joint_search_needs_the_ctc_log_probs_and_a_weight_in_range(memory):
    with pytest.raises(ValueError, match="no CTC head.*model.ctc_weight.*decoding.ctc_weight=0"):
        BeamSearch(3, ctc_weight=0.3)(decoder(), memory, **SPECIAL)
    with pytest.raises(ValueError, match="decoding.ctc_weight"):
        BeamSearch(3, ctc_weight=1.5)


@pytest.mark.parametrize("cls", [BahdanauDecoder, LuongDecoder])
def test_batched_joint_search_equals_one_sentence_at_a_time(memory, cls):
    """Sentences leave the batch and beams reorder; the CTC state follows: each sentence as if decoded alone.
    A beam of 3 scores 5 of the 30 tokens with CTC (the pre-beam)."""
    dec = decoder(cls, seed=1)
    log_probs = random_log_probs(3, 7, 30, seed=2)
    search = BeamSearch(beam_size=3, max_len_a=1.0, max_len_b=4, ctc_weight=0.5)
    batched = search(dec, memory, **SPECIAL, ctc_log_probs=log_probs)
    assert batched.scores.isfinite().all() and batched.sequences() != BeamSearch(3, max_len_a=1.0, max_len_b=4)(
        dec, memory, **SPECIAL).sequences()  # CTC changed something
    for i in range(3):
        row = torch.tensor([i])
        alone = search(dec, memory.index_select(row), **SPECIAL, ctc_log_probs=log_probs[row])
        assert alone.sequences()[0] == batched.sequences()[i]
        torch.testing.assert_close(alone.scores[0], batched.scores[i])


def joint_brute_force(dec, row, log_probs, frames, limit, alpha, weight):
    """The best (score, tokens) over every output of one sentence: ((1 - weight) log P_att(Y) + weight log P_ctc(Y))
    / lp(|Y|), P_ctc from ctc_loss, the end token forced at the length limit."""
    best = (-math.inf, None)

    def ctc(tokens):
        loss = F.ctc_loss(log_probs.unsqueeze(1), torch.tensor(tokens, dtype=torch.long).view(1, -1),
                          torch.tensor([frames]), torch.tensor([len(tokens)]), blank=BLANK, reduction="sum")
        return -loss.item()

    def walk(tokens, state, attention):
        nonlocal best
        logits, _, state = dec.step(torch.tensor([tokens[-1] if tokens else 1]), row, state)
        logp = torch.log_softmax(logits.float(), dim=-1)[0]
        length = len(tokens) + 1
        score = ((1 - weight) * (attention + logp[EOS].item()) + weight * ctc(tokens)) / ((5 + length) / 6) ** alpha
        if score > best[0]:
            best = (score, tokens)
        if length < limit:
            for token in (3, 4):
                walk(tokens + [token], state, attention + logp[token].item())

    walk([], dec.init_state(row), 0.0)
    return best


@pytest.mark.parametrize("weight", [0.3, 1.0])
def test_a_wide_joint_beam_finds_the_brute_force_optimum(weight):
    """A beam of 12 over the toy decoder's 5 tokens is exhaustive (its pre-beam of 18 holds every token): the
    joint search returns the best output by (1 - lambda) log P_att + lambda log P_ctc, whose score it returns."""
    dec, memory = ToyDecoder(hashed), toy_memory((6, 3, 1))
    log_probs = random_log_probs(3, 6, 5, seed=4)
    search = BeamSearch(12, length_penalty=0.6, max_len_a=0.5, max_len_b=2, ctc_weight=weight)
    result = search(dec, memory, **SPECIAL, ctc_log_probs=log_probs)
    for i, frames in enumerate(memory.lengths.tolist()):
        limit = int(0.5 * frames + 2)  # 5, 3, 2
        score, tokens = joint_brute_force(dec, memory.index_select(torch.tensor([i])), log_probs[i, :frames],
                                          frames, limit, 0.6, weight)
        assert result.sequences()[i] == tokens
        assert result.scores[i].item() == pytest.approx(score, abs=1e-4)


@pytest.mark.parametrize("weight", [0.9, 1.0])
def test_a_peaked_ctc_distribution_decides_the_output(weight):
    """CTC almost sure of 4 3 3 4 (a repeated label) over 10 frames: the joint search returns it, whatever the
    toy decoder prefers (it prefers something else)."""
    path = [4, 4, 0, 3, 0, 3, 3, 0, 4, 0]
    log_probs = torch.full((1, 10, 5), math.log(0.01))
    log_probs[0, torch.arange(10), torch.tensor(path)] = math.log(0.96)
    dec, memory = ToyDecoder(hashed), toy_memory((10,))
    plain = BeamSearch(4, max_len_a=1.0, max_len_b=2)(dec, memory, **SPECIAL)
    search = BeamSearch(4, max_len_a=1.0, max_len_b=2, ctc_weight=weight)
    joint = search(dec, memory, **SPECIAL, ctc_log_probs=log_probs)
    assert plain.sequences() != [[4, 3, 3, 4]] and joint.sequences() == [[4, 3, 3, 4]]
    assert joint.scores.isfinite().all()


def test_best_path_collapses_repeats_drops_blanks_and_reads_only_real_frames():
    frames = [[0, 3, 3, 0, 3, 4, 4, 2, 0], [4, 0, 4, 4, 3, 3, 3, 3, 3]]
    log_probs = torch.full((2, 9, 5), -5.0)
    for row, path in enumerate(frames):
        log_probs[row, torch.arange(9), torch.tensor(path)] = -0.1
    log_probs[0, 7, 4] = -1.0  # the end token's frame: 4 is the next best
    assert ctc_best_path(log_probs, torch.tensor([9, 4]), blank=BLANK, never=(1, 2)) == [[3, 3, 4], [4, 4]]
    assert ctc_best_path(log_probs, torch.tensor([9, 4]), blank=BLANK) == [[3, 3, 4, 2], [4, 4]]


# -- configuration -------------------------------------------------------------------------------------------------
def test_joint_decoding_without_a_ctc_head_is_refused_at_start_up(tmp_path):
    cfg = compose_config(["task=asr", "model.ctc_weight=0"], output_dir=tmp_path)
    with pytest.raises(ConfigError, match=r"decoding.ctc_weight=0.3 .*model.ctc_weight=0 .*decoding.ctc_weight=0"):
        check_config(cfg)
    for fine in (["search=greedy"], ["decoding.ctc_weight=0"]):  # greedy search reads no CTC head
        check_config(compose_config(["task=asr", "model.ctc_weight=0", *fine], output_dir=tmp_path))
    check_config(compose_config(["task=asr"], output_dir=tmp_path))
    check_config(compose_config(["experiment=las", "data.source.root=/nonexistent"], output_dir=tmp_path))
    with pytest.raises(ConfigError, match=r"decoding.ctc_weight is a mixing weight in \[0, 1\], got 1.5"):
        check_config(compose_config(["task=asr", "decoding.ctc_weight=1.5"], output_dir=tmp_path))
    beam = compose_config(["task=asr"], output_dir=tmp_path).model.test_search
    assert (beam.ctc_weight, beam.beam_size) == (0.3, 10)
    assert compose_config(["task=mt"], output_dir=tmp_path).model.test_search.ctc_weight == 0.0


def test_eval_and_predict_set_the_ctc_weight_of_the_checkpoints_search():
    for name in ("eval", "predict"):
        options = OmegaConf.load(CONF / f"{name}.yaml")
        assert options.decoding.ctc_weight is None and search_overrides(options) == {}  # null: the checkpoint's own
        options.decoding.ctc_weight = 0.0
        assert search_overrides(options) == {"model.test_search.ctc_weight": 0.0}


# -- the model: joint test search and the CTC-only metric -----------------------------------------------------------
def test_validation_and_test_log_the_ctc_heads_own_error_rate():
    search = BeamSearch(2, max_len_a=0.5, max_len_b=2, ctc_weight=0.5)
    model, batch = tiny_recognizer(0.3, search)
    loader = DataLoader([batch], batch_size=None, collate_fn=lambda batch: batch)  # the one batch as it is
    trainer = L.Trainer(accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False)
    validated = trainer.validate(model, dataloaders=loader, verbose=False)[0]
    tested = trainer.test(model, dataloaders=loader, verbose=False)[0]
    assert {"val/cer", "val/cer_ctc"} <= set(validated) and {"test/cer", "test/cer_ctc"} <= set(tested)
    model.eval()
    expected = CharErrorRate()
    expected.update(model.decode_ctc(batch))
    assert tested["test/cer_ctc"] == pytest.approx(float(expected.compute()))
    assert model.decode_ctc(batch).result is None and len(model.test_predictions) == 2
    # the joint test search got the head's log-probabilities: its output is that of the search given them
    memory = model.encode(batch)
    tok = model.target_tokenizer
    direct = search(model.decoder, memory, tok.bos_id, tok.eos_id, tok.pad_id,
                    ctc_log_probs=model.ctc_log_probs(memory))
    assert model.decode(batch, search).result.sequences() == direct.sequences()

    plain, _ = tiny_recognizer(0.0, BeamSearch(2, max_len_a=0.5, max_len_b=2))
    assert not plain.ctc_metrics
    validated = trainer.validate(plain, dataloaders=loader, verbose=False)[0]
    assert "val/cer" in validated and "val/cer_ctc" not in validated


@pytest.mark.parametrize("options, message", [
    ({"ctc_weight": 0.3}, "decoding.ctc_weight apply to beam search, and this checkpoint tests with greedy search: "
                          "add decoding.beam_size"),
    ({"ctc_weight": 0.3, "beam_size": 4, "_model": 0.0}, "this checkpoint's model has none"),
    ({"ctc_weight": 1.5}, "decoding.ctc_weight=1.5 is out of range"),
    ({"beam_size": 0}, "decoding.beam_size=0 is out of range"),
    ({"max_len_a": -1}, "decoding.max_len_a=-1 is out of range"),
])
def test_eval_and_predict_options_that_cannot_decode_this_checkpoint_are_refused(options, message):
    """Checked at start-up against the checkpoint's saved config, before any data or model is built (they failed
    deep inside the search)."""
    options = dict(options)
    saved = {"model": {"ctc_weight": options.pop("_model", 0.5),
                       "test_search": {"_target_": "attend.search.GreedySearch"}}}
    with pytest.raises(ConfigError, match=message):
        search_overrides(OmegaConf.create({"decoding": options}), saved)
    beam = {"model": {"ctc_weight": 0.5, "test_search": {"_target_": "attend.search.BeamSearch"}}}
    given = OmegaConf.create({"decoding": {"ctc_weight": 0.3}})
    assert search_overrides(given, beam) == {"model.test_search.ctc_weight": 0.3}
