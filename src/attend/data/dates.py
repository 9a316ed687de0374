"""Date normalisation pairs: a date written in a random locale and format -> ISO 8601."""

from __future__ import annotations

import datetime
import random
from collections.abc import Sequence

from babel import Locale
from babel.dates import format_date

from attend.data.splitting import Pair

FIRST_DAY = datetime.date(1950, 1, 1)
N_DAYS = (datetime.date(2050, 1, 1) - FIRST_DAY).days  # 1950-01-01 .. 2049-12-31
DEFAULT_LOCALES = ("en_US", "en_GB", "de_DE", "fr_FR", "es_ES", "it_IT", "nl_NL", "pt_BR")
# CLDR styles plus patterns that read one way only (day-first with dots, spelled-out months)
DEFAULT_FORMATS = ("short", "medium", "long", "full", "d MMM y", "MMMM d, y", "EEEE d MMMM y", "dd.MM.y")


class DatePairs:
    """Synthetic (written date, ``YYYY-MM-DD``) pairs drawn uniformly from 1950-2049 with Babel.

    Val and test dates are distinct days that never occur in train (in any locale or format);
    training dates are drawn from the remaining days, so ``n_train`` may exceed their number.
    Two-digit years are unambiguous in this century window. Locale conventions themselves can
    collide (en_US ``3/5/61`` is 5 March in es_ES), as in real data: a small accuracy ceiling.
    """

    def __init__(
        self,
        n_train: int = 20000,
        n_val: int = 1000,
        n_test: int = 1000,
        seed: int = 1234,
        locales: Sequence[str] = DEFAULT_LOCALES,
        formats: Sequence[str] = DEFAULT_FORMATS,
    ) -> None:
        if n_val + n_test >= N_DAYS:
            raise ValueError(f"n_val + n_test must leave training days: at most {N_DAYS - 1} in all")
        self.n_train = n_train
        self.n_val = n_val
        self.n_test = n_test
        self.seed = seed
        self.locales = [Locale.parse(name) for name in locales]
        self.formats = list(formats)

    def _written(self, day: int, rng: random.Random) -> Pair:
        date = FIRST_DAY + datetime.timedelta(days=day)
        text = format_date(date, rng.choice(self.formats), locale=rng.choice(self.locales))
        return " ".join(text.split()), date.isoformat()  # Babel may emit no-break spaces

    def splits(self) -> dict[str, list[Pair]]:
        """{"train", "val", "test"} -> (written date, ISO date) pairs."""
        rng = random.Random(self.seed)
        held_out = rng.sample(range(N_DAYS), self.n_val + self.n_test)
        test = [self._written(day, rng) for day in held_out[: self.n_test]]
        val = [self._written(day, rng) for day in held_out[self.n_test :]]
        taken = set(held_out)
        free_days = [day for day in range(N_DAYS) if day not in taken]
        held_out_texts = {src for src, _ in test + val}
        train: list[Pair] = []
        while len(train) < self.n_train:
            pair = self._written(rng.choice(free_days), rng)
            if pair[0] not in held_out_texts:  # e.g. an en_US and an es_ES short date that collide
                train.append(pair)
        return {"train": train, "val": val, "test": test}
