"""Pair sources: the Ding dictionary, synthetic dates, line-aligned parallel text."""

from __future__ import annotations

import datetime
import logging
import time
from pathlib import Path

import pytest

from attend.data import DatePairs, DingNotFoundError, DingPairs, ParallelText, ParallelTextError
from attend.data.bad_samples import BadSamples, DataError
from attend.data.text.ding import DING_PATH
from attend.data.text.ding_format import clean, parse_ding

FIXTURES = Path(__file__).parent / "fixtures"
DING_SAMPLE = FIXTURES / "ding_sample.txt"
MULTI30K = FIXTURES / "multi30k"

SAMPLE_SENTENCES = {
    ("Der Abend war sehr schön.", "The evening was very nice."),
    ("Das Haus ist alt.", "The house is old."),
    ("Das Haus ist alt.", "The building is old."),
    ("Wir wohnen in einem kleinen Haus.", "We live in a small house."),
    ("Der Hund bellt laut.", "The dog barks loudly."),
    ("Noch ist nicht aller Tage Abend.", "It's not over until it's over."),
    ("Wie spät ist es?", "What time is it?"),
    ("Sie kam spät an.", "She arrived late."),
    ("Er liest jeden Tag die Zeitung.", "He reads the newspaper every day."),
    ("Ich habe Hunger.", "I'm hungry."),
    ("Vielen Dank für Ihre Hilfe!", "Thank you very much for your help!"),
    ("Das Wetter ist heute schön.", "The weather is nice today."),
    ("Morgen regnet es wieder.", "Tomorrow it will rain again."),
    ("Wo ist der Bahnhof?", "Where is the station?"),
    ("Sie liest ein spannendes Buch.", "She is reading an exciting book."),
    ("Wir gehen nach Hause.", "We are going home."),
    ("Ich trinke gern Kaffee.", "I like drinking coffee."),
    ("Es regnet seit Tagen.", "It has been raining for days."),
    ("Die Schule beginnt um acht Uhr.", "School starts at eight o'clock."),
    ("Der Zug hat Verspätung.", "The train is late."),
    ("Kinder spielen im Garten.", "Children play in the garden."),
}


def texts(pairs: list[tuple[str, str]]) -> set[str]:
    return {text for pair in pairs for text in pair}


# Ding -------------------------------------------------------------------------------------------
def test_ding_clean_and_parse() -> None:
    assert clean("Haus {n} [arch.]  (alt) <Häuser>") == "Haus"
    assert clean("Sie kam (mit dem Zug (aus Berlin)) spät an.") == "Sie kam spät an."
    with open(DING_SAMPLE, encoding="utf-8") as f:
        entries = parse_ding(f)
    assert set(entries.sentences) == SAMPLE_SENTENCES and len(entries.sentences) == 21
    phrases = set(entries.phrases)
    assert {("Hund", "dog"), ("Hunde", "dogs"), ("Bahnhof", "railway station")} <= phrases
    assert ("Abdrücken verboten!", "No humping!") in phrases  # two words: not a sentence
    assert ("Ein- und Ausgang", "entrance and exit") in phrases
    assert not any("Katze" in de for de, _ in entries.sentences + entries.phrases)  # 3 vs 2 sub-entries
    assert not any("/" in de + en for de, en in entries.sentences + entries.phrases)  # inline alternatives
    assert len(phrases) == len(entries.phrases) == 21


def test_ding_split_direction_and_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = DingPairs(path=DING_SAMPLE, n_val=3, n_test=4, seed=7, cache_dir=tmp_path)
    splits = source.splits()
    assert [len(splits[s]) for s in ("train", "val", "test")] == [14, 3, 4]
    assert set().union(*map(set, splits.values())) == SAMPLE_SENTENCES
    assert not texts(splits["train"]) & texts(splits["val"] + splits["test"])
    assert source.cache_path().exists()

    monkeypatch.setattr(DingPairs, "build", lambda self: pytest.fail("the cache should have been used"))
    assert source.splits() == splits
    swapped = DingPairs(path=DING_SAMPLE, direction="en-de", n_val=3, n_test=4, seed=7, cache_dir=tmp_path)
    assert swapped.splits()["test"] == [(en, de) for de, en in splits["test"]]
    monkeypatch.undo()
    other_seed = DingPairs(path=DING_SAMPLE, n_val=3, n_test=4, seed=8, cache_dir=tmp_path)
    assert other_seed.cache_path() != source.cache_path()
    assert other_seed.splits()["test"] != splits["test"]


def test_ding_extra_phrases_exclude_held_out_text(tmp_path: Path) -> None:
    plain = DingPairs(path=DING_SAMPLE, n_val=8, n_test=8, seed=3, cache_dir=None).splits()
    extra = DingPairs(
        path=DING_SAMPLE, n_val=8, n_test=8, seed=3, extra_phrases=True, cache_dir=None
    ).splits()
    assert extra["val"] == plain["val"] and extra["test"] == plain["test"]
    assert extra["train"][: len(plain["train"])] == plain["train"]
    added = extra["train"][len(plain["train"]) :]
    held_out = texts(plain["val"] + plain["test"])
    assert not texts(added) & held_out
    with open(DING_SAMPLE, encoding="utf-8") as f:
        phrases = parse_ding(f).phrases
    excluded = [p for p in phrases if p[0] in held_out or p[1] in held_out]
    assert excluded and len(added) == len(phrases) - len(excluded)


