"""Emoji rendered with a colour emoji font, captioned with their CLDR English names ("grinning face")."""

from __future__ import annotations

import os
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

from attend.data.images.record import ImageCaption, ImageReadError
from attend.data.splitting import split_by_key

NOTO_COLOR_EMOJI = "/usr/share/fonts/truetype/noto/NotoColorEmoji.ttf"
FONT_SIZE = 109  # Noto Color Emoji is a bitmap font whose only strike is 109 px
REFERENCE = "\U0001f600"  # grinning face: its advance is that of one glyph
MAX_ADVANCE = 1.3  # wider than this many reference advances: the font drew the sequence as several glyphs
MARGIN = 0.05  # white margin around the glyph, as a fraction of its larger side


class EmojiImages:
    """Every fully-qualified emoji the font draws as one visible glyph; a fixed seeded split by emoji."""

    def __init__(self, font: str | os.PathLike = NOTO_COLOR_EMOJI, n_val: int = 300, n_test: int = 300,
                 seed: int = 1234) -> None:
        self.font_path = Path(font)
        self.n_val = n_val
        self.n_test = n_test
        self.seed = seed
        self.dropped: dict[str, int] = {}  # why emoji were left out -> how many, after splits()
        self._font: ImageFont.FreeTypeFont | None = None

    def settings(self) -> dict:
        """The constructor arguments."""
        return {"font": str(self.font_path), "n_val": self.n_val, "n_test": self.n_test, "seed": self.seed}

    @property
    def font(self) -> ImageFont.FreeTypeFont:
        """The font at its colour size, loaded once."""
        if self._font is None:
            if not self.font_path.is_file():
                raise FileNotFoundError(f"the emoji font {self.font_path} is missing. Install it with `apt-get install "
                                        "fonts-noto-color-emoji` (Debian) or pass data.source.font=... pointing at a "
                                        "colour emoji .ttf")
            self._font = ImageFont.truetype(str(self.font_path), FONT_SIZE)
        return self._font

    def splits(self) -> dict[str, list[ImageCaption]]:
        """{"train", "val", "test"} -> emoji records: exactly n_test test and n_val val emoji, the rest train."""
        return split_by_key(self.records(), self.n_val, self.n_test, self.seed, f"emoji drawn by {self.font_path}",
                            "images")

    def records(self) -> list[ImageCaption]:
        """Every fully-qualified emoji the font draws as a single visible glyph, sorted by key."""
        import emoji  # imported here so the other sources work without the package

        font = self.font
        single = font.getlength(REFERENCE) or FONT_SIZE
        records = []
        self.dropped = {"several glyphs": 0, "blank": 0}
        for text, data in emoji.EMOJI_DATA.items():
            if data["status"] != emoji.STATUS["fully_qualified"]:
                continue
            # without the ligature for a sequence (e.g. a newer ZWJ sequence) the font draws its parts side by side
            if font.getlength(text) > MAX_ADVANCE * single:
                self.dropped["several glyphs"] += 1
            elif render(font, text) is None:  # the font has no glyph: an empty .notdef
                self.dropped["blank"] += 1
            else:
                records.append(ImageCaption(key=emoji_key(text), captions=(readable_name(data["en"]),)))
        return sorted(records, key=lambda r: r.key)

    def load_image(self, record: ImageCaption) -> Image.Image:
        """The emoji on white, cropped to its glyph with a small margin and padded to a square."""
        img = render(self.font, emoji_text(record.key))
        if img is None:
            raise ImageReadError(f"emoji {record.key} ({record.captions[0]}) renders blank with {self.font_path}")
        return img


def render(font: ImageFont.FreeTypeFont, text: str) -> Image.Image | None:
    """``text`` drawn in colour on white, cropped to its ink plus a margin and padded square; None if blank."""
    left, top, right, bottom = font.getbbox(text)
    pad = font.size // 4
    x, y = pad - min(left, 0), pad - min(top, 0)  # room for glyphs reaching left of or above the origin
    canvas = Image.new("RGBA", (x + max(right, 1) + pad, y + max(bottom, 1) + pad), (255, 255, 255, 0))
    ImageDraw.Draw(canvas).text((x, y), text, font=font, embedded_color=True)
    ink = canvas.getchannel("A").getbbox()
    if ink is None:
        return None
    glyph = canvas.crop(ink)
    side = round(max(glyph.size) * (1 + 2 * MARGIN))
    square = Image.new("RGBA", (side, side), (255, 255, 255, 255))
    square.alpha_composite(glyph, ((side - glyph.width) // 2, (side - glyph.height) // 2))
    return square.convert("RGB")


def readable_name(name: str) -> str:
    """':grinning_face:' -> 'grinning face'."""
    return name.strip(":").replace("_", " ").strip()


def emoji_key(text: str) -> str:
    """'😀' -> 'U+1F600'; sequences join their code points with '-'."""
    return "-".join(f"U+{ord(c):04X}" for c in text)


def emoji_text(key: str) -> str:
    """'U+1F600' -> '😀', the inverse of emoji_key."""
    try:
        return "".join(chr(int(part.removeprefix("U+"), 16)) for part in key.split("-"))
    except ValueError as e:
        raise ImageReadError(f"{key!r} is not an emoji key like 'U+1F600' or 'U+1F468-U+200D-U+1F469'") from e
