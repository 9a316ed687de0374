"""Wiring: data module, encoder, attention, decoder and LightningModule from one config (the checks of a config
before it is wired are ``attend.config.checks``)."""

from __future__ import annotations

import copy
import os
from collections.abc import Sequence

import lightning as L
import torch
from hydra.utils import get_class, instantiate
from omegaconf import DictConfig, OmegaConf, open_dict
from torch import nn

from attend.model import Seq2Seq

# options of the model section that the run harness reads, not the LightningModule: the checkpoint a fresh run
# starts from and which of its parts (attend.checkpoints.init_from)
HARNESS_MODEL_OPTIONS = ("init_from", "init_parts")


def build_datamodule(cfg: DictConfig, tokenizer_states: dict | None = None) -> L.LightningDataModule:
    """The task's data module; with ``tokenizer_states`` (from a checkpoint) it reuses that vocabulary."""
    datamodule = instantiate(cfg.data)
    if tokenizer_states is not None:
        datamodule.load_state_dict(tokenizer_states)
    return datamodule


def build_encoder(cfg: DictConfig, datamodule: L.LightningDataModule) -> nn.Module:
    """The encoder with what the data gives it: its sizes (``encoder_kwargs()``) and, for an encoder that reads
    any modality (its class's ``modality`` is None: the Transformer), which one the data module gives."""
    options = dict(datamodule.encoder_kwargs())
    if get_class(cfg.encoder._target_).modality is None:
        options["modality"] = datamodule.modality
    return instantiate(cfg.encoder, **options)


def share_frozen_features(encoder: nn.Module, datamodule: L.LightningDataModule,
                          device: torch.device | None = None) -> None:
    """An encoder with a frozen part (``frozen_features()``: the pretrained image encoders, Whisper) lets a data module
    that can store features (``use_frozen_features``: captions, speech) compute that part once instead of every step,
    on ``device`` (the run's accelerator, ``extraction_device``; None: where the encoder is). Call it once the encoder
    holds the weights it will run with: the store is keyed by a hash of them."""
    frozen = getattr(encoder, "frozen_features", None)
    use = getattr(datamodule, "use_frozen_features", None)
    extractor = frozen(device) if frozen is not None else None
    if extractor is not None and use is not None:
        use(extractor)


def extraction_device(accelerator: str | None, devices=None) -> torch.device:
    """Where a run's frozen features are computed: the GPU the run trains on (as Lightning picks it: ``accelerator``
    gpu, cuda or auto with CUDA there; the first of a ``devices`` list, else this process's LOCAL_RANK under DDP or
    SLURM), else the CPU. The model itself is still built on the CPU; Lightning moves it when the fit starts."""
    if str(accelerator) not in ("gpu", "cuda", "auto") or not torch.cuda.is_available():
        return torch.device("cpu")
    if isinstance(devices, Sequence) and not isinstance(devices, str):  # a list, or OmegaConf's ListConfig
        return torch.device("cuda", int(devices[0]))
    return torch.device("cuda", int(os.environ.get("LOCAL_RANK", os.environ.get("SLURM_LOCALID", 0))))


def run_extraction_device(cfg: DictConfig) -> torch.device:
    """``extraction_device`` of a training config's ``trainer`` section."""
    trainer = cfg.get("trainer") or {}
    return extraction_device(trainer.get("accelerator"), trainer.get("devices"))


def build_model(cfg: DictConfig, datamodule: L.LightningDataModule, share_features: bool = True) -> Seq2Seq:
    """Encoder from ``cfg.encoder``, attention partial from ``cfg.attention``, decoder around both. ``share_features``:
    the encoder's frozen part is given to the data once the model is built (``Seq2Seq`` initialises every module not
    marked pretrained); false for a caller that loads other weights first and then calls ``share_frozen_features``."""
    tokenizers = datamodule.tokenizers()
    target = tokenizers["target"]
    encoder = build_encoder(cfg, datamodule)
    decoder = instantiate(
        cfg.decoder,
        vocab_size=target.vocab_size,
        pad_id=target.pad_id,
        memory_dim=encoder.output_dim,
        attention=instantiate(cfg.attention),
    )
    model = instantiate(model_config(cfg), encoder=encoder, decoder=decoder, tokenizers=tokenizers,
                        corpora=getattr(datamodule, "corpora", []))
    # set after instantiation: Hydra would try to instantiate the _target_ entries inside it
    model.run_config = OmegaConf.to_container(cfg, resolve=True)
    if share_features:
        share_frozen_features(model.encoder, datamodule, run_extraction_device(cfg))
    return model


def model_config(cfg: DictConfig) -> DictConfig:
    """``cfg.model`` without the options the harness reads (HARNESS_MODEL_OPTIONS), which Seq2Seq does not take;
    a shallow copy, so its interpolations (``${optim.optimizer}``) still resolve against the whole config."""
    node = copy.copy(cfg.model)
    with open_dict(node):
        for name in HARNESS_MODEL_OPTIONS:
            node.pop(name, None)
    return node


def instantiate_all(group: DictConfig | None) -> list:
    """Instantiate every entry of a dict-of-configs group (callbacks, loggers); ``null`` entries are off."""
    if not group:
        return []
    return [instantiate(entry) for entry in group.values() if entry is not None and "_target_" in entry]
