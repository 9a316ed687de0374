"""The text plug-in through the data module: batches, tokenizers from a checkpoint, dates and their alignments."""

from __future__ import annotations

import datetime
import logging
import pickle
from pathlib import Path

import pytest
import torch

from attend.data import (
    BucketBatchSampler,
    CharTokenizer,
    DataModule,
    DatePairs,
    ParallelText,
    SentencePieceTokenizer,
    TextModality,
    WordTokenizer,
)
from attend.data.bad_samples import Skipped
from tests.helpers.datamodules import text_datamodule
from tests.helpers.paths import MULTI30K


def multi30k(**options) -> DataModule:
    return text_datamodule(ParallelText(MULTI30K), **options)


def pairs(source, split: str) -> list[tuple]:
    """The records of a split as the source gives them, without the bad items (what ``ids`` number)."""
    return [item for item in source.splits()[split] if not isinstance(item, Skipped)]


def source_ids(dataset) -> list[list[int]]:
    return [dataset[i]["src"] for i in range(len(dataset))]


def test_batches_are_padded_dicts() -> None:
    dm = multi30k(batch_size=4)
    dm.setup("fit")
    batch = next(iter(dm.train_dataloader()))
    B = 4
    assert batch["src"].shape[0] == batch["tgt"].shape[0] == B
    for key in ("src", "src_lengths", "tgt", "tgt_lengths", "ids"):
        assert batch[key].dtype == torch.long
    assert (
        batch["src_lengths"].max() == batch["src"].shape[1]
        and batch["tgt_lengths"].max() == batch["tgt"].shape[1]
    )
    src, tgt = dm.plugin.tokenizer, dm.tokenizer
    assert dm.tokenizers() == {"source": src, "target": tgt} and dm.modality == "text"
    assert dm.encoder_kwargs() == {"vocab_size": src.vocab_size, "pad_id": src.pad_id}
    train = pairs(dm.source, "train")
    for row in range(B):
        n_src, n_tgt = int(batch["src_lengths"][row]), int(batch["tgt_lengths"][row])
        assert (batch["src"][row, n_src:] == src.pad_id).all()
        assert batch["tgt"][row, 0] == tgt.bos_id and batch["tgt"][row, n_tgt - 1] == tgt.eos_id
        assert (batch["tgt"][row, n_tgt:] == tgt.pad_id).all()
        assert src.decode(batch["src"][row]) == batch["sources"][row]
        assert tgt.decode(batch["tgt"][row]) == batch["references"][row]
        assert (batch["sources"][row], batch["references"][row]) == train[int(batch["ids"][row])]
    assert batch["num_target_tokens"] == int((batch["tgt_lengths"] - 1).sum())
    assert dm.readable_source(batch, 0) == src.tokens(batch["src"][0, : int(batch["src_lengths"][0])].tolist())
    assert isinstance(dm.train_dataloader().batch_sampler, BucketBatchSampler)


def test_vocabularies_come_from_the_training_split() -> None:
    dm = multi30k()
    dm.setup("fit")
    giraffe = dm.datasets["test"][0]  # "Eine Giraffe frisst Blätter." : giraffe is only in test
    assert giraffe["source"].startswith("Eine Giraffe") and dm.plugin.tokenizer.unk_id in giraffe["src"]
    assert dm.tokenizer.decode(giraffe["tgt"]) == "A <unk> eats <unk>."
    assert giraffe["reference"] == "A giraffe eats leaves."  # raw text for scoring


def test_max_source_len_counts_source_tokens_and_max_target_len_target_tokens(caplog) -> None:
    # word tokens for the source, characters for the target: each limit is in its own tokenizer's units
    dm = multi30k(tgt_tokenizer=CharTokenizer(), max_source_len=6, max_target_len=30, max_skip_fraction=1.0)
    with caplog.at_level(logging.INFO, logger="attend.data"):
        dm.setup("fit")
    src, tgt = dm.plugin.tokenizer, dm.tokenizer
    sizes = [(len(src.encode(s)), len(tgt.encode(t))) for s, t in pairs(dm.source, "train")]
    expected = sum(1 for s, t in sizes if s > 6 or t > 30)
    assert 0 < sum(s > 6 for s, _ in sizes) < expected < 30  # both limits leave some out
    assert dm.dropped == expected and len(dm.datasets["train"]) == 30 - expected
    assert f"skipped {expected} of 30 pairs of the train split" in caplog.text
    kept = [dm.datasets["train"][i] for i in range(len(dm.datasets["train"]))]
    assert max(len(e["src"]) for e in kept) <= 6 and max(len(e["tgt"]) for e in kept) <= 30
    assert len(dm.datasets["val"]) == len(dm.datasets["test"]) == 5  # never filtered


