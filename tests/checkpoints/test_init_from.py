"""Fine-tuning from a checkpoint (model.init_from): the tensors that match in name and shape are copied, the token
layers row by row for the tokens both vocabularies share, the rest keeps its fresh values and is reported in one
log line; a file that is missing or no Attend checkpoint is a one-line user error."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest
import torch

from attend.checkpoints.init_from import init_from, init_from_config
from attend.config.checks import check_config
from attend.config.compose import compose_config
from attend.config.errors import ConfigError
from attend.data import CharTokenizer
from attend.decoders import LuongDecoder
from attend.encoders import TextEncoder
from attend.model import Seq2Seq
from attend.run.context import reported_as_messages
from tests.helpers.parts import additive
from tests.helpers.paths import DATES, ROOT

SOURCES = ["12 May 2001", "3/4/99"]
TARGETS = ["2001-05-12", "1999-03-04"]
TOKEN_TENSORS = ("decoder.embedding.weight", "decoder.output_layer.weight", "decoder.output_layer.bias",
                 "ctc_head.weight", "ctc_head.bias")


def chars(texts: list[str]) -> CharTokenizer:
    tokenizer = CharTokenizer()
    tokenizer.fit(texts)
    return tokenizer


def seq2seq(sources: list[str] = SOURCES, targets: list[str] = TARGETS, seed: int = 0, hidden: int = 8) -> Seq2Seq:
    """A small text model with a CTC head, its character vocabularies fitted on ``sources`` and ``targets``."""
    torch.manual_seed(seed)
    source, target = chars(sources), chars(targets)
    encoder = TextEncoder(source.vocab_size, embedding_dim=4, hidden_size=4, dropout=0.0)
    decoder = LuongDecoder(target.vocab_size, encoder.output_dim, additive(), embedding_dim=4, hidden_size=hidden)
    return Seq2Seq(encoder, decoder, {"source": source, "target": target}, optimizer=None, val_search=None,
                   test_search=None, metrics={}, ctc_weight=0.3)


def save(model: Seq2Seq, path):
    """What Lightning writes that init_from reads: the weights, the data module's state, Attend's config."""
    tokenizers = {"src_tokenizer": model.tokenizers["source"].state_dict(),
                  "tgt_tokenizer": model.tokenizers["target"].state_dict()}
    config = {"encoder": {"_target_": "attend.encoders.TextEncoder"}, "decoder": {"_target_": "attend.decoders.X"}}
    torch.save({"state_dict": model.state_dict(), "DataModule": tokenizers, "attend": {"config": config}}, path)
    return path


def values(model: Seq2Seq) -> dict[str, torch.Tensor]:
    return {name: tensor.clone() for name, tensor in model.state_dict().items()}


def test_the_tensors_that_match_in_name_and_shape_are_copied_and_the_others_reported(tmp_path, caplog):
    pretrained = seq2seq(seed=1)
    path = save(pretrained, tmp_path / "best.ckpt")
    model = seq2seq(seed=2, hidden=16)  # the same vocabularies and encoder, a wider decoder
    fresh, saved = values(model), pretrained.state_dict()
    with caplog.at_level(logging.INFO, logger="attend.checkpoints.init_from"):
        init_from(model, path, ["all"])
    copied = []
    for name, tensor in model.state_dict().items():
        if name.startswith(("encoder.", "decoder.", "ctc_head.")) and saved[name].shape == tensor.shape:
            torch.testing.assert_close(tensor, saved[name], rtol=0, atol=0)
            copied.append(name)
        else:
            torch.testing.assert_close(tensor, fresh[name], rtol=0, atol=0)
    assert "decoder.embedding.weight" in copied and "decoder.rnn.weight_hh_l0" not in copied
    (line,) = [record.getMessage() for record in caplog.records]
    encoder = sum(name.startswith("encoder.") for name in saved)
    decoder = sum(name.startswith("decoder.") for name in saved)
    loaded = sum(name.startswith("decoder.") for name in copied)
    assert line.startswith(f"init_from {path}: encoder {encoder}/{encoder} tensors, decoder {loaded}/{decoder}, "
                           "ctc_head 2/2; not loaded (checkpoint vs model shape): decoder.")
    assert "by shared tokens" not in line  # the same vocabularies: copied whole
    assert "decoder.rnn.weight_hh_l0 (24x8 vs 48x16)" in line
    assert line.endswith(f" and {decoder - loaded - 5} more")  # one line: five named, the rest counted


def test_token_rows_are_copied_by_token_and_new_tokens_keep_their_fresh_rows(tmp_path, caplog):
    pretrained = seq2seq(seed=1)
    path = save(pretrained, tmp_path / "best.ckpt")
    # another target vocabulary: "7" and "8" are new, "5" and "9" are gone, and the frequencies reorder the ids
    model = seq2seq(targets=["2001-07-12", "1777-03-04", "8"], seed=2)
    fresh, saved = values(model), pretrained.state_dict()
    old, new = pretrained.tokenizers["target"], model.tokenizers["target"]
    assert old.vocab_size == new.vocab_size and old.vocab.itos != new.vocab.itos
    with caplog.at_level(logging.INFO, logger="attend.checkpoints.init_from"):
        init_from(model, path, ["all"])
    state = model.state_dict()
    shared = 0
    for new_id, token in enumerate(new.vocab.itos):
        old_id = old.vocab.stoi.get(token)
        shared += old_id is not None
        for name in TOKEN_TENSORS:
            expected = fresh[name][new_id] if old_id is None else saved[name][old_id]
            torch.testing.assert_close(state[name][new_id], expected, rtol=0, atol=0, msg=f"{name} {token!r}")
    assert shared < new.vocab_size
    for name in state:  # every other tensor of the parts: the same shapes, copied whole
        if name.startswith(("encoder.", "decoder.", "ctc_head.")) and name not in TOKEN_TENSORS:
            torch.testing.assert_close(state[name], saved[name], rtol=0, atol=0)
    (line,) = [record.getMessage() for record in caplog.records]
    assert f"(3 by shared tokens: {shared} of {new.vocab_size} target tokens)" in line  # decoder embedding, output
    assert f"ctc_head 2/2 (2 by shared tokens: {shared} of {new.vocab_size} target tokens)" in line
    assert "not loaded" not in line


def test_init_parts_encoder_leaves_the_decoder_and_the_ctc_head_as_they_were(tmp_path):
    pretrained = seq2seq(seed=1)
    path = save(pretrained, tmp_path / "best.ckpt")
    model = seq2seq(seed=2)
    fresh, saved = values(model), pretrained.state_dict()
    init_from(model, path, ["encoder"])
    for name, tensor in model.state_dict().items():
        expected = saved[name] if name.startswith("encoder.") else fresh[name]
        torch.testing.assert_close(tensor, expected, rtol=0, atol=0)


def test_a_resumed_run_keeps_its_own_weights(tmp_path, caplog):
    cfg = compose_config(["experiment=dates"], output_dir=tmp_path)
    cfg.model.init_from = str(save(seq2seq(seed=1), tmp_path / "best.ckpt"))
    cfg.ckpt_path = str(tmp_path / "last.ckpt")
    model = seq2seq(seed=2)
    fresh = values(model)
    with caplog.at_level(logging.INFO, logger="attend.checkpoints.init_from"):
        init_from_config(model, cfg)
    for name, tensor in model.state_dict().items():
        torch.testing.assert_close(tensor, fresh[name], rtol=0, atol=0)
    assert "skipped: the run resumes from ckpt_path" in caplog.text


def one_line_user_error(path, capsys) -> str:
    """init_from's error as the entry points report it: one line and exit status 2, no traceback."""
    with pytest.raises(SystemExit) as stop, reported_as_messages():
        init_from(seq2seq(), path, ["all"])
    assert stop.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("Error: ConfigError: model.init_from") and str(path) in line
    return line


