"""The tokenizer interface shared by the word, character and SentencePiece tokenizers."""

from __future__ import annotations

import base64
import importlib
import itertools
import json
from collections.abc import Iterable, Sequence
from typing import Any

import torch

from attend.data.bad_samples import DataError

PAD_ID, BOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3
SPECIAL_TOKENS = ("<pad>", "<s>", "</s>", "<unk>")

Ids = Sequence[int] | torch.Tensor


class Tokenizer:
    """Text <-> ids with pad=0, bos=1, eos=2, unk=3; fitted on training text only. Subclasses write ``fit``,
    ``encode``, ``_decode_clean`` (ids without specials -> text), ``_pieces`` (ids -> readable strings),
    ``vocab_size`` and ``settings``/``_fitted_state``."""

    pad_id, bos_id, eos_id, unk_id = PAD_ID, BOS_ID, EOS_ID, UNK_ID

    def __init__(self, lowercase: bool = False) -> None:
        self.lowercase = lowercase

    @property
    def vocab_size(self) -> int:
        """Number of ids, the four specials included."""
        raise NotImplementedError

    @property
    def is_fitted(self) -> bool:
        """Whether ``fit`` (or ``load_state_dict``) has built a vocabulary."""
        raise NotImplementedError

    def normalize(self, text: str) -> str:
        """The text as the vocabulary sees it (lower-cased when configured)."""
        return text.lower() if self.lowercase else text

    def fit(self, texts: Iterable[str]) -> None:
        """Build the vocabulary from training texts (read as a stream; a re-iterable when read more than once)."""
        raise NotImplementedError

    def encode(self, text: str) -> list[int]:
        """Ids of ``text`` without bos/eos."""
        raise NotImplementedError

    def decode(self, ids: Ids) -> str:
        """Text of ``ids``: stops at eos, skips pad and bos."""
        return self._decode_clean(self.strip_specials(ids))

    def tokens(self, ids: Ids) -> list[str]:
        """One readable piece per id (specials as ``<s>``, ``</s>``...): a sequence as a person reads it."""
        return [SPECIAL_TOKENS[i] if i < UNK_ID else self._pieces([i])[0] for i in _as_list(ids)]

    def strip_specials(self, ids: Ids) -> list[int]:
        """Ids up to the first eos, without pad and bos."""
        return [i for i in itertools.takewhile(lambda id_: id_ != EOS_ID, _as_list(ids)) if i not in (PAD_ID, BOS_ID)]

    def _decode_clean(self, ids: list[int]) -> str:
        raise NotImplementedError

    def _pieces(self, ids: list[int]) -> list[str]:
        raise NotImplementedError

    def settings(self) -> dict[str, Any]:
        """Constructor arguments (plain python types)."""
        return {"lowercase": self.lowercase}

    def _fitted_state(self) -> dict[str, Any]:
        """What ``fit`` learned (plain python types and bytes)."""
        raise NotImplementedError

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what ``fit`` learned from ``state_dict()['fitted']``."""
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to rebuild this fitted tokenizer; picklable by ``torch.save``."""
        if not self.is_fitted:
            raise RuntimeError(f"{type(self).__name__} is not fitted: call fit(train_texts) first")
        cls = type(self)
        return {"class": f"{cls.__module__}.{cls.__qualname__}", "settings": self.settings(),
                "fitted": self._fitted_state()}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.settings().items())
        size = self.vocab_size if self.is_fitted else "unfitted"
        return f"{type(self).__name__}({args}; vocab_size={size})"


def tokenizer_from_state(state: dict[str, Any]) -> Tokenizer:
    """Rebuild any fitted tokenizer from its ``state_dict()`` (no files or cache needed)."""
    module_name, _, class_name = state["class"].rpartition(".")
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except ModuleNotFoundError:  # a checkpoint from before the tokenizers moved to attend.data.tokenizers
        cls = getattr(importlib.import_module("attend.data"), class_name)
    if not (isinstance(cls, type) and issubclass(cls, Tokenizer)):
        raise TypeError(f"{state['class']} is not a Tokenizer")
    tokenizer = cls(**state["settings"])
    tokenizer.load_state_dict(state["fitted"])
    return tokenizer


def _as_list(ids: Ids | Iterable[int]) -> list[int]:
    if isinstance(ids, torch.Tensor):
        return [int(i) for i in ids.reshape(-1).tolist()]
    return [int(i) for i in ids]


BYTES = "bytes_base64"  # how bytes (a SentencePiece model) are written in JSON: {"bytes_base64": "..."}


class UntrustedStateError(DataError):
    """Saved tokenizer states that are not plain JSON data (an old pickle, or a tampered file)."""


def states_to_text(states: Any) -> str:
    """Tokenizer states as JSON text (bytes as base64), for an example store's JSON manifest: data that runs no code
    when read back."""
    return json.dumps(states, default=_bytes_to_json)


def states_from_text(text: str, where: str = "a cached example store") -> Any:
    """The states ``states_to_text`` wrote; UntrustedStateError for anything that is not such JSON."""
    try:
        return json.loads(text, object_hook=_json_to_bytes)
    except (TypeError, ValueError) as error:
        raise UntrustedStateError(
            f"{where} holds tokenizer states that are not JSON data (written by an older Attend, or altered): they "
            "are not read, since reading them could run code. Delete that store folder under data.cache_dir (it is "
            "prepared again) and run again") from error


def _bytes_to_json(value: Any) -> dict[str, str]:
    if isinstance(value, bytes | bytearray):
        return {BYTES: base64.b64encode(bytes(value)).decode("ascii")}
    raise TypeError(f"tokenizer states hold a {type(value).__name__}, which JSON cannot write")


def _json_to_bytes(value: dict[str, Any]) -> Any:
    return base64.b64decode(value[BYTES], validate=True) if set(value) == {BYTES} else value
