"""The Amazon Queen speech source, on a tiny resource file in the game's format built here (a QTBL table; dialogue,
description and cut-scene entries; real MP3 clips, one corrupt, one missing, one without a text), and on the
installed Debian package when there is one."""

from __future__ import annotations

import io
import os
import re
import struct

import numpy as np
import pytest
import soundfile as sf

from attend.config.compose import compose_config
from attend.data.audio import AmazonQueenSpeech, SpeechDataError
from attend.data.audio.queen_resources import RESOURCE, QueenResources
from attend.data.audio.queen_texts import speech_segments
from attend.data.audio.record import AudioReadError, Utterance, audio_duration, clip_path, read_audio
from attend.data.bad_samples import Skipped

RATE = 11025
FIX = "apt-get install flight-of-the-amazon-queen"


def string(data: bytearray, text: str, align: int = 2) -> None:
    """Append a length-prefixed string padded as the game's files pad them (from the start of the data)."""
    data += bytes([len(text)]) + text.encode("latin-1")
    if text:
        data += b"\0" * (-len(data) % align)


def dog(talk_key: int, joe: list[tuple[int, str]], person: list[tuple[int, str]], again: tuple[str, str]) -> bytes:
    """A dialogue file: the 20-byte header, the header fields, one dialogue level, Joe's and the person's strings."""
    data = bytearray(32 + 96)  # header fields and one level of the dialogue tree
    for head, text in joe:
        data += struct.pack(">hh", 0, head)
        string(data, text, align=4)
    person1 = len(data)
    for head, text in person:
        data += struct.pack(">hh", 0, head)
        string(data, text, align=4)
    person2 = len(data)
    for text in again:
        string(data, text)
    struct.pack_into(">5h", data, 0, 1, talk_key, talk_key, len(joe), len(person))
    struct.pack_into(">3H", data, 22, person1, 0, person2)
    return bytes(20) + bytes(data)


def cutscene(objects: list[tuple[int, str]]) -> bytes:
    """A cut-scene whose objects (number, sentence) speak: Joe is 0, a person an object of the game."""
    data = bytearray(12)
    for number, _ in objects:
        data += struct.pack(">17h", number, *[0] * 16) + struct.pack(">h", 0)  # no animation, no people turned on
    sentences = len(data)
    string(data, "")  # the entry string
    for _, text in objects:
        string(data, text)
    struct.pack_into(">HhhHHH", data, 0, 0, len(objects), 0, 0, sentences, 0)
    return bytes(20) + bytes(data)


def game_text() -> dict[str, bytes]:
    """QUEEN.JAS (one object, a person named "note") and QUEEN2.JAS (descriptions, names, rooms, verbs, responses)."""
    jas = bytes(20) + struct.pack(">4H", 1, 1, 1, 2) + struct.pack(">hHHHhHHh", 1, 0, 0, 0, 0, 1, 0, -3)
    lines = ["c2c.CUT", "Neat!*02", "note", "ROOM1", *[f"verb{i}" for i in range(12)], "I can't move it*03",
             *[""] * 39, ""]
    return {"QUEEN.JAS": jas, "QUEEN2.JAS": "\r\n".join(lines).encode("latin-1")}


def mp3(seconds: float) -> bytes:
    t = np.arange(int(seconds * RATE)) / RATE
    buffer = io.BytesIO()
    sf.write(buffer, (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32), RATE, format="MP3")
    return buffer.getvalue()


def resource_file(entries: dict[str, bytes]) -> bytes:
    """A QTBL resource file holding ``entries``."""
    table_end = 15 + 21 * len(entries)
    header = b"QTBL" + b"CEM10\0" + b"\0\0" + bytes([1]) + struct.pack(">H", len(entries))
    table, data = b"", b""
    for name, content in entries.items():
        table += name.encode().ljust(12, b"\0") + struct.pack(">BII", 1, table_end + len(data), len(content))
        data += content
    return header + table + data


CLIPS = ["05SSSSJ1", "050006J1", "050006J2", "050006P1", "050006P2", "050007P1", "05XXXXP1", "05XXXXJ1",
         "060001P1", "060006P1", "060007P1", "070001P1", "070006P1", "JOE00011", "JOE00421", "C1A__011", "C1A__021",
         "050009P1"]


