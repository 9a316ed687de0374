"""The translation datamodule: batches, length filter, vocabulary reuse from a checkpoint."""

from __future__ import annotations

import datetime
import logging
from pathlib import Path

import pytest
import torch

from attend.data import (
    BucketBatchSampler,
    CharTokenizer,
    DatePairs,
    ParallelText,
    SentencePieceTokenizer,
    TranslationDataModule,
    WordTokenizer,
)

MULTI30K = Path(__file__).parent / "fixtures" / "multi30k"


def multi30k(**kwargs) -> TranslationDataModule:
    return TranslationDataModule(ParallelText(MULTI30K), WordTokenizer(), WordTokenizer(), **kwargs)


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
    tgt = dm.tgt_tokenizer
    for row in range(B):
        n_src, n_tgt = int(batch["src_lengths"][row]), int(batch["tgt_lengths"][row])
        assert (batch["src"][row, n_src:] == dm.src_tokenizer.pad_id).all()
        assert batch["tgt"][row, 0] == tgt.bos_id and batch["tgt"][row, n_tgt - 1] == tgt.eos_id
        assert (batch["tgt"][row, n_tgt:] == tgt.pad_id).all()
        assert dm.src_tokenizer.decode(batch["src"][row]) == batch["sources"][row]
        assert tgt.decode(batch["tgt"][row]) == batch["references"][row]
        assert (batch["sources"][row], batch["references"][row]) == dm.source.splits()["train"][int(batch["ids"][row])]
    assert isinstance(dm.train_dataloader().batch_sampler, BucketBatchSampler)


def test_setup_is_idempotent_and_vocabulary_comes_from_train() -> None:
    dm = multi30k()
    dm.setup("fit")
    train_dataset, vocab = dm.train_dataset, dm.src_tokenizer.vocab_size
    dm.setup("test")
    assert dm.train_dataset is train_dataset and dm.src_tokenizer.vocab_size == vocab
    giraffe = dm.test_dataset[0]  # "Eine Giraffe frisst Blätter." : giraffe is only in test
    assert giraffe["source"].startswith("Eine Giraffe") and dm.src_tokenizer.unk_id in giraffe["src"]
    assert dm.tgt_tokenizer.decode(giraffe["tgt"]) == "A <unk> eats <unk>."
    assert giraffe["reference"] == "A giraffe eats leaves."  # raw text for scoring


def test_eval_loaders_sorted_complete_and_unshuffled() -> None:
    dm = multi30k(batch_size=2)
    dm.setup("fit")
    for loader, dataset in ((dm.val_dataloader(), dm.val_dataset), (dm.test_dataloader(), dm.test_dataset)):
        loader.batch_sampler.set_epoch(3)  # no effect: never shuffled
        order = torch.cat([b["ids"] for b in loader])
        assert torch.equal(order, torch.cat([b["ids"] for b in loader]))
        assert sorted(order.tolist()) == list(range(len(dataset)))
        lengths = dataset.lengths()[order]
        assert torch.equal(lengths, lengths.sort().values)


def test_length_filter_drops_train_only_and_logs(caplog: pytest.LogCaptureFixture) -> None:
    dm = multi30k(max_source_len=6, max_target_len=7, max_skip_fraction=1.0)  # a deliberately tight limit
    with caplog.at_level(logging.INFO, logger="attend.data"):
        dm.setup("fit")
    kept = [(len(dm.src_tokenizer.encode(s)), len(dm.tgt_tokenizer.encode(t))) for s, t in dm.source.splits()["train"]]
    expected = sum(1 for s, t in kept if s > 6 or t > 7)
    assert 0 < expected < 30 and dm.dropped == expected and len(dm.train_dataset) == 30 - expected
    assert f"dropped {expected} of 30 training pairs" in caplog.text
    lengths = dm.train_dataset.side_lengths
    assert int(lengths("src").max()) <= 6 and int(lengths("tgt").max()) <= 7
    assert len(dm.val_dataset) == len(dm.test_dataset) == 5  # never filtered