def test_a_missing_or_foreign_file_is_a_one_line_user_error(tmp_path, capsys):
    assert "does not exist: point it at a checkpoint" in one_line_user_error(tmp_path / "nope.ckpt", capsys)
    text = tmp_path / "notes.ckpt"
    text.write_text("not a checkpoint\n")
    assert "cannot read checkpoint" in one_line_user_error(text, capsys)
    foreign = tmp_path / "foreign.ckpt"
    torch.save({"state_dict": seq2seq().state_dict()}, foreign)
    assert "is not an Attend checkpoint" in one_line_user_error(foreign, capsys)


def test_a_checkpoint_of_which_nothing_fits_is_a_user_error(tmp_path, capsys):
    path = save(seq2seq(), tmp_path / "best.ckpt")
    checkpoint = torch.load(path, weights_only=False)
    checkpoint["state_dict"] = {f"{name}.other": tensor for name, tensor in checkpoint["state_dict"].items()}
    torch.save(checkpoint, path)
    assert "no tensor of the encoder, decoder, ctc_head matches this model" in one_line_user_error(path, capsys)


def test_the_start_up_check_accepts_the_options_and_refuses_an_unknown_part(tmp_path):
    existing = save(seq2seq(), tmp_path / "best.ckpt")
    check_config(compose_config(["experiment=dates", f"model.init_from={existing}"], output_dir=tmp_path))
    check_config(compose_config(["experiment=dates", "model.init_parts=[encoder,decoder]"], output_dir=tmp_path))
    with pytest.raises(ConfigError, match="model.init_parts names head, which the model does not have: choose from "
                                          "encoder, decoder, all"):
        check_config(compose_config(["experiment=dates", "model.init_parts=head"], output_dir=tmp_path))
    with pytest.raises(ConfigError, match="model.init_from=.*nope.ckpt' does not exist"):
        check_config(compose_config(["experiment=dates", f"model.init_from={tmp_path}/nope.ckpt"], output_dir=tmp_path))


def test_train_py_fine_tunes_from_a_checkpoint_and_says_what_it_loaded(tmp_path):
    # the fixture's model (experiment=dates at these sizes) on fewer dates: the vocabularies may differ from its
    overrides = [
        "experiment=dates", "data.source.n_train=300", "data.source.n_val=16", "data.source.n_test=16",
        "encoder.embedding_dim=16", "encoder.hidden_size=32", "decoder.embedding_dim=16", "decoder.hidden_size=64",
        "trainer.max_epochs=1", "trainer.limit_train_batches=1", "trainer.limit_val_batches=1", "logger=csv",
        "callbacks=no_checkpoints", "run_test=false", f"model.init_from={DATES}", f"hydra.run.dir={tmp_path}",
    ]
    result = subprocess.run([sys.executable, "train.py", *overrides], cwd=ROOT, capture_output=True, text=True,
                            timeout=300)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-5000:]
    (line,) = [line for line in output.splitlines() if f"init_from {DATES}: " in line]
    assert "encoder 9/9 tensors (1 by shared tokens: " in line and ", decoder 14/14 (3 by shared tokens: " in line, line
    assert "not loaded" not in line, line
