"""SentencePiece subword tokenizer, trained once per (settings, training text) and cached."""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import sentencepiece as spm

from attend.data.cache import CorruptCacheError, load_or_rebuild, write_bytes_atomic
from attend.data.tokenizers.tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID, Tokenizer

log = logging.getLogger("attend.data")


class SentencePieceTokenizer(Tokenizer):
    """Unigram (or bpe/char/word) SentencePiece model with pad/bos/eos/unk = 0/1/2/3.

    ``fit`` trains into ``cache_dir`` as ``spm-<model_type>-<vocab_size>-<hash>.model`` (hash of the
    settings and the training text) and reuses that file when it exists and is whole (a truncated or
    damaged one is retrained, with a warning: ``read_complete_model``); without ``cache_dir`` it
    trains in memory. The trained model's bytes live in ``state_dict()``, so a checkpoint needs no
    cache. The model depends on ``num_threads`` (SentencePiece is deterministic per thread count),
    so it is a setting, not a machine property. ``hard_vocab_limit=False`` lets tiny corpora get
    fewer pieces than ``vocab_size`` instead of failing. ``normalization="identity"`` keeps every
    character (decode(encode(text)) == text, so hypotheses compare with raw references);
    ``"nmt_nfkc"`` is SentencePiece's own default. ``fit`` reads ``texts`` as a stream, twice (hash, then
    training; any re-iterable will do); SentencePiece keeps the sentences it trains on in memory, so a corpus
    of more than ``max_sentences`` sentences trains on a seeded sample of that many (SentencePiece's
    ``input_sentence_size``), which bounds the memory and time of fitting on corpora of millions of lines.
    """

    def __init__(
        self,
        vocab_size: int = 8000,
        model_type: str = "unigram",
        lowercase: bool = False,
        cache_dir: str | os.PathLike | None = None,
        character_coverage: float = 1.0,
        num_threads: int = 4,
        hard_vocab_limit: bool = True,
        normalization: str = "identity",
        max_sentences: int = 300_000,
    ) -> None:
        super().__init__(lowercase=lowercase)
        self.max_sentences = max_sentences
        self.requested_vocab_size = vocab_size
        self.model_type = model_type
        self.cache_dir = None if cache_dir is None else str(cache_dir)
        self.character_coverage = character_coverage
        self.num_threads = num_threads
        self.hard_vocab_limit = hard_vocab_limit
        self.normalization = normalization
        self.model_proto: bytes | None = None
        self.processor: spm.SentencePieceProcessor | None = None
        self.model_path: Path | None = None  # the cache file the last fit trained or reused

    # fitting ---------------------------------------------------------------------------------
    def _trainer_args(self) -> dict[str, Any]:
        return {
            "vocab_size": self.requested_vocab_size,
            "model_type": self.model_type,
            "character_coverage": self.character_coverage,
            "num_threads": self.num_threads,
            "hard_vocab_limit": self.hard_vocab_limit,
            "normalization_rule_name": self.normalization,
            "pad_id": PAD_ID,
            "bos_id": BOS_ID,
            "eos_id": EOS_ID,
            "unk_id": UNK_ID,
        }

    def cache_key(self, texts: Iterable[str]) -> str:
        """Hash of the trainer settings and the (normalized) training text."""
        return self._hash_and_count(texts)[0]

    def _hash_and_count(self, texts: Iterable[str]) -> tuple[str, int]:
        """The cache key, and how many sentences ``texts`` holds (one pass)."""
        digest = hashlib.sha256(json.dumps({**self._trainer_args(), "lowercase": self.lowercase}).encode())
        count = 0
        for text in texts:
            digest.update(self.normalize(text).encode("utf-8"))
            digest.update(b"\n")
            count += 1
        if count > self.max_sentences:  # a sampled model differs from one trained on every sentence
            digest.update(f"sample {self.max_sentences}".encode())
        return digest.hexdigest()[:16], count

    def fit(self, texts: Iterable[str]) -> None:
        key, count = self._hash_and_count(texts)
        if self.cache_dir is None:
            self._load_proto(self._train(texts, count))
            return
        path = Path(self.cache_dir) / f"spm-{self.model_type}-{self.requested_vocab_size}-{key}.model"

        def train() -> bytes:
            log.info("training SentencePiece model %s", path)
            return self._train(texts, count)

        proto = load_or_rebuild(path, read_complete_model, train, write_bytes_atomic)
        self.model_path = path
        self._load_proto(proto)

    def _train(self, texts: Iterable[str], count: int) -> bytes:
        sentences = (t for t in (self.normalize(t).strip() for t in texts) if t)
        first = next(sentences, None)
        if first is None:
            raise ValueError("cannot train SentencePiece on an empty training text")
        sample = {}
        if count > self.max_sentences:
            sample = {"input_sentence_size": self.max_sentences, "shuffle_input_sentence": True}
            log.info("training SentencePiece on a sample of %d of %d sentences (max_sentences)",
                     self.max_sentences, count)
        model = io.BytesIO()
        spm.SentencePieceTrainer.train(
            sentence_iterator=itertools.chain([first], sentences), model_writer=model, minloglevel=2,
            **self._trainer_args(), **sample,
        )
        return model.getvalue()

    def _load_proto(self, proto: bytes) -> None:
        self.processor = spm.SentencePieceProcessor(model_proto=proto)
        self.model_proto = proto

    # encoding --------------------------------------------------------------------------------
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

    def _decode_clean(self, ids: list[int]) -> str:
        return self._sp.decode(ids)

    def _pieces(self, ids: list[int]) -> list[str]:
        return [self._sp.id_to_piece(i) for i in ids]

    # state -----------------------------------------------------------------------------------
    def settings(self) -> dict[str, Any]:
        return {
            **super().settings(),
            "vocab_size": self.requested_vocab_size,
            "model_type": self.model_type,
            "character_coverage": self.character_coverage,
            "num_threads": self.num_threads,
            "hard_vocab_limit": self.hard_vocab_limit,
            "normalization": self.normalization,
            "max_sentences": self.max_sentences,
        }

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


def read_complete_model(path: Path) -> bytes:
    """A cached model's bytes, checked whole. SentencePiece writes its pieces, then trainer_spec (field 2) and
    normalizer_spec (field 3) last; a file cut inside a field fails to parse, but one cut between two top-level
    fields loads (with fewer pieces, or default specs), so both specs must be there. CorruptCacheError if not."""
    proto = path.read_bytes()
    fields = top_level_fields(proto)
    if not {2, 3} <= set(fields):
        raise CorruptCacheError(f"{len(proto)} bytes, without the trainer and normalizer specs written last")
    spm.SentencePieceProcessor(model_proto=proto)  # RuntimeError where a field inside does not parse
    return proto


def top_level_fields(message: bytes) -> list[int]:
    """The field numbers of a serialized protobuf message's top-level fields; CorruptCacheError where it is cut."""
    fields, i = [], 0

    def varint() -> int:
        nonlocal i
        value = shift = 0
        while True:
            if i >= len(message) or shift > 63:
                raise CorruptCacheError(f"a protobuf varint cut at byte {i}")
            byte = message[i]
            i += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                return value

    while i < len(message):
        tag = varint()
        wire = tag & 7
        if wire == 0:
            varint()
        elif wire in (1, 5):
            i += 8 if wire == 1 else 4
        elif wire == 2:
            length = varint()  # before the +=, which would read i first
            i += length
        else:
            raise CorruptCacheError(f"protobuf wire type {wire} at byte {i}")
        if i > len(message):
            raise CorruptCacheError(f"a protobuf field cut at byte {len(message)}")
        fields.append(tag >> 3)
    return fields
