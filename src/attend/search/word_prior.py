"""A spelling prior for character outputs: a unigram word language model from a word-frequency list (the PyPI
package wordfreq), read one character at a time, as a named scorer of beam search (shallow fusion).

A character speller trained on a few hours of speech hears words well and spells them as they sound ("milion",
"sectember"). The prior knows how hundreds of thousands of words are spelt and how common each is: the
probability of the next character given the current word's prefix is the share of the frequency mass of the
words with that prefix that go on with it, and a word ends (a space, or the end of the output) with the share of
the word itself. A prefix no listed word starts with reads a background distribution (the characters' own
frequencies in the list) until the word ends, so unknown names and new words stay possible, at a cost.
"""

from __future__ import annotations

import functools
import math
from collections import defaultdict

import torch
from torch import Tensor

from attend.config.errors import ConfigError
from attend.data.tokenizers.tokenizer import SPECIAL_TOKENS
from attend.memory import Memory
from attend.search.scorer import Scorer, ScorerState

WORDFREQ_VERSION = "3.1.1"  # pinned in pyproject.toml: the list (and so the figures chosen with it) is this one's


def load_word_frequencies(language: str, wordlist: str = "large") -> dict[str, float]:
    """wordfreq's word -> frequency table of ``language`` (its ``get_frequency_dict``), or a one-line error."""
    try:
        import wordfreq
    except ImportError as error:
        raise ConfigError(f"the word prior needs the PyPI package wordfreq=={WORDFREQ_VERSION}: "
                          f"pip install wordfreq=={WORDFREQ_VERSION} (make install does)") from error
    try:
        return wordfreq.get_frequency_dict(language, wordlist)
    except (LookupError, ValueError) as error:  # wordfreq raises LookupError for a language it has no list of
        raise ConfigError(f"wordfreq has no {wordlist!r} word list for language {language!r} ({error}); "
                          "set the word prior's language to one it lists, e.g. en or fr") from error


class WordPrefixTable:
    """The frequency mass of every prefix of the listed words, and each word's own: log P(next character | the
    word's prefix) for a word made of ``alphabet``. Words with other characters (digits, dots) are left out."""

    def __init__(self, frequencies: dict[str, float], alphabet: str, max_words: int | None = None) -> None:
        self.alphabet = alphabet
        self.prefix_mass: dict[str, float] = defaultdict(float)  # "" holds the total
        self.word_mass: dict[str, float] = {}
        allowed = set(alphabet)
        ranked = sorted(frequencies.items(), key=lambda item: -item[1])
        kept = [(word, freq) for word, freq in ranked if word and set(word) <= allowed and freq > 0][:max_words]
        if not kept:
            raise ConfigError(f"no listed word is spelt with the output characters {alphabet!r}: the word prior needs "
                              "a character vocabulary of the list's language")
        letters: dict[str, float] = defaultdict(float)
        for word, freq in kept:
            self.word_mass[word] = self.word_mass.get(word, 0.0) + freq
            for end in range(len(word) + 1):
                self.prefix_mass[word[:end]] += freq
            for char in word:
                letters[char] += freq
        self.words = len(self.word_mass)
        # the background: a character by its frequency in running text, a word's end as often as words end; an output
        # character no kept word has (a digit) as often as the rarest that one has
        rarest = min(letters.values())
        letters = {char: letters.get(char, rarest) for char in alphabet}
        total = sum(letters.values()) + self.prefix_mass[""]
        self.background = {char: letters[char] / total for char in alphabet}
        self.background_end = self.prefix_mass[""] / total

    def next_log_probs(self, prefix: str | None, backoff: float) -> tuple[dict[str, float], float]:
        """log P(c | prefix) for every character c of the alphabet and log P(the word ends | prefix). ``prefix``
        None: the word has left the list, the background alone; otherwise (1 - backoff) x the list's share +
        backoff x the background."""
        if prefix is None:
            return {c: math.log(p) for c, p in self.background.items()}, math.log(self.background_end)
        mass = self.prefix_mass[prefix]
        chars = {}
        for char, p in self.background.items():
            listed = self.prefix_mass.get(prefix + char, 0.0) / mass
            mixed = (1.0 - backoff) * listed + backoff * p
            chars[char] = math.log(mixed)
        ends = (1.0 - backoff) * self.word_mass.get(prefix, 0.0) / mass + backoff * self.background_end
        return chars, math.log(ends)


@functools.lru_cache(maxsize=4)
def prefix_table(language: str, wordlist: str, alphabet: str, max_words: int | None) -> WordPrefixTable:
    """One table per list and alphabet in a process (about 2 s to build for English): every search, every run of a
    sweep in one process, shares it."""
    return WordPrefixTable(load_word_frequencies(language, wordlist), alphabet, max_words)