def test_saved_tokenizers_are_reused_without_fitting(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    trained = TranslationDataModule(
        ParallelText(MULTI30K),
        SentencePieceTokenizer(vocab_size=80, hard_vocab_limit=False),
        WordTokenizer(),
        cache_dir=tmp_path,
    )
    trained.setup("fit")
    assert trained.src_tokenizer.cache_dir == str(tmp_path) and any(tmp_path.glob("spm-*.model"))
    checkpoint = {"TranslationDataModule": trained.state_dict()}  # what Lightning saves
    monkeypatch.setattr(SentencePieceTokenizer, "fit", lambda *a: pytest.fail("must not refit"))
    monkeypatch.setattr(WordTokenizer, "fit", lambda *a: pytest.fail("must not refit"))
    states = checkpoint["TranslationDataModule"]
    for dm in (
        TranslationDataModule.from_tokenizers(ParallelText(MULTI30K), states),
        TranslationDataModule(
            ParallelText(MULTI30K), WordTokenizer(), WordTokenizer(), tokenizer_states=states
        ),
    ):
        dm.setup("test")
        assert dm.src_tokenizer.state_dict() == trained.src_tokenizer.state_dict()
        assert source_ids(dm.test_dataset) == source_ids(trained.test_dataset)


def test_load_state_dict_after_setup_reencodes() -> None:
    dm = multi30k()
    dm.setup("fit")
    other = TranslationDataModule(ParallelText(MULTI30K), CharTokenizer(), CharTokenizer())
    other.setup("fit")
    dm.load_state_dict(other.state_dict())
    assert isinstance(dm.src_tokenizer, CharTokenizer)
    assert source_ids(dm.val_dataset) == source_ids(other.val_dataset)


def test_dates_with_char_tokenizers_and_max_tokens() -> None:
    source = DatePairs(n_train=300, n_val=20, n_test=20, seed=5)
    dm = TranslationDataModule(source, CharTokenizer(), CharTokenizer(), batch_size=64, max_tokens=300)
    dm.setup("fit")
    batches = list(dm.train_dataloader())
    assert sum(len(b["ids"]) for b in batches) == 300
    assert all(b["src"].numel() <= 300 and b["tgt"].numel() <= 300 for b in batches)
    batch = next(iter(dm.val_dataloader()))
    for reference, tgt in zip(batch["references"], batch["tgt"], strict=True):
        assert dm.tgt_tokenizer.decode(tgt) == datetime.date.fromisoformat(reference).isoformat()


def test_unbucketed_train_loader_and_pickling() -> None:
    import pickle

    dm = multi30k(bucket=False, batch_size=8)
    dm.setup("fit")
    assert sum(len(b["ids"]) for b in dm.train_dataloader()) == 30
    copy = pickle.loads(pickle.dumps(dm))  # spawned workers / DDP launchers pickle the datamodule
    assert len(copy.train_dataset) == 30


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
    states = torch.load(tmp_path / "last.ckpt", weights_only=True)["TranslationDataModule"]
    restored = TranslationDataModule.from_tokenizers(ParallelText(MULTI30K), states)
    assert restored.src_tokenizer.encode("Ein Hund.") == dm.src_tokenizer.encode("Ein Hund.")


def test_a_checkpoint_s_tokenizers_reuse_the_stores_training_prepared(monkeypatch, tmp_path: Path) -> None:
    """eval.py gives the data module the fitted tokenizers of a checkpoint: it opens the stores training wrote."""
    trained = multi30k(cache_dir=tmp_path)
    trained.setup("fit")
    folders = sorted((tmp_path / "store").iterdir())
    monkeypatch.setattr(WordTokenizer, "encode", lambda *a: pytest.fail("must not tokenize again"))
    monkeypatch.setattr(ParallelText, "iter_split", lambda *a: pytest.fail("must not read the corpus"))
    evaluating = TranslationDataModule.from_tokenizers(ParallelText(MULTI30K), trained.state_dict(), cache_dir=tmp_path)
    evaluating.setup("test")
    assert sorted((tmp_path / "store").iterdir()) == folders
    assert source_ids(evaluating.test_dataset) == source_ids(trained.test_dataset)
