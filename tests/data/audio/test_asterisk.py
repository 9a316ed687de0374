"""Asterisk prompts as a speech source, on a fixture in the packages' layout: a gzipped ``name: text`` transcript
file with the real files' oddities (comments, a byte-order mark, notes in three kinds of brackets, silences and tones
written as notes, an empty entry, a prompt without a recording, near-duplicate prompts, numbers with separators and
ordinals) and 8 kHz WAV files, some in folders, one corrupt."""

from __future__ import annotations

import difflib
import gzip

import numpy as np
import pytest
import soundfile as sf
from hydra.utils import instantiate

from attend.config.compose import compose_config
from attend.data import LogMelFrontEnd
from attend.data.audio import AsteriskPrompts, SpeechDataError
from attend.data.audio.spoken import spoken_text
from attend.data.bad_samples import Skipped
from tests.helpers.audio import make_datamodule

TRANSCRIPT = """\ufeff; Core Asterisk Sounds in English

activated: Activated.
beep: [this is a simple beep tone]
vm-intro: Please leave your message after the tone. When done, hang up or press the pound key. (simple tone sound plays)
vm-press: press 5 to leave a message
digits/5: five
digits/1: one
letters/at: at [@]
hold: hold time
hold-copy: Hold time!
demo: at least a 28.8 kilobit modem
lost: this prompt has no recording
silence/5: (5 seconds of silence)
confbridge-join: <beep ascending>
spy-iax2: IAX (note: does not say "2")
dir-welcome:
users: up to 1,000 users, the 1st caller and the 3rd
conf-locked: the conference is now locked
conf-unlocked: the conference is now unlocked
broken: this recording is corrupt
"""


@pytest.fixture()
def asterisk(tmp_path):
    """The fixture's sounds folder and transcript file, as the Debian packages lay them out."""
    sounds = tmp_path / "sounds" / "en"
    rate, rng = 8000, np.random.default_rng(0)
    names = ["activated", "beep", "vm-intro", "vm-press", "digits/5", "digits/1", "letters/at", "hold", "hold-copy",
             "demo", "silence/5", "confbridge-join", "spy-iax2", "dir-welcome", "users", "conf-locked", "conf-unlocked"]
    for i, name in enumerate(names):
        (sounds / name).parent.mkdir(parents=True, exist_ok=True)
        t = np.arange(int((0.4 + 0.1 * (i % 10)) * rate)) / rate
        sf.write(sounds / f"{name}.wav", (0.3 * np.sin(2 * np.pi * 300 * t) + 0.01 * rng.standard_normal(t.size))
                 .astype(np.float32), rate, subtype="PCM_16")
    (sounds / "broken.wav").write_bytes(b"RIFF\x00\x00\x00\x00WAVEnot audio at all")
    transcripts = tmp_path / "core-sounds-en.txt.gz"
    with gzip.open(transcripts, "wt", encoding="utf-8") as f:
        f.write(TRANSCRIPT)
    return {"sounds": str(sounds), "transcripts": str(transcripts)}


def prompts(asterisk, **options) -> AsteriskPrompts:
    return AsteriskPrompts("en", **{"n_val": 1, "n_test": 2, "seed": 3, **asterisk, **options})


def test_transcripts_become_spoken_text(asterisk):
    utterances, skipped = prompts(asterisk).utterances()
    texts = {u.key: u.text for u in utterances}
    assert texts["vm-press"] == "press five to leave a message"  # the digit as it is spoken
    assert texts["demo"] == "at least a twenty eight point eight kilobit modem"
    assert texts["letters/at"] == "at" and texts["activated"] == "activated"  # the bracketed symbol is not said
    assert texts["vm-intro"] == "please leave your message after the tone when done hang up or press the pound key"
    assert texts["spy-iax2"] == "iax"  # a note in parentheses is not said
    assert texts["users"] == "up to one thousand users the first caller and the third"
    assert utterances[0].path.endswith("activated.wav")
    assert {(s.key, s.reason) for s in skipped} == {
        ("beep", "not speech"), ("silence/5", "not speech"), ("confbridge-join", "not speech"),
        ("dir-welcome", "empty transcript"), ("lost", "no recording"), ("broken", "corrupt audio")}
    _, skipped = prompts(asterisk, max_seconds=1.0).utterances()  # the fixture's files last 0.4 s to 1.3 s
    assert {s.key for s in skipped if s.reason == "over max_seconds"} == {"hold", "hold-copy", "demo"}


