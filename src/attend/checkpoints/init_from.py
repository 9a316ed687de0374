"""Fine-tuning: a fresh run starts from another run's weights (``model.init_from``, the parts in
``model.init_parts``), as ESPnet's --init_param, fairseq's --finetune-from-model and JoeyNMT's load_model do.

Every tensor of the chosen parts whose name and shape match is copied. The tensors whose rows are tokens (the
embeddings, the output layer, the CTC head) are copied by token instead: the new run fits its own tokenizers on
its own data, so the two vocabularies may differ, and a row goes to the same token string in the new vocabulary;
new tokens keep their fresh initialisation. What does not match stays initialised and is reported, in one log line.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import torch
from omegaconf import DictConfig, ListConfig, OmegaConf
from torch import Tensor, nn

from attend.checkpoints.saved_run import SavedRun, datamodule_state, load_run
from attend.config.errors import ConfigError
from attend.data.tokenizers.tokenizer import Tokenizer, tokenizer_from_state
from attend.ranks import is_global_zero

log = logging.getLogger(__name__)

# the model's parts by their parameter names' first component; all = every one of them
PARTS = ("encoder", "decoder", "ctc_head")
# the modules whose rows (first dimension) are tokens, by their attribute name, and the vocabulary a part reads:
# the encoder's embedding is the source tokenizer's, the decoder's and the CTC head's are the target's
TOKEN_LAYERS = ("embedding", "output_layer", "ctc_head")
ROLES = {"encoder": "source", "decoder": "target", "ctc_head": "target"}
# the data module's state keys (attend.checkpoints.saved_run.datamodule_state) of the model's tokenizers
STATE_KEYS = {"source": "src_tokenizer", "target": "tgt_tokenizer"}
LISTED = 5  # names a log line lists before it counts the rest


def init_from_config(model: nn.Module, cfg: DictConfig) -> None:
    """Load ``cfg.model.init_from`` into a freshly built model; nothing when it is null. A resumed run
    (``ckpt_path``) restores every weight from its own checkpoint: the resume wins, init_from is skipped."""
    path = cfg.model.get("init_from")
    if path is None:
        return
    if cfg.get("ckpt_path"):
        log.info("model.init_from=%s skipped: the run resumes from ckpt_path=%s", path, cfg.ckpt_path)
        return
    parts = cfg.model.get("init_parts", "all")
    init_from(model, path, list(parts) if isinstance(parts, ListConfig | list) else [parts])


def init_from(model: nn.Module, path: str | Path, parts: list[str]) -> None:
    """Copy the checkpoint's tensors of ``parts`` (encoder, decoder, all) into ``model`` and log what was loaded;
    a ConfigError naming the path when the file cannot be read or nothing of it fits."""
    run = read(path)
    chosen = PARTS if "all" in parts else tuple(part for part in PARTS if part in parts)
    report = copy_matching(model, run.checkpoint["state_dict"], chosen, shared_vocabularies(model, run.checkpoint))
    if not report.loaded:
        ran = ", ".join(f"{group} {OmegaConf.select(run.config, f'{group}._target_', default='?')}"
                        for group in ("encoder", "decoder"))
        raise ConfigError(
            f"model.init_from={str(path)!r}: no tensor of the {', '.join(chosen)} matches this model in name and "
            f"shape (that run had {ran}): fine-tune the same encoder and decoder, with the same sizes, or choose "
            f"other model.init_parts"
        )
    if is_global_zero():  # every DDP rank loads; one says so
        log.info("init_from %s: %s", path, report.summary())


def read(path: str | Path) -> SavedRun:
    """The saved run; a missing file or one Attend did not write is a one-line error that names the option."""
    if not Path(path).is_file():
        raise ConfigError(
            f"model.init_from={str(path)!r} does not exist: point it at a checkpoint of an earlier run, e.g. "
            f"model.init_from=outputs/<task>/runs/<time>/checkpoints/best.ckpt"
        )
    try:
        run = load_run(path)
    except ConfigError as error:  # said on one line, whatever the reader's message (a pickle's can be several)
        said = " ".join(str(error).split())
        raise ConfigError(f"model.init_from: {said}; point it at a best.ckpt or last.ckpt of an Attend run") from None
    if not isinstance(run.checkpoint.get("state_dict"), dict):
        raise ConfigError(f"model.init_from: {str(path)!r} holds no weights (state_dict); point it at a best.ckpt")
    return run


@dataclass(frozen=True)
class SharedTokens:
    """How the rows of one vocabulary's tensors move: row ``old_ids[k]`` of the checkpoint's to row
    ``new_ids[k]`` of the model's, for every token both vocabularies hold."""

    role: str
    new_ids: Tensor
    old_ids: Tensor
    new_size: int
    old_size: int
    identical: bool  # the same tokens with the same ids: the tensors are copied whole

    @classmethod
    def between(cls, role: str, new: Tokenizer, old: Tokenizer) -> SharedTokens:
        new_index, old_index = token_index(new), token_index(old)
        pairs = sorted((i, old_index[token]) for token, i in new_index.items() if token in old_index)
        ids = torch.tensor(pairs, dtype=torch.long).reshape(-1, 2)  # (shared, 2): [new id, old id]
        new_ids, old_ids = ids[:, 0], ids[:, 1]
        identical = new.vocab_size == old.vocab_size == len(pairs) and bool((new_ids == old_ids).all())
        return cls(role, new_ids, old_ids, new.vocab_size, old.vocab_size, identical)


