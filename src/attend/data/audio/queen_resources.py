"""The resource file of the Debian game "Flight of the Amazon Queen" (``queen.1c``, package
flight-of-the-amazon-queen): a table of named entries (dialogue, cut-scenes, game data, MP3 voice clips) and their
bytes. The format is ScummVM's rebuilt one (engines/queen/resource.cpp)."""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

from attend.data.audio.record import SpeechDataError

RESOURCE = "/usr/share/scummvm/flight-of-the-amazon-queen/queen.1c"
MAGIC = b"QTBL"
HEADER = struct.Struct(">4s6s2sBH")  # "QTBL", version ("CEM10\0"), 2 obsolete bytes, compression (1: MP3), count
ENTRY = struct.Struct(">12sBII")  # name (NUL padded), bundle, offset, size
FIX = ("install the game with `apt-get install flight-of-the-amazon-queen` (Debian main) or point "
       "data.source.resource at its queen.1c")


@dataclass(frozen=True)
class Entry:
    """One file of the resource table: where its bytes are in the resource file."""

    name: str  # upper-case, e.g. "BOB1.DOG", "060001P1.SB"
    offset: int
    size: int


class QueenResources:
    """The table of a ``queen.1c`` resource file, and the bytes of its entries. Raises ``SpeechDataError`` naming the
    file and the fix when it is missing, is not a QTBL resource file or is cut short."""

    def __init__(self, path: str | os.PathLike = RESOURCE) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise SpeechDataError(f"the Amazon Queen resource file {self.path} does not exist: {FIX}")
        size = self.path.stat().st_size
        with open(self.path, "rb") as f:
            head = f.read(HEADER.size)
            if len(head) < HEADER.size or not head.startswith(MAGIC):
                raise SpeechDataError(f"{self.path} is not a QTBL resource file (it starts with {head[:4]!r}, not "
                                      f"{MAGIC!r}): {FIX}")
            _, version, _, self.compression, count = HEADER.unpack(head)
            self.version = version.rstrip(b"\0").decode("latin-1")
            table = f.read(count * ENTRY.size)
        if len(table) < count * ENTRY.size:
            raise SpeechDataError(f"{self.path} is truncated: its table of {count} entries ends after "
                                  f"{len(table) // ENTRY.size}; {FIX}")
        self.entries: dict[str, Entry] = {}
        for i in range(count):
            raw, _, offset, length = ENTRY.unpack_from(table, i * ENTRY.size)
            name = raw.split(b"\0", 1)[0].decode("latin-1").upper()
            if offset + length > size:
                raise SpeechDataError(f"{self.path} is truncated: entry {name} ends at byte {offset + length}, past "
                                      f"the end of the file ({size} bytes); {FIX}")
            self.entries[name] = Entry(name, offset, length)

    def __contains__(self, name: str) -> bool:
        return name.upper() in self.entries

    def names(self, suffix: str = "") -> list[str]:
        """Sorted names of the entries that end with ``suffix`` (".DOG", ".SB", ...)."""
        return sorted(name for name in self.entries if name.endswith(suffix.upper()))

    def read(self, name: str, skip: int = 0) -> bytes:
        """The bytes of entry ``name`` after its first ``skip`` (the 20-byte header of .DOG, .CUT and .JAS files)."""
        entry = self.entries.get(name.upper())
        if entry is None:
            raise SpeechDataError(f"{self.path} has no entry {name.upper()}; is it the English talkie version? {FIX}")
        with open(self.path, "rb") as f:
            f.seek(entry.offset + skip)
            return f.read(max(0, entry.size - skip))

    def read_text(self, name: str) -> list[str]:
        """The lines of a text entry (QUEEN2.JAS), Latin-1, line ends removed."""
        return [line.rstrip("\r") for line in self.read(name).decode("latin-1").split("\n")]