def test_no_silence_tone_or_note_in_any_split_of_the_installed_transcripts():
    """The real files, where the Debian packages are installed: every note-only prompt is a skip, no kept text holds
    a note, and a test prompt is never a near duplicate of a training prompt."""
    note_words = {"en": {"silence", "beep", "ascending", "plays", "note"}, "fr": {"emphase", "beep", "ahooga"}}
    for language, n_val, n_test in (("en", 50, 60), ("fr", 20, 40)):
        source = AsteriskPrompts(language, n_val=n_val, n_test=n_test, seed=1234)
        if not source.transcripts.is_file() or not source.sounds.is_dir():
            pytest.skip(f"asterisk-core-sounds-{language}(-wav) not installed")
        splits = source.splits()
        kept = {split: [u for u in part if not isinstance(u, Skipped)] for split, part in splits.items()}
        skipped = {u.key: u.reason for u in splits["train"] if isinstance(u, Skipped)}
        assert skipped.get("confbridge-join") == "not speech" and skipped.get("tt-monkeys") == "not speech"
        if language == "en":
            assert all(skipped.get(f"silence/{n}") == "not speech" for n in range(1, 11))
        words = {word for part in kept.values() for u in part for word in u.text.split()}
        assert not words & note_words[language]
        train = [u.text for u in kept["train"]]
        for u in kept["test"] + kept["val"]:
            assert max(difflib.SequenceMatcher(None, u.text, t, autojunk=False).ratio() for t in train) < 0.8, u


@pytest.mark.parametrize("language, text, spoken", [
    ("fr", "Appuyez sur 5, puis 28,8.", "appuyez sur cinq puis vingt huit virgule huit"),
    ("fr", "Pour (emphase) le 1er, la 1re et le 2e", "pour le premier la première et le deuxième"),
    ("fr", "1.000 ou 1\u00a0000 usagers, composez 500 600", "mille ou mille usagers composez cinq cents six cents"),
    ("en", "1,000 users, 1st, 2nd, 3rd and 21st, 28.8", "one thousand users first second third and twenty first "
                                                        "twenty eight point eight"),
    ("es", "presione 1", "presione uno"),
    ("it", "premere 4", "premere quattro"),
    ("ru", "нажмите 2", "нажмите два"),
])
def test_numbers_are_written_in_the_prompt_s_language(language, text, spoken):
    assert spoken_text(text, language) == spoken


def test_no_val_or_test_text_is_heard_in_training(asterisk):
    for seed in range(8):
        splits = prompts(asterisk, seed=seed, n_val=2, n_test=3).splits()
        train = {u.text for u in splits["train"] if not isinstance(u, Skipped)}
        assert not train & {u.text for split in ("val", "test") for u in splits[split]}
        together = [split for split, part in splits.items() for u in part if getattr(u, "text", "") == "hold time"]
        assert len(set(together)) == 1 and len(together) == 2  # "hold" and "hold-copy" say the same: one split
        near = [split for split, part in splits.items() for u in part if getattr(u, "key", "").startswith("conf-")]
        assert len(set(near)) == 1 and len(near) == 2  # "... locked" and "... unlocked": a word apart, one split
    assert sum(isinstance(u, Skipped) for u in splits["train"]) == 6  # the skips are the training split's


def test_the_split_is_seeded(asterisk):
    assert prompts(asterisk).splits() == prompts(asterisk).splits()
    assert any(prompts(asterisk, seed=s).splits()["test"] != prompts(asterisk).splits()["test"] for s in range(4))


def test_through_the_data_module_the_skips_are_counted_and_8_khz_is_resampled(asterisk, tmp_path):
    datamodule = make_datamodule(prompts(asterisk), tmp_path, spec_augment=None, max_skip_fraction=0.5,
                                 frontend=LogMelFrontEnd(sample_rate=16000, n_mels=40))
    assert datamodule.bad_samples.reasons("train") == {"not speech": 3, "no recording": 1, "empty transcript": 1,
                                                       "corrupt audio": 1}
    records, encoded = datamodule.records["train"], datamodule.encoded["train"]
    row = int(encoded.value("row", 0))
    seconds = sf.info(records.value("path", row)).duration
    assert abs(int(encoded.value("source_size", 0)) - seconds * 100) <= 3  # 100 frames a second at 16 kHz


def test_missing_packages_and_unknown_languages_say_what_to_install(tmp_path, asterisk):
    with pytest.raises(SpeechDataError, match="apt-get install asterisk-core-sounds-en asterisk-core-sounds-en-wav"):
        AsteriskPrompts("en", transcripts=str(tmp_path / "nowhere.txt.gz")).splits()
    with pytest.raises(SpeechDataError, match="apt-get install asterisk-core-sounds-en-wav"):
        AsteriskPrompts("en", sounds=str(tmp_path / "nowhere"), transcripts=asterisk["transcripts"]).splits()
    with pytest.raises(SpeechDataError, match="en, fr, es, it, ru"):
        AsteriskPrompts("de")
    with pytest.raises(SpeechDataError, match="leaves none to train on"):
        prompts(asterisk, n_val=8, n_test=5).splits()


@pytest.mark.parametrize("mixed", ["asterisk_multilingual", "asterisk_espeak", "asterisk_amazon_queen"])
def test_the_mixed_configs_keep_data_asterisk_s_english_split(mixed, tmp_path):
    """The English source inside a Corpora config has data=asterisk's settings, hence its records-store key and its
    held-out prompts: the test figures of the mixed runs are on the same 60 utterances."""
    def english(overrides):
        source = compose_config(overrides, output_dir=tmp_path).data.source
        if "sources" in source:
            source = next(s for s in source.sources.values() if s.get("language") == "en")
        return instantiate(source)

    alone = english(["task=asr"])
    inside = english(["task=asr", f"data={mixed}"])
    assert isinstance(inside, AsteriskPrompts) and inside.settings() == alone.settings()
