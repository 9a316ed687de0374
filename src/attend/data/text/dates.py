"""Date normalisation pairs: a date written in a random locale and format -> ISO 8601."""

from __future__ import annotations

import datetime
import random
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from babel import Locale
from babel.dates import format_date

from attend.data.splitting import Pair
from attend.data.text.date_alignment import Span, date_pieces, iso_alignment

AlignedPair = tuple[str, str, list[Span | None]]  # (written date, ISO date, each ISO character's source span)

FIRST_DAY = datetime.date(1950, 1, 1)
N_DAYS = (datetime.date(2050, 1, 1) - FIRST_DAY).days  # 1950-01-01 .. 2049-12-31
DEFAULT_LOCALES = ("en_US", "en_GB", "de_DE", "fr_FR", "es_ES", "it_IT", "nl_NL", "pt_BR")
# CLDR styles plus patterns that read one way only (day-first with dots, spelled-out months)
DEFAULT_FORMATS = ("short", "medium", "long", "full", "d MMM y", "MMMM d, y", "EEEE d MMMM y", "dd.MM.y")


def normalize_spaces(text: str) -> str:
    """Single spaces between words: Babel may emit no-break and narrow spaces."""
    return " ".join(text.split())


@dataclass(frozen=True)
class WrittenDate:
    """One drawn example: a day, and the format and locale it is written in."""

    date: datetime.date
    format: str
    locale: Locale

    @cached_property
    def text(self) -> str:
        """The date as Babel writes it, spaces normalised."""
        return normalize_spaces(format_date(self.date, self.format, locale=self.locale))

    def pair(self) -> Pair:
        """(written date, ISO date)."""
        return self.text, self.date.isoformat()

    def alignment(self) -> list[Span | None]:
        """For each character of the ISO date, the [start, end) span of the written field it comes from."""
        pieces = date_pieces(self.date, self.format, self.locale)
        rebuilt = normalize_spaces("".join(text for text, _ in pieces))
        if rebuilt != self.text:  # the spans hold only if the rebuild is Babel's own text
            raise ValueError(f"rebuilt {rebuilt!r} differs from Babel's {self.text!r} ({self.format}, {self.locale})")
        return iso_alignment(pieces)


class DatePairs:
    """Synthetic (written date, ``YYYY-MM-DD``) pairs drawn uniformly from 1950-2049 with Babel; val and test dates
    are distinct days never in train (in any locale or format). Locales can collide (en_US ``3/5/61`` is 5 March in
    es_ES), as in real data: a small accuracy ceiling."""

    def __init__(self, n_train: int = 20000, n_val: int = 1000, n_test: int = 1000, seed: int = 1234,
                 locales: Sequence[str] = DEFAULT_LOCALES, formats: Sequence[str] = DEFAULT_FORMATS) -> None:
        if n_val + n_test >= N_DAYS:
            raise ValueError(f"n_val + n_test must leave training days: at most {N_DAYS - 1} in all")
        self.n_train = n_train
        self.n_val = n_val
        self.n_test = n_test
        self.seed = seed
        self.locales = [Locale.parse(name) for name in locales]
        self.formats = list(formats)

    def _draw(self, day: int, rng: random.Random) -> WrittenDate:
        date = FIRST_DAY + datetime.timedelta(days=day)
        return WrittenDate(date, rng.choice(self.formats), rng.choice(self.locales))  # format first, then locale

    def _draws(self) -> dict[str, list[WrittenDate]]:
        """{"train", "val", "test"} -> drawn dates; the held-out ones come first in the random stream."""
        rng = random.Random(self.seed)
        held_out = rng.sample(range(N_DAYS), self.n_val + self.n_test)
        test = [self._draw(day, rng) for day in held_out[: self.n_test]]
        val = [self._draw(day, rng) for day in held_out[self.n_test :]]
        taken = set(held_out)
        free_days = [day for day in range(N_DAYS) if day not in taken]
        held_out_texts = {written.text for written in test + val}
        train: list[WrittenDate] = []
        while len(train) < self.n_train:
            written = self._draw(rng.choice(free_days), rng)
            if written.text not in held_out_texts:  # e.g. an en_US and an es_ES short date that collide
                train.append(written)
        return {"train": train, "val": val, "test": test}

    def settings(self) -> dict:
        """What the pairs depend on (example-store keys): the constructor arguments."""
        return {"n_train": self.n_train, "n_val": self.n_val, "n_test": self.n_test, "seed": self.seed,
                "locales": [str(locale) for locale in self.locales], "formats": self.formats}

    def splits(self) -> dict[str, list[Pair] | list[AlignedPair]]:
        """{"train", "val", "test"} -> (written date, ISO date) pairs, in val and test with their alignment."""
        return {name: [w.pair() if name == "train" else (*w.pair(), w.alignment()) for w in drawn]
                for name, drawn in self._draws().items()}