def test_saved_tokenizers_are_reused_without_fitting(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    trained = multi30k(src_tokenizer=SentencePieceTokenizer(vocab_size=80, hard_vocab_limit=False),
                       cache_dir=tmp_path / "trained")
    trained.setup("fit")
    states = trained.state_dict()  # what Lightning saves
    assert set(states) == {"src_tokenizer", "tgt_tokenizer"}
    monkeypatch.setattr(SentencePieceTokenizer, "fit", lambda *a: pytest.fail("must not refit"))
    monkeypatch.setattr(WordTokenizer, "fit", lambda *a: pytest.fail("must not refit"))
    dm = multi30k(cache_dir=tmp_path / "other")  # other tokenizers configured: the checkpoint's are used
    dm.load_state_dict(states)
    dm.setup("test")
    assert isinstance(dm.plugin.tokenizer, SentencePieceTokenizer)
    assert dm.plugin.tokenizer.state_dict() == trained.plugin.tokenizer.state_dict()
    assert dm.state_dict() == states
    assert source_ids(dm.datasets["test"]) == source_ids(trained.datasets["test"])


def test_load_state_dict_after_setup_reencodes() -> None:
    dm = multi30k()
    dm.setup("fit")
    other = multi30k(src_tokenizer=CharTokenizer(), tgt_tokenizer=CharTokenizer())
    other.setup("fit")
    dm.load_state_dict(other.state_dict())
    assert isinstance(dm.plugin.tokenizer, CharTokenizer) and isinstance(dm.tokenizer, CharTokenizer)
    assert source_ids(dm.datasets["val"]) == source_ids(other.datasets["val"])
    batch = next(iter(dm.train_dataloader()))
    assert [dm.tokenizer.decode(t) for t in batch["tgt"]] == batch["references"]


def test_dates_with_char_tokenizers_and_max_tokens() -> None:
    source = DatePairs(n_train=300, n_val=20, n_test=20, seed=5)
    dm = text_datamodule(source, CharTokenizer(), CharTokenizer(), batch_size=64, max_tokens=300)
    dm.setup("fit")
    batches = list(dm.train_dataloader())
    assert sum(len(b["ids"]) for b in batches) == 300
    assert all(b["src"].numel() <= 300 and b["tgt"].numel() <= 300 for b in batches)
    batch = next(iter(dm.val_dataloader()))
    for reference, tgt in zip(batch["references"], batch["tgt"], strict=True):
        assert dm.tokenizer.decode(tgt) == datetime.date.fromisoformat(reference).isoformat()


def test_evaluation_batches_of_dates_carry_the_alignments() -> None:
    source = DatePairs(n_train=40, n_val=6, n_test=6, seed=3)
    dm = text_datamodule(source, CharTokenizer(), CharTokenizer(), batch_size=8)
    dm.setup("fit")
    assert "alignments" not in next(iter(dm.train_dataloader()))  # training needs none
    splits = source.splits()
    for split, loader in (("val", dm.val_dataloader()), ("test", dm.test_dataloader())):
        for batch in loader:
            assert len(batch["alignments"]) == len(batch["ids"])
            for row, index in enumerate(batch["ids"].tolist()):
                written, iso, alignment = splits[split][index]
                assert (batch["sources"][row], batch["references"][row]) == (written, iso)
                spans = batch["alignments"][row]
                assert len(spans) == len(iso)  # one span (or None) for each ISO character
                assert spans == [None if span is None else tuple(span) for span in alignment]
                assert all(0 <= start < end <= len(written) for start, end in filter(None, spans))


def test_unbucketed_train_loader_and_pickling() -> None:
    dm = multi30k(bucket=False, batch_size=8)
    dm.setup("fit")
    loader = dm.train_dataloader()
    assert not isinstance(loader.batch_sampler, BucketBatchSampler)
    assert sorted(i for b in loader for i in b["ids"].tolist()) == list(range(30))
    copy = pickle.loads(pickle.dumps(dm))  # spawned workers / DDP launchers pickle the datamodule
    assert len(copy.datasets["train"]) == 30
    assert source_ids(copy.datasets["val"]) == source_ids(dm.datasets["val"])


@pytest.mark.filterwarnings("ignore:You passed in a `val_dataloader`")
def test_lightning_trainer_reshuffles_each_epoch(tmp_path: Path) -> None:
    import lightning as L

    class Recorder(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.weight = torch.nn.Parameter(torch.zeros(1))
            self.seen: list[list[int]] = []

        def training_step(self, batch, batch_idx):
            if batch_idx == 0:
                self.seen.append([])
            self.seen[-1] += batch["ids"].tolist()
            return (self.weight * batch["src"].float().mean()).sum()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    dm = multi30k(batch_size=4)
    model = Recorder()
    trainer = L.Trainer(
        max_epochs=2,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=0,
        default_root_dir=tmp_path,
    )
    trainer.fit(model, datamodule=dm)
    assert len(model.seen) == 2 and sorted(model.seen[0]) == sorted(model.seen[1]) == list(range(30))
    assert model.seen[0] != model.seen[1]  # Lightning's set_epoch reached the batch sampler
    assert trainer.train_dataloader.batch_sampler.epoch == 1
    trainer.save_checkpoint(tmp_path / "last.ckpt")
    states = torch.load(tmp_path / "last.ckpt", weights_only=True)["DataModule"]
    restored = multi30k()
    restored.load_state_dict(states)
    assert restored.plugin.tokenizer.encode("Ein Hund.") == dm.plugin.tokenizer.encode("Ein Hund.")
    assert restored.tokenizer.encode("A dog.") == dm.tokenizer.encode("A dog.")


def test_a_checkpoint_s_tokenizers_reuse_the_stores_training_prepared(monkeypatch, tmp_path: Path) -> None:
    """eval.py gives the data module the fitted tokenizers of a checkpoint (source and target): it opens the stores
    training wrote, reading no corpus line and tokenizing nothing."""
    trained = multi30k(cache_dir=tmp_path)
    trained.setup("fit")
    folders = sorted((tmp_path / "store").iterdir())
    monkeypatch.setattr(WordTokenizer, "encode", lambda *a: pytest.fail("must not tokenize again"))
    monkeypatch.setattr(ParallelText, "iter_split", lambda *a: pytest.fail("must not read the corpus"))
    evaluating = DataModule(ParallelText(MULTI30K), TextModality(WordTokenizer()), WordTokenizer(),
                            cache_dir=tmp_path, prepare_workers=0)
    evaluating.load_state_dict(trained.state_dict())
    evaluating.setup("test")
    assert sorted((tmp_path / "store").iterdir()) == folders
    assert source_ids(evaluating.datasets["test"]) == source_ids(trained.datasets["test"])