def test_ding_max_extra_phrases_keeps_a_seeded_subset() -> None:
    def train(seed: int, limit: int | None) -> list:
        return DingPairs(
            path=DING_SAMPLE, n_val=4, n_test=4, seed=seed, extra_phrases=True, max_extra_phrases=limit, cache_dir=None
        ).splits()["train"]

    everything, plain = train(3, None), DingPairs(path=DING_SAMPLE, n_val=4, n_test=4, seed=3, cache_dir=None)
    sentences = plain.splits()["train"]
    subset = train(3, 2)
    assert subset[: len(sentences)] == sentences  # every sentence stays
    added = subset[len(sentences) :]
    assert len(added) == 2 and set(added) <= set(everything[len(sentences) :])
    assert train(3, 2) == subset  # the same seed picks the same phrases
    assert train(3, 10_000) == everything


def test_ding_missing_file_says_how_to_get_it(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="apt-get install trans-de-en") as error:
        DingPairs(path=tmp_path / "de-en", cache_dir=tmp_path).splits()
    assert isinstance(error.value, DingNotFoundError) and "make install" in str(error.value)


@pytest.mark.skipif(not Path(DING_PATH).is_file(), reason=f"{DING_PATH} absent: apt-get install trans-de-en")
def test_ding_real_dictionary(tmp_path: Path) -> None:
    splits = DingPairs(cache_dir=tmp_path).splits()
    total = sum(len(pairs) for pairs in splits.values())
    assert 17_500 <= total <= 18_300, total
    assert len(splits["val"]) == len(splits["test"]) == 1000
    assert not texts(splits["train"]) & texts(splits["val"] + splits["test"])


# dates ------------------------------------------------------------------------------------------
def test_dates_iso_targets_and_disjoint_splits() -> None:
    started = time.perf_counter()
    splits = DatePairs().splits()
    assert time.perf_counter() - started < 5
    assert [len(splits[s]) for s in ("train", "val", "test")] == [20000, 1000, 1000]
    for written, iso in splits["train"][:2000] + splits["val"] + splits["test"]:
        day = datetime.date.fromisoformat(iso)
        assert iso == day.isoformat() and 1950 <= day.year <= 2049 and written.strip() == written
    train_dates = {iso for _, iso in splits["train"]}
    held_out = [iso for _, iso in splits["val"] + splits["test"]]
    assert len(set(held_out)) == 2000 and not train_dates & set(held_out)
    assert not {w for w, _ in splits["train"]} & {w for w, _ in splits["val"] + splits["test"]}
    assert len({w for w, _ in splits["test"]}) > 990  # many locales and formats
    assert (
        DatePairs(n_train=50, n_val=5, n_test=5, locales=["de_DE"]).splits()
        == DatePairs(n_train=50, n_val=5, n_test=5, locales=["de_DE"]).splits()
    )


# parallel text ----------------------------------------------------------------------------------
def test_parallel_text_fixture_skips_blank_lines(caplog: pytest.LogCaptureFixture) -> None:
    source = ParallelText(MULTI30K)
    with caplog.at_level(logging.WARNING, logger="attend.data"):
        splits = source.splits()
    assert [len(splits[s]) for s in ("train", "val", "test")] == [30, 5, 5]
    assert source.skipped == {"train": 1, "val": 0, "test": 0}
    assert "skipped 1 of 31 pairs" in caplog.text
    assert splits["test"][0] == ("Eine Giraffe frisst Blätter.", "A giraffe eats leaves.")
    reversed_ = ParallelText(MULTI30K, src_lang="en", tgt_lang="de").splits()
    assert reversed_["val"][0] == splits["val"][0][::-1]


def write(path: Path, lines: list[str] | bytes) -> None:
    path.write_bytes(lines if isinstance(lines, bytes) else "".join(f"{x}\n" for x in lines).encode())


def test_parallel_text_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="Multi30k") as missing:
        ParallelText(tmp_path / "nowhere").splits()
    assert str(tmp_path / "nowhere") in str(missing.value)
    for split in ("train", "val", "test"):
        write(tmp_path / f"{split}.de", ["Hallo Welt.", "Guten Tag."])
        write(tmp_path / f"{split}.en", ["Hello world.", "Good day."])
    write(tmp_path / "val.en", ["Hello world."])
    with pytest.raises(ParallelTextError, match="val.de has 2 lines but .*val.en has 1"):
        ParallelText(tmp_path).splits()
    write(tmp_path / "val.en", ["Hello world.", "Good day."])
    write(tmp_path / "test.de", "Hallo.\nGr\xfc\xdfe.\n".encode("latin-1"))
    source = ParallelText(tmp_path)
    source.bad_samples = BadSamples(on_error="raise")
    with pytest.raises(DataError, match=r"test\.de:2: not valid UTF-8"):
        source.splits()
    source.bad_samples = BadSamples(max_skip_fraction=0.5)  # the bad line alone is skipped
    assert source.splits()["test"] == [("Hallo.", "Hello world.")] and source.skipped["test"] == 1
    (tmp_path / "test.de").unlink()
    with pytest.raises(FileNotFoundError, match="test.de not found"):
        ParallelText(tmp_path).splits()
