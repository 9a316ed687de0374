"""Overrides that make train.py's runs tiny: a few steps of a small model on generated data."""

from __future__ import annotations

# one epoch of 8 steps on 2000 generated dates: a real checkpoint, tested and evaluated
TINY_DATES = [
    "data=dates",
    "data.source.n_train=2000",
    "data.source.n_val=64",
    "data.source.n_test=64",
    "encoder.embedding_dim=16",
    "encoder.hidden_size=32",
    "decoder.embedding_dim=16",
    "decoder.hidden_size=64",
    "trainer.max_epochs=1",
    "trainer.limit_train_batches=8",
    "trainer.limit_val_batches=1",
    "trainer.log_every_n_steps=1",
]

# the mt task on 256 dates with debug=fast (a few steps) and the CSV logger
TINY_MT = [
    "task=mt", "data=dates", "data.source.n_train=256", "data.source.n_val=8", "data.source.n_test=8",
    "encoder.embedding_dim=16", "encoder.hidden_size=32", "decoder.embedding_dim=16", "decoder.hidden_size=64",
    "debug=fast", "logger=csv",
]

# each task on tiny data with a tiny encoder (the matrix and DDP runs add the decoder's sizes)
TASK_OVERRIDES = {
    "mt": [
        "task=mt", "data=dates", "data.source.n_train=256", "data.source.n_val=8", "data.source.n_test=8",
        "encoder.embedding_dim=16", "encoder.hidden_size=32",
    ],
    "caption": [
        "task=caption", "data=shapes", "encoder=cnn", "data.source.n_train=64", "data.source.n_val=8",
        "data.source.n_test=8", "data.loader.eval_batch_size=8", "encoder.channels=[8,16,16]", "encoder.output_dim=64",
    ],
    "asr": [
        "task=asr", "data.source.n_train=32", "data.source.n_val=4", "data.source.n_test=4",
        "data.loader.batch_size=8", "encoder.rnn_hidden=16", "encoder.output_dim=64", "model.val_search.max_len_a=0.2",
        "model.test_search.max_len_a=0.2", "model.test_search.beam_size=2", "data=espeak_en",
    ],
}
