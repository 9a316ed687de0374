"""What the characters of "Flight of the Amazon Queen" say, read from the game's resource entries: dialogue (.DOG),
cut-scenes (.CUT) and Joe's descriptions (QUEEN2.JAS). Each sentence is cut into the segments that have one voice
clip each, named as the engine names them (ScummVM's engines/queen: talk.cpp, cutaway.cpp, logic.cpp)."""

from __future__ import annotations

import struct
from dataclasses import dataclass

SPEAK_NONE = ("GD", "GM")  # commands that end a segment without speaking it (Joe grabs down / mid)
POSITION = "XY"  # "*XY00(237,112)": the command takes 11 more characters
JOE_RESPONSES = 40  # Joe's stock responses in QUEEN2.JAS (JOE_RESPONSE_MAX); descriptions are numbered after them
FILE_SUFFIXES = (".CUT", ".DOG")  # a description that names a file starts a scene; it is not spoken
OBJECT = struct.Struct(">hHHHhHHh")  # QUEEN.JAS object: name, x, y, description, entry, room, state, image
CUT_OBJECT = struct.Struct(">17h")  # cut-scene object: number, move x/y, bank, animList, execute, ... (17 fields)
PERSON_IMAGES = (-3, -4)  # an object whose image is -3 / -4 is a person
TEXT_SPOKEN = (-2, -3)  # cut-scene objects whose sentence is a narration played from one clip
TEXT_SHOWN = -4  # a cut-scene object whose sentence is shown, not spoken
ANIM_FRAME = 18  # bytes of a cut-scene animation frame after its header (9 big-endian int16)


@dataclass(frozen=True)
class Line:
    """One spoken segment: the voice clip the engine plays for it and the text it shows."""

    clip: str  # the resource entry of the voice, e.g. "060009P2.SB"
    text: str  # as written, speech commands removed; may still hold notes ("<gulp>") and marks ("^_")
    who: str  # "JOE"; a dialogue file's stem ("BOB") or a cut-scene object's name ("Trader Bob"); "" when unknown
    source: str  # the entry it was read from, e.g. "BOB1.DOG"


def speech_segments(sentence: str) -> list[tuple[int, str]]:
    """(segment number from 0, text) of each segment the engine speaks: a sentence is cut at every ``*XX``
    command, which ends (and numbers) a segment; ``*GD`` / ``*GM`` segments are not spoken (Talk::speak)."""
    segments, number, start, i = [], 0, 0, 0
    while i < len(sentence):
        if sentence[i] != "*":
            i += 1
            continue
        text, command = sentence[start:i], sentence[i + 1 : i + 3]
        i += 3 + (11 if command == POSITION else 0)
        if command not in SPEAK_NONE:
            segments.append((number, text))
        number, start = number + 1, i
    if start < len(sentence):
        segments.append((number, sentence[start:]))
    return segments


def get_string(data: bytes, offset: int, align: int = 2) -> tuple[str, int]:
    """The length-prefixed string at ``offset`` and the offset after it, padded to ``align`` (Talk::getString)."""
    length = data[offset]
    offset += 1
    if not length:
        return "", offset
    text = data[offset : offset + length].decode("latin-1")
    return text, (offset + length + align - 1) & ~(align - 1)


def clip_lines(prefix: str, sentence: str, who: str, source: str) -> list[Line]:
    """The segments of ``sentence`` with their clips ``PREFIX<segment in hex>.SB`` (spaces in the prefix are 0)."""
    prefix = prefix.replace(" ", "0").upper()
    return [Line(f"{prefix}{number + 1:X}.SB", text, who, source) for number, text in speech_segments(sentence)]


def dialogue_lines(name: str, data: bytes) -> list[Line]:
    """The lines of a dialogue file (the entry after its 20-byte header): Joe's (J) and the other person's (P), the
    greetings Joe says first (SSSS) and when they meet again (XXXX). ``who`` of P lines is the file's stem."""
    level_max, _, talk_key, joe_max, person_max = (abs(v) if i == 0 else v
                                                  for i, v in enumerate(struct.unpack_from(">5h", data, 0)))
    person1, _, person2 = struct.unpack_from(">3H", data, 22)
    person = name.rsplit(".", 1)[0].rstrip("0123456789")
    lines = []
    for head, sentence in dialogue_strings(data, 32 + level_max * 96, joe_max):
        lines += clip_lines(f"{talk_key:2d}{'SSSS' if head == 0 else f'{head:4x}'}J", sentence, "JOE", name)
    for head, sentence in dialogue_strings(data, person1, person_max):
        if head > 0:  # the engine asks for heads > 0 only
            lines += clip_lines(f"{talk_key:2d}{head:4x}P", sentence, person, name)
    again, offset = get_string(data, person2)
    joe_again, _ = get_string(data, offset)
    lines += clip_lines(f"{talk_key:2d}XXXXP", spoken_or_empty(again), person, name)
    lines += clip_lines(f"{talk_key:2d}XXXXJ", spoken_or_empty(joe_again), "JOE", name)
    return lines


