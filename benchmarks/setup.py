"""The benchmark's model configuration, data and batches."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch
from omegaconf import DictConfig

from attend.builder import build_datamodule
from attend.config.checks import check_config
from attend.config.compose import compose_config
from attend.data.bucketing import BucketBatchSampler
from attend.data.dataset import StoreDataset

# the fixed benchmark model on the default Ding German->English data: 8k SentencePiece units each side,
# embeddings 256, a bidirectional GRU encoder of 2 x 256, a GRU decoder of 512, additive attention; the
# decoder flow is the MT task's default (Luong without input feeding: the RNN runs over all steps at once)
MODEL_OVERRIDES = [
    "data.modality.tokenizer.vocab_size=8000",
    "data.tokenizer.vocab_size=8000",
    "data.max_source_len=50",
    "data.max_target_len=50",
    "data.loader.batch_size=64",
    "encoder.embedding_dim=256",
    "encoder.hidden_size=256",
    "encoder.num_layers=1",
    "encoder.bidirectional=true",
    "encoder.rnn_type=gru",
    "decoder=luong",
    "decoder.input_feeding=false",
    "decoder.embedding_dim=256",
    "decoder.hidden_size=512",
    "decoder.tie_embeddings=false",  # the naive model it is compared with has an output layer of its own
    "decoder.rnn_type=gru",
    "attention=additive",
    "trainer.max_time=null",
]
# --quick: the generated dates data (no corpus, no tokenizer training) and a tiny model, for tests
QUICK_OVERRIDES = [
    "data=dates",
    "data.source.n_train=3000",
    "data.source.n_val=100",
    "data.source.n_test=20",
    "data.loader.batch_size=16",
    "encoder.embedding_dim=16",
    "encoder.hidden_size=16",
    "encoder.num_layers=1",
    "encoder.bidirectional=true",
    "encoder.rnn_type=gru",
    "decoder=luong",
    "decoder.input_feeding=false",
    "decoder.embedding_dim=16",
    "decoder.hidden_size=32",
    "decoder.tie_embeddings=false",  # the naive model it is compared with has an output layer of its own
    "decoder.rnn_type=gru",
    "attention=additive",
    "attention.hidden_dim=16",
    "trainer.max_time=null",
]
# the sizes compared for each attention type: query and value sizes of the MT model and of task=asr
ATTENTION_SIZES = {
    "mt": {"batch": 64, "steps": 30, "frames": 30, "query_dim": 512, "value_dim": 512},
    "speech": {"batch": 32, "steps": 100, "frames": 500, "query_dim": 256, "value_dim": 256},
}
QUICK_ATTENTION_SIZES = {
    "mt": {"batch": 4, "steps": 5, "frames": 6, "query_dim": 16, "value_dim": 16},
    "speech": {"batch": 2, "steps": 8, "frames": 40, "query_dim": 16, "value_dim": 16},
}


def load_config(overrides: list[str]) -> DictConfig:
    """train.py's config with these overrides (no Hydra run folder); raises on a bad override."""
    cfg = compose_config(overrides, output_dir="/tmp/attend-benchmark")
    check_config(cfg)
    return cfg


@dataclass
class Data:
    """The prepared data module and its train and validation pairs within the length range."""

    datamodule: object
    train: StoreDataset
    val: StoreDataset

    def collate(self, examples: list[dict]) -> dict:
        return self.datamodule.collate()(examples)


def prepare_data(cfg: DictConfig, min_len: int, max_len: int) -> Data:
    """Prepare the configured data module (tokenizers trained and cached once) and keep the pairs whose
    source and target both have ``min_len`` to ``max_len`` tokens."""
    datamodule = build_datamodule(cfg)
    datamodule.prepare_data()
    datamodule.setup("fit")
    train = within(datamodule.datasets["train"], min_len, max_len)
    val = within(datamodule.datasets["val"], min_len, max_len)
    if len(train) < cfg.data.loader.batch_size or not len(val):
        raise RuntimeError(
            f"only {len(train)} training and {len(val)} validation pairs have {min_len}-{max_len} tokens on "
            f"both sides: widen --min-len/--max-len or choose other data"
        )
    return Data(datamodule, train, val)


def within(dataset: StoreDataset, min_len: int, max_len: int) -> StoreDataset:
    """The pairs of ``dataset`` with ``min_len`` to ``max_len`` tokens on both sides (target without bos/eos)."""
    src, tgt = dataset.encoded.column("source_size")[dataset.examples[:, 0]], dataset.target_sizes
    keep = (src >= min_len) & (src <= max_len) & (tgt >= min_len) & (tgt <= max_len)
    return StoreDataset(dataset.records, dataset.encoded, dataset.examples[keep], dataset.plugin, dataset.train)


def bucketed_batches(data: Data, batch_size: int, count: int, seed: int) -> list[dict]:
    """``count`` training batches as the data module makes them: length-bucketed, shuffled, epochs cycled."""
    sampler = BucketBatchSampler(data.train.lengths(), batch_size=batch_size, shuffle=True, seed=seed)
    batches = []
    for epoch in itertools.count():
        sampler.set_epoch(epoch)
        for indices in sampler:
            if len(batches) == count:
                return batches
            batches.append(data.collate([data.train[i] for i in indices]))
    raise AssertionError("unreachable")


def random_batches(data: Data, batch_size: int, count: int, seed: int) -> list[dict]:
    """``count`` batches of examples drawn at random, padded to their longest (the tutorials' loader)."""
    generator = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(count):
        indices = torch.randperm(len(data.train), generator=generator)[:batch_size].tolist()
        batches.append(data.collate([data.train[i] for i in indices]))
    return batches


def sorted_batches(dataset: StoreDataset, collate, batch_size: int, count: int) -> list[list[dict]]:
    """The first ``count`` examples of ``dataset`` in length-sorted batches (as val/test are decoded)."""
    subset = list(range(min(count, len(dataset))))
    lengths = dataset.lengths()[subset]
    sampler = BucketBatchSampler(lengths, batch_size=batch_size, shuffle=False)
    return [[dataset[subset[i]] for i in indices] for indices in sampler]


def target_tokens(batch: dict) -> int:
    """Predicted (non-padding) target tokens of a batch: eos included, bos not."""
    return int(batch["num_target_tokens"])
