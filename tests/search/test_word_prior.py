"""The word prior (attend.search.WordPrior): a unigram word model from a frequency list, read one character at a
time; its probabilities sum to one at every prefix, its state follows the beams, it makes beam search spell listed
words, the model binds it to the vocabulary, and a vocabulary or a list it cannot read is a one-line error."""

from __future__ import annotations

import math
import sys

import pytest
import torch

from attend.config.errors import ConfigError
from attend.data import CharTokenizer
from attend.memory import Memory
from attend.search import BeamSearch, WordPrior
from attend.search import word_prior as word_prior_module
from attend.search.word_prior import WordPrefixTable
from tests.helpers.tiny_recognizer import tiny_recognizer

LIST = {"cat": 3.0, "car": 1.0, "dog": 4.0, "x1": 5.0}  # "x1" has a character the outputs lack: left out


def test_each_prefix_shares_its_mass_among_the_characters_that_follow_and_the_end():
    table = WordPrefixTable(LIST, "acdgort")
    assert table.words == 3 and table.prefix_mass[""] == 8.0
    chars, ends = table.next_log_probs("ca", backoff=1e-9)
    assert math.exp(chars["t"]) == pytest.approx(0.75) and math.exp(chars["r"]) == pytest.approx(0.25)
    assert math.exp(ends) == pytest.approx(0.0, abs=1e-6)
    chars, ends = table.next_log_probs("cat", backoff=1e-9)
    assert math.exp(ends) == pytest.approx(1.0)
    chars, _ = table.next_log_probs("", backoff=1e-9)
    assert math.exp(chars["c"]) == pytest.approx(0.5) and math.exp(chars["d"]) == pytest.approx(0.5)
    for prefix in ("", "c", "ca", "cat", "do", None):  # a distribution at every prefix, the unlisted one too
        chars, ends = table.next_log_probs(prefix, backoff=0.1)
        assert sum(math.exp(p) for p in chars.values()) + math.exp(ends) == pytest.approx(1.0)
    assert all(p > 0 for p in table.background.values())


def read_instead(monkeypatch, frequencies: dict) -> None:
    """WordPrior reads ``frequencies`` instead of wordfreq's list (its per-process table cache emptied first)."""
    monkeypatch.setattr(word_prior_module, "load_word_frequencies", lambda language, wordlist: dict(frequencies))
    word_prior_module.prefix_table.cache_clear()


@pytest.fixture
def listed(monkeypatch):
    read_instead(monkeypatch, LIST)
    yield
    word_prior_module.prefix_table.cache_clear()  # the next test reads the real list


def char_tokenizer(text: str = "cat car dog") -> CharTokenizer:
    tokenizer = CharTokenizer()
    tokenizer.fit([text])
    return tokenizer


def test_the_state_follows_each_hypothesis_word_by_word(listed):
    tokenizer = char_tokenizer()
    prior = WordPrior(backoff=0.01)
    prior.bind(tokenizer)
    ids = {c: tokenizer.encode(c)[0] for c in "catrdog "}
    memory = Memory(values=torch.zeros(1, 3, 2), mask=torch.ones(1, 3, dtype=torch.bool))
    state = prior.start(None, memory, beam_size=2, bos_id=1, eos_id=2, pad_id=0)
    assert state.prefixes == ["", ""]
    gains = state.gains(torch.tensor([[ids["c"], ids["a"]], [ids["d"], 2]]))
    assert gains[0, 0] > gains[0, 1]  # a word starts with c, hardly with a
    assert math.exp(gains[1, 0]) == pytest.approx(0.99 * 0.5 + 0.01 * prior.table.background["d"])
    state.advance(torch.tensor([0, 1]), torch.tensor([ids["c"], ids["d"]]), None)
    assert state.prefixes == ["c", "d"]
    # the beams reorder: row 0 goes on from row 1's "d" with "o", row 1 from row 0's "c" with "a"
    state.advance(torch.tensor([1, 0]), torch.tensor([ids["o"], ids["a"]]), None)
    assert state.prefixes == ["do", "ca"]
    state.advance(torch.tensor([1, 1]), torch.tensor([ids["t"], ids["o"]]), None)
    assert state.prefixes == ["cat", None]  # "cao" starts no listed word
    chars, ends = prior.table.next_log_probs(None, prior.backoff)
    assert state.gains(torch.tensor([[ids["g"]], [ids["g"]]]))[1, 0] == pytest.approx(chars["g"])  # the background
    state.prefixes = ["ca", "cat"]
    state.advance(torch.tensor([1, 0]), torch.tensor([ids[" "], ids["t"]]), None)
    assert state.prefixes == ["", "cat"]  # a space starts the next word
    gains = state.gains(torch.tensor([[2], [2]]))  # the end token: "" is an empty word, "cat" a listed one
    assert gains[1, 0] > math.log(0.99) and gains[0, 0] < math.log(0.01)