@pytest.fixture()
def queen(tmp_path):
    """The fixture's queen.1c: Bob (talk key 5), the witch (6) and Tam (7) talk to Joe; a description or two; a
    cut-scene with Joe and a placeholder object. 050001P1 is corrupt, 050008P1 is missing, 050009P1 has no text."""
    entries = {
        "BOB1.DOG": dog(5, joe=[(0, "Hello Bob."), (6, "How is business?*03Any news?")],
                        person=[(0, "0"), (1, "What can I do for you?"), (6, "Business is slow.*XY00(237,112)I sold "
                                "24 crates in 1922."), (7, "<gulp>*02"), (8, "Nobody buys anything.")],
                        again=("Hello again Joe.", "Howdy Bob.*02")),
        "WITCH1.DOG": dog(6, joe=[], person=[(1, "Hello again Joe."), (6, "How is business today?"),
                                             (7, "Magic needs patience.")], again=("0", "0")),
        "TAM1.DOG": dog(7, joe=[], person=[(1, "The mission is open."), (6, "Welcome to the jungle, friend!")],
                        again=("", "")),
        "C1A.CUT": cutscene([(0, "Where am I?"), (1, "Hi there.")]),
        **game_text(),
        "050001P1.SB": b"this is not an mp3 clip at all" * 10,
    }
    for i, name in enumerate(CLIPS):
        entries.setdefault(f"{name}.SB", mp3(0.5 + 0.1 * i))
    path = tmp_path / "queen.1c"
    path.write_bytes(resource_file(entries))
    return path


def by_key(items) -> dict:
    return {item.key: item for item in items}


def test_the_lines_become_utterances_with_speakers_and_counted_skips(queen):
    parts = AmazonQueenSpeech(queen, val_speakers=["tam"], test_speakers=["witch"]).splits()
    train = by_key(parts["train"])
    expected = {
        "05SSSSJ1": ("hello bob", "joe"), "050006J2": ("any news", "joe"),
        "050006P1": ("business is slow", "bob"),  # 050006J1 "how is business": near the witch's, skipped
        "050006P2": ("i sold twenty four crates in nineteen twenty two", "bob"),
        "05XXXXJ1": ("howdy bob", "joe"), "JOE00011": ("i can't move it", "joe"), "JOE00421": ("neat", "joe"),
        "C1A__011": ("where am i", "joe"),
    }
    assert {k: (u.text, u.speaker) for k, u in train.items() if isinstance(u, Utterance)} == expected
    skips = {k: s.reason for split in parts.values() for k, s in by_key(split).items() if isinstance(s, Skipped)}
    assert skips == {"050001P1": "corrupt audio", "050007P1": "not speech", "050008P1": "no clip",
                     "050009P1": "no text", "05XXXXP1": "text said in val or test",  # the witch says it too
                     "050006J1": "text said in val or test"}
    assert "C1A__021" not in train  # the placeholder object "note" names no speaker: left out
    utterance = train["050006P2"]
    assert utterance.duration == pytest.approx(audio_duration(utterance.path)) and 0.4 < utterance.duration < 2.5


def test_a_sentence_is_cut_at_its_speech_commands():
    # the text before a command is its segment; *XY takes 11 more characters; a *GD (grab down) segment is silent
    assert speech_segments("Hi.*FLHow are you?*XY00(237,112)Fine*GD*00") == [(0, "Hi."), (1, "How are you?"),
                                                                              (3, "")]
    assert speech_segments("*01*01Ooop!") == [(0, ""), (1, ""), (2, "Ooop!")]


def test_a_clip_path_reads_the_clip_inside_the_resource_file(queen):
    entry = QueenResources(queen).entries["050006P1.SB"]
    path = clip_path(queen, entry.offset, entry.size)
    wave = read_audio(path, 16000)
    assert wave.ndim == 1 and abs(wave.numel() / 16000 - audio_duration(path)) < 0.1
    assert wave.abs().max() > 0.1  # the sine, not silence
    with pytest.raises(AudioReadError, match="runs past the end"):
        read_audio(clip_path(queen, entry.offset, 10**9))
    with pytest.raises(AudioReadError, match="cannot be read"):
        corrupt = QueenResources(queen).entries["050001P1.SB"]
        read_audio(clip_path(queen, corrupt.offset, corrupt.size))


def test_held_out_characters_are_never_heard_in_training_nor_their_texts(queen):
    parts = AmazonQueenSpeech(queen, val_speakers=["tam"], test_speakers=["witch"]).splits()
    speakers = {split: {u.speaker for u in part if isinstance(u, Utterance)} for split, part in parts.items()}
    assert speakers["val"] == {"tam"} and speakers["test"] == {"witch"} and not speakers["train"] & {"tam", "witch"}
    train_texts = {u.text for u in parts["train"] if isinstance(u, Utterance)}
    assert "hello again joe" not in train_texts  # said by the witch in test: training's copy is skipped
    assert "how is business" not in train_texts  # a near duplicate of the witch's "how is business today" (0.83)
    # the other way: the held-out side gives the shared texts up
    parts = AmazonQueenSpeech(queen, val_speakers=["tam"], test_speakers=["witch"], drop_shared_from="eval").splits()
    test = by_key(parts["test"])
    assert test["060001P1"].reason == test["060006P1"].reason == "text heard in training"
    assert test["060007P1"].text == "magic needs patience"