class WordPrior(Scorer):
    """The word prior as a beam-search scorer, by its name in ``search.scorers`` (weight in ``search.weights``):
    the gain of a character is log P(character | the current word's prefix); of a space or the end token, log P(the
    word ends | its prefix) (a space right after a space, or at the start, ends an empty word: only the backoff's
    share). An output character no listed word has (a digit) is as rare as the rarest listed one.

    ``language`` and ``wordlist`` pick wordfreq's list; ``max_words`` keeps the most frequent (null: all);
    ``backoff`` is the background's share in every prefix the list knows. ``bind`` maps the target vocabulary's ids
    to characters before the first search (``Seq2Seq.decode`` does it): the prior needs one character a token.
    """

    partial = False  # every token: a row of gains is looked up once per prefix (with CTC the pre-beam only)

    def __init__(self, language: str = "en", wordlist: str = "large", max_words: int | None = None,
                 backoff: float = 0.01) -> None:
        if not 0.0 < backoff < 1.0:
            raise ConfigError(f"the word prior's backoff is a share in (0, 1), got {backoff}: with 0 a word the list "
                              "lacks could never be written")
        self.language, self.wordlist, self.max_words, self.backoff = language, wordlist, max_words, backoff
        self.table: WordPrefixTable | None = None
        self.characters: list[str | None] | None = None  # by token id: its character, None for specials
        self._bound_to = None  # the tokenizer read last: decode binds before every batch, this reads it once

    def bind(self, tokenizer) -> None:
        """Read the target vocabulary: one character per id (the specials None). Once per tokenizer."""
        if tokenizer is self._bound_to:
            return
        ids = range(tokenizer.vocab_size)
        # a lone space decodes to "" where a tokenizer strips its output: read that as the space
        characters: list[str | None] = [None if i < len(SPECIAL_TOKENS) else tokenizer.decode([i]) or " " for i in ids]
        longer = [c for c in characters if c is not None and len(c) != 1]
        if longer:
            raise ConfigError(f"the word prior reads one character per token, and this vocabulary has pieces like "
                              f"{longer[:3]}: use it with a character tokenizer (data.tokenizer: CharTokenizer)")
        alphabet = "".join(sorted({c for c in characters if c is not None and c != " "}))
        self.table = prefix_table(self.language, self.wordlist, alphabet, self.max_words)
        self.characters, self._bound_to = characters, tokenizer

    def start(self, given, memory: Memory, beam_size: int, bos_id: int, eos_id: int, pad_id: int) -> ScorerState:
        if self.table is None or self.characters is None:
            raise RuntimeError("WordPrior.bind(tokenizer) must run before a search: Seq2Seq.decode does it")
        rows = memory.values.size(0) * beam_size
        return WordPriorState(self, [""] * rows, eos_id)


class WordPriorState(ScorerState):
    """Each live hypothesis's current word: its prefix so far ("" at a word's start), None once it left the list."""

    def __init__(self, prior: WordPrior, prefixes: list[str | None], eos_id: int) -> None:
        self.prior, self.prefixes, self.eos_id = prior, prefixes, eos_id
        self._cache: dict[str | None, Tensor] = {}

    def _row(self, prefix: str | None) -> Tensor:
        """The gains (V,) of every token after ``prefix``, cached for the search."""
        if prefix not in self._cache:
            chars, ends = self.prior.table.next_log_probs(prefix, self.prior.backoff)
            gains = []
            for token, char in enumerate(self.prior.characters):
                if token == self.eos_id or char == " ":
                    gains.append(ends)  # an empty word (a second space) only by the backoff
                elif char is None:
                    gains.append(-math.inf)  # pad, start, unk: the decoder's log-probabilities forbid them anyway
                else:
                    gains.append(chars[char])
            self._cache[prefix] = torch.tensor(gains)
        return self._cache[prefix]

    def gains(self, candidates: Tensor) -> Tensor:
        rows = torch.stack([self._row(prefix) for prefix in self.prefixes])  # (N, V)
        return rows.to(candidates.device).gather(1, candidates)

    def advance(self, rows: Tensor, tokens: Tensor, keep: Tensor | None) -> None:
        table, characters = self.prior.table, self.prior.characters
        moved = []
        for row, token in zip(rows.tolist(), tokens.tolist(), strict=True):
            prefix, char = self.prefixes[row], characters[token]
            if char is None or char == " ":
                moved.append("")  # a word ended (or the output did): the next word starts
            elif prefix is None:
                moved.append(None)
            else:
                longer = prefix + char
                moved.append(longer if table.prefix_mass.get(longer, 0.0) > 0 else None)
        self.prefixes = moved