def test_a_heavy_prior_makes_beam_search_spell_a_listed_word_and_the_model_binds_it(monkeypatch):
    read_instead(monkeypatch, {"cab": 1.0})
    search = BeamSearch(3, length_penalty=0.0, max_len_a=0.5, max_len_b=2, scorers={"word_prior": WordPrior()},
                        weights={"word_prior": 5.0})
    model, batch = tiny_recognizer(0.0, search)  # vocabulary of "abc cab"; the decoder untrained
    model.eval()
    texts = model.decode(batch, search).hypotheses  # decode binds the prior to the model's vocabulary
    assert texts == ["cab", "cab"]
    plain = BeamSearch(3, length_penalty=0.0, max_len_a=0.5, max_len_b=2)
    assert model.decode(batch, plain).hypotheses != texts
    word_prior_module.prefix_table.cache_clear()


def test_a_vocabulary_of_longer_pieces_is_refused_by_name(listed):
    class Pieces:
        vocab_size = 6

        def decode(self, ids):
            return "ab"

    with pytest.raises(ConfigError, match="one character per token.*CharTokenizer"):
        WordPrior().bind(Pieces())


def test_a_backoff_outside_0_1_and_a_missing_package_are_one_line_errors(monkeypatch):
    with pytest.raises(ConfigError, match="backoff is a share in"):
        WordPrior(backoff=0.0)
    monkeypatch.setitem(sys.modules, "wordfreq", None)  # import wordfreq raises ImportError
    word_prior_module.prefix_table.cache_clear()
    with pytest.raises(ConfigError, match="pip install wordfreq=="):
        WordPrior().bind(char_tokenizer())


def test_the_real_english_list_knows_how_words_are_spelt():
    """wordfreq's English list (installed with Attend): "million" and "september" are likelier than the ways a
    speller that writes what it hears spells them."""
    tokenizer = char_tokenizer("abcdefghijklmnopqrstuvwxyz' ")
    prior = WordPrior(language="en")
    prior.bind(tokenizer)

    def log_prob(word: str) -> float:
        total, prefix = 0.0, ""
        for char in word:
            chars, _ = prior.table.next_log_probs(prefix, prior.backoff)
            total += chars[char]
            prefix = prefix + char if prefix is not None and prior.table.prefix_mass.get(prefix + char) else None
        return total + prior.table.next_log_probs(prefix, prior.backoff)[1]

    assert prior.table.words > 100_000
    assert log_prob("million") > log_prob("milion") + 3
    assert log_prob("september") > log_prob("sectember") + 3
    with pytest.raises(ConfigError, match="no 'large' word list for language 'xx'"):
        WordPrior(language="xx").bind(tokenizer)


def test_a_bad_prior_setting_stops_train_py_at_start_up_not_after_training(tmp_path):
    """The language and the vocabulary are checked with the config, before any data or training."""
    from attend.config.checks import check_config
    from attend.config.compose import compose_config

    check_config(compose_config(["task=asr"], output_dir=tmp_path))  # the recipe's prior passes
    with pytest.raises(ConfigError, match="no 'large' word list for language 'xx'"):
        check_config(compose_config(["task=asr", "decoding.word_prior_language=xx"], output_dir=tmp_path))
    with pytest.raises(ConfigError, match="needs character outputs.*SentencePieceTokenizer"):
        check_config(compose_config(["decoding.word_prior_weight=0.3"], output_dir=tmp_path))  # task=mt
