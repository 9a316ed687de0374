"""SentencePiece subword tokenizer, trained in memory on the training text (its model travels in state_dict())."""

from __future__ import annotations

import io
import logging
import random
from collections.abc import Iterable
from typing import Any

import sentencepiece as spm

from attend.data.tokenizers.tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID, Tokenizer

log = logging.getLogger("attend.data")
# SentencePiece's own sampling (input_sentence_size) differs from one process to the next whatever seed it is
# given, so the sample is drawn here, with this seed: the same texts and settings give the same model
SAMPLE_SEED = 0


class SentencePieceTokenizer(Tokenizer):
    """Unigram (or bpe/char/word) SentencePiece model with pad/bos/eos/unk = 0/1/2/3.

    ``fit`` trains in memory (the model's bytes live in ``state_dict()``) on a seeded sample of at most
    ``max_sentences`` sentences. ``num_threads`` is a setting: the model depends on it. ``hard_vocab_limit=False``
    lets tiny corpora get fewer pieces; ``normalization="identity"`` keeps decode(encode(text)) == text."""

    def __init__(self, vocab_size: int = 8000, model_type: str = "unigram", lowercase: bool = False,
                 character_coverage: float = 1.0, num_threads: int = 4, hard_vocab_limit: bool = True,
                 normalization: str = "identity", max_sentences: int = 300_000) -> None:
        super().__init__(lowercase=lowercase)
        self.max_sentences = max_sentences
        self.requested_vocab_size = vocab_size
        self.model_type = model_type
        self.character_coverage = character_coverage
        self.num_threads = num_threads
        self.hard_vocab_limit = hard_vocab_limit
        self.normalization = normalization
        self.model_proto: bytes | None = None
        self.processor: spm.SentencePieceProcessor | None = None

    def _trainer_args(self) -> dict[str, Any]:
        return {"vocab_size": self.requested_vocab_size, "model_type": self.model_type,
                "character_coverage": self.character_coverage, "num_threads": self.num_threads,
                "hard_vocab_limit": self.hard_vocab_limit, "normalization_rule_name": self.normalization,
                "pad_id": PAD_ID, "bos_id": BOS_ID, "eos_id": EOS_ID, "unk_id": UNK_ID}

    def fit(self, texts: Iterable[str]) -> None:
        """Train on ``texts`` (read once, as a stream), in memory."""
        sentences = (t for t in (self.normalize(t).strip() for t in texts) if t)
        sample, count = reservoir_sample(sentences, self.max_sentences, SAMPLE_SEED)
        if not sample:
            raise ValueError("cannot train SentencePiece on an empty training text")
        if count > len(sample):
            log.info("training SentencePiece on a seeded sample of %d of %d sentences (max_sentences)",
                     len(sample), count)
        model = io.BytesIO()
        spm.SentencePieceTrainer.train(sentence_iterator=iter(sample), model_writer=model, minloglevel=2,
                                       **self._trainer_args())
        self._load_proto(model.getvalue())

    def _load_proto(self, proto: bytes) -> None:
        self.processor = spm.SentencePieceProcessor(model_proto=proto)
        self.model_proto = proto

    @property
    def _sp(self) -> spm.SentencePieceProcessor:
        if self.processor is None:
            raise RuntimeError("SentencePieceTokenizer is not fitted: call fit(train_texts) first")
        return self.processor

    @property
    def is_fitted(self) -> bool:
        return self.processor is not None

    @property
    def vocab_size(self) -> int:
        return self._sp.get_piece_size()

    def encode(self, text: str) -> list[int]:
        return self._sp.encode(self.normalize(text), out_type=int)

    def encode_sampled(self, text: str, alpha: float) -> list[int]:
        """Ids of one segmentation of ``text`` drawn at random (SentencePiece's ``enable_sampling``: subword
        regularization for a unigram model, BPE-dropout for a BPE model; ``alpha`` as they define it)."""
        return self._sp.encode(self.normalize(text), out_type=int, enable_sampling=True, alpha=alpha, nbest_size=-1)

    def _decode_clean(self, ids: list[int]) -> str:
        return self._sp.decode(ids)

    def _pieces(self, ids: list[int]) -> list[str]:
        return [self._sp.id_to_piece(i) for i in ids]

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), "vocab_size": self.requested_vocab_size, "model_type": self.model_type,
                "character_coverage": self.character_coverage, "num_threads": self.num_threads,
                "hard_vocab_limit": self.hard_vocab_limit, "normalization": self.normalization,
                "max_sentences": self.max_sentences}

    def _fitted_state(self) -> dict[str, Any]:
        assert self.model_proto is not None
        return {"model_proto": self.model_proto}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._load_proto(bytes(state["model_proto"]))

    def __getstate__(self) -> dict[str, Any]:
        """Pickle without the (unpicklable) processor; it is rebuilt from the model bytes."""
        return {**self.__dict__, "processor": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if self.model_proto is not None:
            self._load_proto(self.model_proto)


def reservoir_sample(items: Iterable[str], size: int, seed: int) -> tuple[list[str], int]:
    """A uniform sample of ``size`` items of a stream of unknown length, drawn in one pass with ``seed``
    (Algorithm R), and how many items the stream held; every item, in order, when it held no more."""
    rng = random.Random(seed)
    sample: list[str] = []
    count = 0
    for count, item in enumerate(items, start=1):
        if len(sample) < size:
            sample.append(item)
        elif (slot := rng.randrange(count)) < size:
            sample[slot] = item
    return sample, count