def test_speakers_must_be_known_and_held_out_once(queen):
    with pytest.raises(SpeechDataError, match=r"dracula not among the speakers .*: bob, joe, tam, witch"):
        AmazonQueenSpeech(queen, val_speakers=["dracula"], test_speakers=[]).splits()
    with pytest.raises(SpeechDataError, match="tam are in both"):
        AmazonQueenSpeech(queen, val_speakers=["tam"], test_speakers=["tam"])
    with pytest.raises(SpeechDataError, match="choose from dialogue, descriptions, cutscenes"):
        AmazonQueenSpeech(queen, kinds=["songs"])


def test_a_missing_wrong_or_truncated_resource_file_says_what_to_install(queen, tmp_path):
    with pytest.raises(SpeechDataError, match=f"{tmp_path}/none.1c does not exist: .*{FIX}"):
        AmazonQueenSpeech(tmp_path / "none.1c").splits()
    (other := tmp_path / "other.1c").write_bytes(b"RIFF and something else")
    with pytest.raises(SpeechDataError, match=f"other.1c is not a QTBL resource file .*{FIX}"):
        QueenResources(other)
    (short := tmp_path / "short.1c").write_bytes(queen.read_bytes()[:200])
    with pytest.raises(SpeechDataError, match=r"short.1c is truncated: its table of \d+ entries ends after 8;"):
        QueenResources(short)
    (broken := tmp_path / "broken.1c").write_bytes(resource_file({"BOB1.DOG": bytes(30)}))
    with pytest.raises(SpeechDataError, match="broken.1c: a dialogue or scene entry is malformed"):
        AmazonQueenSpeech(broken, kinds=["dialogue"]).splits()
    (cut := tmp_path / "cut.1c").write_bytes(queen.read_bytes()[:-100])
    with pytest.raises(SpeechDataError, match="cut.1c is truncated: entry .* past the end of the file"):
        QueenResources(cut)


def test_the_data_config_builds_the_source(tmp_path):
    source = compose_config(["task=asr", "data=amazon_queen"], output_dir=tmp_path).data.source
    assert source._target_ == "attend.data.audio.AmazonQueenSpeech" and source.resource is None
    assert not set(source.val_speakers) & set(source.test_speakers)


@pytest.mark.skipif(not os.path.isfile(RESOURCE), reason="flight-of-the-amazon-queen is not installed")
def test_the_installed_game():
    """The real queen.1c: every kind pairs text and clip (length and duration agree), the held-out characters and
    their texts stay out of training."""
    source = AmazonQueenSpeech()
    lines = [item for _, item in source.items() if isinstance(item, Utterance)]
    assert 6200 < len(lines) < 6500 and 250 < sum(u.duration for u in lines) / 60 < 280
    assert all(u.text.strip() and u.speaker and 0 < u.duration < 20 for u in lines)  # no empty or markup-only text
    assert not [u.text for u in lines if re.search(r"[^a-z0-9' ]", u.text)]
    dialogue = [u for u in lines if u.key[:2].isdigit() and u.key[6] in "JP"]
    assert 3900 < len(dialogue) < 4050 and 165 < sum(u.duration for u in dialogue) / 60 < 180
    assert len({u.speaker for u in dialogue}) == 30  # Joe and the 29 people he talks to
    for kind in (dialogue, [u for u in lines if u.key.startswith("JOE")], [u for u in lines if u.key[0] == "C"]):
        lengths, durations = [len(u.text) for u in kind], [u.duration for u in kind]
        assert np.corrcoef(lengths, durations)[0, 1] >= 0.7  # the text is the clip's: a wrong pairing would not agree
    parts = {split: [u for u in part if isinstance(u, Utterance)] for split, part in source.splits().items()}
    speakers = {split: {u.speaker for u in part} for split, part in parts.items()}
    assert speakers["val"] == {"death", "secretary"} and speakers["test"] == {"klunk", "naomi"}
    assert not speakers["train"] & (speakers["val"] | speakers["test"]) and len(speakers["train"]) >= 28
    assert not {u.text for u in parts["val"] + parts["test"]} & {u.text for u in parts["train"]}
    for split in ("val", "test"):
        assert 8 < sum(u.duration for u in parts[split]) / 60 < 14
