"""The model learns: one small batch of real data is learned by heart (loss near zero, exact outputs)."""

from __future__ import annotations

import pytest
import torch
from hydra.utils import instantiate

from attend.builder import build_datamodule, build_model
from attend.config.compose import compose_config


def overfit_one_batch(overrides: list[str], tmp_path, steps: int, size: int = 16, lr: float = 3e-3):
    """A model and its config trained ``steps`` times on the first ``size`` training examples."""
    cfg = compose_config([*overrides, f"paths.cache_dir={tmp_path}"], output_dir=tmp_path)
    torch.manual_seed(0)
    datamodule = build_datamodule(cfg)
    datamodule.setup("fit")
    model = build_model(cfg, datamodule)
    batch = datamodule.example_batch(size, split="train")
    optimizer = instantiate(cfg.optim.optimizer)(model.parameters(), lr=lr)
    model.train()
    for _ in range(steps):
        loss = model.teacher_forced_loss(batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    return cfg, model, batch, loss.item()


def test_seq2seq_overfits_a_batch_of_dates(tmp_path):
    cfg, model, batch, loss = overfit_one_batch(
        [
            "data=dates", "data.source.n_train=500", "data.source.n_val=16", "data.source.n_test=16",
            "encoder.embedding_dim=32", "encoder.hidden_size=64", "encoder.dropout=0.0",
            "decoder.embedding_dim=32", "decoder.hidden_size=128", "decoder.dropout=0.0",
            "model.label_smoothing=0.0",
        ],
        tmp_path,
        steps=250,
    )
    assert loss < 0.02
    assert model.decode(batch, instantiate(cfg.model.val_search)).hypotheses == batch["references"]


@pytest.mark.slow  # a train.py run of about 10 s: the slow tier (make test-slow; CI runs both)
def test_captioner_overfits_a_few_shapes_images(tmp_path):
    cfg, model, batch, _ = overfit_one_batch(
        [
            "task=caption", "data=shapes", "encoder=cnn", "data.source.n_train=64", "data.source.n_val=8",
            "data.source.n_test=8", "encoder.dropout=0.0", "decoder.dropout=0.0",
        ],
        tmp_path,
        steps=150,
        size=8,
    )
    decoded = model.decode(batch, instantiate(cfg.model.val_search))
    assert decoded.hypotheses == [references[0] for references in batch["references"]]  # exact captions
    assert decoded.result.grid == (8, 8) and decoded.result.weights.shape[-1] == 64


@pytest.mark.slow
def test_recognizer_overfits_a_few_utterances(tmp_path):
    cfg, model, batch, _ = overfit_one_batch(
        [
            "experiment=espeak_numbers", "data.source.n_train=32", "data.source.n_val=4", "data.source.n_test=4",
            "data.modality.spec_augment=null", "encoder.dropout=0.0", "decoder.dropout=0.0",
            "model.label_smoothing=0.0",
            "encoder.hidden_size=64", "decoder.hidden_size=128", "decoder.embedding_dim=32",
        ],
        tmp_path,
        steps=100,
        size=4,
        lr=6e-3,
    )
    decoded = model.decode(batch, instantiate(cfg.model.val_search))
    assert decoded.hypotheses == batch["references"]  # exact transcripts
    assert decoded.result.source_lengths.tolist() == model.encoder.output_lengths(batch["src_lengths"]).tolist()