def dialogue_strings(data: bytes, offset: int, count: int) -> list[tuple[int, str]]:
    """(head, sentence) of ``count`` dialogue entries at ``offset`` (2 bytes, an int16 head, a string padded to 4),
    the first of each head only (the engine finds that one), empty ones and "0" (none) left out."""
    found: dict[int, str] = {}
    for _ in range(count):
        (head,) = struct.unpack_from(">h", data, offset + 2)
        sentence, offset = get_string(data, offset + 4, align=4)
        found.setdefault(head, sentence)
    return [(head, sentence) for head, sentence in found.items() if spoken_or_empty(sentence)]


def spoken_or_empty(sentence: str) -> str:
    """The sentence, or "" where the file writes "0" for none."""
    return "" if sentence.strip() == "0" else sentence


@dataclass(frozen=True)
class GameText:
    """What QUEEN.JAS and QUEEN2.JAS say about the game: object names and images, descriptions, Joe's responses."""

    object_names: dict[int, str]  # object number -> its name ("Trader Bob"), "" when it has none
    object_images: dict[int, int]  # object number -> its image (-3 / -4: a person)
    descriptions: list[str]  # Joe's descriptions, numbered from 1
    responses: list[str]  # Joe's stock responses, numbered from 1


def game_text(jas: bytes, strings: list[str]) -> GameText:
    """The game text from QUEEN.JAS (after its 20-byte header) and the lines of QUEEN2.JAS (Logic::readQueenJas)."""
    rooms, names, objects, descriptions = struct.unpack_from(">4H", jas, 0)
    name_list = strings[descriptions : descriptions + names]
    object_names, object_images = {}, {}
    for number in range(1, objects + 1):
        name, *_, image = OBJECT.unpack_from(jas, 8 + (number - 1) * OBJECT.size)
        object_names[number] = name_list[abs(name) - 1] if 0 < abs(name) <= len(name_list) else ""
        object_images[number] = image
    first_response = descriptions + names + rooms + 12  # after the room names and the 12 verbs
    return GameText(object_names, object_images, strings[:descriptions],
                    strings[first_response : first_response + JOE_RESPONSES])


def description_lines(text: GameText) -> list[Line]:
    """Joe's stock responses (JOE0001..JOE0040) and descriptions (JOE0041..), each cut into segments; texts that
    name a scene file are not spoken."""
    numbered = [*enumerate(text.responses, 1), *enumerate(text.descriptions, JOE_RESPONSES + 1)]
    return [line for number, sentence in numbered if not sentence.strip().upper().endswith(FILE_SUFFIXES)
            for line in clip_lines(f"JOE{number:04d}", sentence, "JOE", "QUEEN2.JAS")]


def cutscene_lines(name: str, data: bytes, text: GameText) -> list[Line]:
    """The spoken lines of a cut-scene (the entry after its 20-byte header): object N's sentence is played from
    ``BASE_NN`` clips (Cutaway::run, findCdCut); Joe's and persons' are cut into segments, a narration (object -2,
    -3) is one clip. ``who``: "JOE" for Joe, the object's name for a person, "" for a narration."""
    count, offset = abs(struct.unpack_from(">h", data, 2)[0]), struct.unpack_from(">H", data, 8)[0]
    base = (name.rsplit(".", 1)[0] + "_____")[:5]
    _, offset = get_string(data, offset)  # the entry string: Joe's facing, not spoken
    lines, pointer = [], 12
    for index in range(1, count + 1):
        fields = CUT_OBJECT.unpack_from(data, pointer)
        people = struct.unpack_from(">h", data, pointer + CUT_OBJECT.size)[0]
        pointer += CUT_OBJECT.size + 2 + 2 * people
        sentence, offset = get_string(data, offset)
        number = 0 if fields[0] == -1 else fields[0]  # -1: Joe, after a room fade
        kind = cut_object_kind(number, fields, text)
        if kind == "animation":
            pointer = skip_animation(data, pointer)
        prefix = f"{base}{index:02d}"
        if kind == "narration" and sentence:
            lines.append(Line(f"{prefix}1.SB", "".join(t for _, t in speech_segments(sentence)), "", name))
        elif kind == "person" and sentence not in ("", "*") and not sentence.startswith("#"):  # "#...": credits
            who = "JOE" if number == 0 else text.object_names.get(number, "")
            lines += clip_lines(prefix, sentence, who, name)
    return lines


def cut_object_kind(number: int, fields: tuple[int, ...], text: GameText) -> str:
    """What a cut-scene object does: "person" (speaks), "narration", "animation" (animation frames follow it in the
    file) or "none" (Cutaway::getObjectType)."""
    anim_list, execute, from_object = fields[4], fields[5], fields[12]
    kind = "animation"
    if not anim_list and (number == 0 or number > 0 and text.object_images.get(number) in PERSON_IMAGES):
        kind = "person"
    if from_object > 0:
        kind = "none"
    if number in TEXT_SPOKEN:
        kind = "narration"
    elif number == TEXT_SHOWN:
        kind = "none"
    return "none" if kind == "animation" and not execute else kind


def skip_animation(data: bytes, pointer: int) -> int:
    """The offset after the animation frames at ``pointer`` (each a header and 9 int16, ended by a -2 header)."""
    while (header := struct.unpack_from(">h", data, pointer)[0]) != -2:
        if not -1 <= header <= 1000:
            raise ValueError(f"animation frame header {header} at byte {pointer}")
        pointer += 2 + ANIM_FRAME
    return pointer + 2
