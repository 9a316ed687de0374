"""Subword sampling for training (Kudo 2018, subword regularization; Provilkov et al. 2020, BPE-dropout): each time a
training pair is drawn, its source and target are segmented anew, at random, by their SentencePiece models, so the
model sees many segmentations of the same words. Validation and test keep the one best segmentation."""

from __future__ import annotations

from attend.config.errors import ConfigError
from attend.data.tokenizers.sentencepiece import SentencePieceTokenizer
from attend.data.tokenizers.tokenizer import Tokenizer


class SubwordSampler:
    """Samples segmentations with ``alpha``: for a unigram model the smoothing of the segmentation distribution
    (0.1-0.3 in Kudo 2018; smaller is more random), for a BPE model the probability of dropping each merge (0.1 in
    Provilkov et al. 2020). ``source`` is the source side's tokenizer, or None where the source is not text.
    A sampled sequence longer than ``max_len`` (the data's length limit) falls back to the best segmentation, so
    sampling never drops a pair that the limit kept."""

    def __init__(self, alpha: float, target: Tokenizer, source: Tokenizer | None = None,
                 max_source_len: int | None = None, max_target_len: int | None = None) -> None:
        if not 0.0 < alpha <= 1.0:
            raise ConfigError(f"data.subword_sampling must be in (0, 1] (or null: off), got {alpha}")
        for role, tokenizer in (("data.tokenizer", target), ("the source's tokenizer", source)):
            if tokenizer is not None and not isinstance(tokenizer, SentencePieceTokenizer):
                raise ConfigError(
                    f"data.subword_sampling samples SentencePiece segmentations, but {role} is a "
                    f"{type(tokenizer).__name__}: use attend.data.SentencePieceTokenizer or set "
                    "data.subword_sampling=null"
                )
        self.alpha = alpha
        self.target_tokenizer = target
        self.source_tokenizer = source
        self.max_source_len = max_source_len
        self.max_target_len = max_target_len

    def target(self, text: str, best: list[int]) -> list[int]:
        """A sampled segmentation of a target ``text`` whose best segmentation is ``best``."""
        return self._sample(self.target_tokenizer, text, best, self.max_target_len)

    def source(self, text: str, best: list[int]) -> list[int]:
        assert self.source_tokenizer is not None
        return self._sample(self.source_tokenizer, text, best, self.max_source_len)

    def _sample(self, tokenizer: Tokenizer, text: str, best: list[int], max_len: int | None) -> list[int]:
        assert isinstance(tokenizer, SentencePieceTokenizer)
        ids = tokenizer.encode_sampled(text, self.alpha)
        if not ids or (max_len is not None and len(ids) > max_len):
            return best
        return ids