def token_index(tokenizer: Tokenizer) -> dict[str, int]:
    """Token string -> id over the whole vocabulary (the specials included); a string two ids share is left out."""
    pieces = tokenizer.tokens(range(tokenizer.vocab_size))
    counts = Counter(pieces)
    return {piece: i for i, piece in enumerate(pieces) if counts[piece] == 1}


def shared_vocabularies(model: nn.Module, checkpoint: dict) -> dict[str, SharedTokens]:
    """Per role (source, target) that both the model and the checkpoint have a tokenizer for, their shared tokens."""
    states = datamodule_state(checkpoint)
    tokenizers = getattr(model, "tokenizers", {}) or {}
    return {
        role: SharedTokens.between(role, tokenizers[role], tokenizer_from_state(states[key]))
        for role, key in STATE_KEYS.items()
        if role in tokenizers and key in states
    }


@dataclass
class Report:
    """What was copied: per part the tensors loaded and their number, those copied by token, what was not."""

    total: Counter = field(default_factory=Counter)
    loaded_by_part: Counter = field(default_factory=Counter)
    by_tokens: Counter = field(default_factory=Counter)
    vocabularies: dict[str, SharedTokens] = field(default_factory=dict)
    roles_by_part: dict[str, str] = field(default_factory=dict)
    not_loaded: list[str] = field(default_factory=list)
    unused: list[str] = field(default_factory=list)

    @property
    def loaded(self) -> int:
        return sum(self.loaded_by_part.values())

    def summary(self) -> str:
        """``encoder 9/9 tensors, decoder 14/14 (3 by shared tokens: 13 of 15 target tokens); not loaded: ...``"""
        parts = []
        for part, total in self.total.items():
            text = f"{part} {self.loaded_by_part[part]}/{total}" + (" tensors" if not parts else "")
            if self.by_tokens[part]:
                shared = self.vocabularies[self.roles_by_part[part]]
                text += (f" ({self.by_tokens[part]} by shared tokens: {len(shared.new_ids)} of {shared.new_size} "
                         f"{shared.role} tokens)")
            parts.append(text)
        text = ", ".join(parts)
        if self.not_loaded:
            text += f"; not loaded (checkpoint vs model shape): {listed(self.not_loaded)}"
        if self.unused:
            text += f"; not in this model: {listed(self.unused)}"
        return text


def listed(names: list[str]) -> str:
    more = len(names) - LISTED
    return ", ".join(names[:LISTED]) + (f" and {more} more" if more > 0 else "")


@torch.no_grad()
def copy_matching(model: nn.Module, saved: dict[str, Tensor], parts: tuple[str, ...],
                  vocabularies: dict[str, SharedTokens]) -> Report:
    """Copy every tensor of ``parts`` (parameters and buffers) whose name and shape match, the token layers by
    token; the model's other tensors keep their values."""
    report = Report(vocabularies=vocabularies)
    own = model.state_dict()  # views of the parameters and buffers: copying into them sets the model's
    for name, tensor in own.items():
        part = name.split(".", 1)[0]
        if part not in parts:
            continue
        report.total[part] += 1
        old = saved.get(name)
        if old is None:
            report.not_loaded.append(f"{name} (not in the checkpoint)")
            continue
        shared = token_rows(name, tensor, old, vocabularies)
        if shared is not None:
            tensor[shared.new_ids] = old[shared.old_ids].to(tensor.dtype)
            report.by_tokens[part] += 1
            report.roles_by_part[part] = shared.role
        elif old.shape == tensor.shape:
            tensor.copy_(old)
        else:
            report.not_loaded.append(f"{name} ({shape(old)} vs {shape(tensor)})")
            continue
        report.loaded_by_part[part] += 1
    report.unused = [name for name in saved if name.split(".", 1)[0] in parts and name not in own]
    return report


def token_rows(name: str, tensor: Tensor, old: Tensor, vocabularies: dict[str, SharedTokens]) -> SharedTokens | None:
    """The shared tokens when ``name`` is a token layer's tensor whose rows are each side's vocabulary (and whose
    other dimensions agree) and the two vocabularies differ; None: copied whole or not at all, by shape."""
    module = name.rsplit(".", 1)[0].rsplit(".", 1)[-1]
    shared = vocabularies.get(ROLES.get(name.split(".", 1)[0], ""))
    if module not in TOKEN_LAYERS or shared is None or shared.identical or tensor.dim() == 0:
        return None
    if tensor.shape[0] != shared.new_size or old.shape[0] != shared.old_size or tensor.shape[1:] != old.shape[1:]:
        return None
    return shared


def shape(tensor: Tensor) -> str:
    return "x".join(map(str, tensor.shape)) or "scalar"
