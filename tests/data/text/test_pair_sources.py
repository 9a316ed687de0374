"""Pair sources: the Ding dictionary, synthetic dates, line-aligned parallel text."""

from __future__ import annotations

import datetime
import time
from pathlib import Path

import pytest

from attend.data import DatePairs, DingNotFoundError, DingPairs, ParallelText, ParallelTextError
from attend.data.bad_samples import Skipped
from attend.data.text.ding import DING_PATH
from attend.data.text.ding_format import clean, parse_ding
from tests.helpers.paths import FIXTURES

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


def test_ding_split_and_direction_write_no_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # where a relative cache folder would go
    source = DingPairs(path=DING_SAMPLE, n_val=3, n_test=4, seed=7)
    splits = source.splits()
    assert [len(splits[s]) for s in ("train", "val", "test")] == [14, 3, 4]
    assert set().union(*map(set, splits.values())) == SAMPLE_SENTENCES
    assert not texts(splits["train"]) & texts(splits["val"] + splits["test"])
    assert source.splits() == splits
    swapped = DingPairs(path=DING_SAMPLE, direction="en-de", n_val=3, n_test=4, seed=7)
    assert swapped.splits()["test"] == [(en, de) for de, en in splits["test"]]
    other_seed = DingPairs(path=DING_SAMPLE, n_val=3, n_test=4, seed=8)
    assert other_seed.splits()["test"] != splits["test"]
    assert other_seed.settings() != source.settings() and swapped.settings() != source.settings()
    assert not list(tmp_path.iterdir())  # the example store is the only cache


def test_ding_extra_phrases_exclude_held_out_text(tmp_path: Path) -> None:
    plain = DingPairs(path=DING_SAMPLE, n_val=8, n_test=8, seed=3).splits()
    extra = DingPairs(path=DING_SAMPLE, n_val=8, n_test=8, seed=3, extra_phrases=True).splits()
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
            path=DING_SAMPLE, n_val=4, n_test=4, seed=seed, extra_phrases=True, max_extra_phrases=limit
        ).splits()["train"]

    everything, plain = train(3, None), DingPairs(path=DING_SAMPLE, n_val=4, n_test=4, seed=3)
    sentences = plain.splits()["train"]
    subset = train(3, 2)
    assert subset[: len(sentences)] == sentences  # every sentence stays
    added = subset[len(sentences) :]
    assert len(added) == 2 and set(added) <= set(everything[len(sentences) :])
    assert train(3, 2) == subset  # the same seed picks the same phrases
    assert train(3, 10_000) == everything


def test_ding_missing_file_says_how_to_get_it(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="apt-get install trans-de-en") as error:
        DingPairs(path=tmp_path / "de-en").splits()
    assert isinstance(error.value, DingNotFoundError) and "make install" in str(error.value)


@pytest.mark.skipif(not Path(DING_PATH).is_file(), reason=f"{DING_PATH} absent: apt-get install trans-de-en")
def test_ding_real_dictionary() -> None:
    splits = DingPairs().splits()
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
    assert {len(item) for item in splits["train"]} == {2}  # (written, iso); val and test add the alignment
    assert {len(item) for item in splits["val"] + splits["test"]} == {3}
    for written, iso, *_ in splits["train"][:2000] + splits["val"] + splits["test"]:
        day = datetime.date.fromisoformat(iso)
        assert iso == day.isoformat() and 1950 <= day.year <= 2049 and written.strip() == written
    train_dates = {iso for _, iso in splits["train"]}
    held_out = [item[1] for item in splits["val"] + splits["test"]]
    assert len(set(held_out)) == 2000 and not train_dates & set(held_out)
    assert not {w for w, _ in splits["train"]} & {item[0] for item in splits["val"] + splits["test"]}
    assert len({item[0] for item in splits["test"]}) > 990  # many locales and formats
    assert (
        DatePairs(n_train=50, n_val=5, n_test=5, locales=["de_DE"]).splits()
        == DatePairs(n_train=50, n_val=5, n_test=5, locales=["de_DE"]).splits()
    )


# parallel text ----------------------------------------------------------------------------------
def pairs(items: list) -> list[tuple[str, str]]:
    return [item for item in items if not isinstance(item, Skipped)]


def test_parallel_text_fixture_yields_its_blank_line_as_skipped() -> None:
    source = ParallelText(MULTI30K)
    splits = source.splits()
    assert [len(pairs(splits[s])) for s in ("train", "val", "test")] == [30, 5, 5]
    assert splits["train"][15] == Skipped(f"{MULTI30K / 'train.de'}:16", "empty line", "the line is empty")
    assert [item for item in splits["train"] if isinstance(item, Skipped)] == [splits["train"][15]]
    assert not hasattr(source, "bad_samples")
    assert splits["test"][0] == ("Eine Giraffe frisst Blätter.", "A giraffe eats leaves.")
    reversed_ = ParallelText(MULTI30K, src_lang="en", tgt_lang="de").splits()
    assert reversed_["val"][0] == splits["val"][0][::-1]
    assert reversed_["train"][15].key == f"{MULTI30K / 'train.en'}:16"  # the source side is checked first


def write(path: Path, lines: list[str] | bytes) -> None:
    path.write_bytes(lines if isinstance(lines, bytes) else "".join(f"{x}\n" for x in lines).encode())


def test_parallel_text_bad_lines_are_skipped_items_in_source_order(tmp_path: Path) -> None:
    for split in ("train", "val", "test"):
        write(tmp_path / f"{split}.de", ["Hallo Welt."])
        write(tmp_path / f"{split}.en", ["Hello world."])
    write(tmp_path / "train.de", "Eins.\n\nGr\xfc\xdfe.\n   \nDrei.\nVier.\n".encode("latin-1"))
    write(tmp_path / "train.en", ["One.", "Two.", "Greetings.", "Three?", "Three.", ""])
    de, en = tmp_path / "train.de", tmp_path / "train.en"
    expected = [
        ("Eins.", "One."),
        Skipped(f"{de}:2", "empty line", "the line is empty"),
        Skipped(f"{de}:3", "invalid UTF-8", "not valid UTF-8 (invalid start byte); re-save the file as UTF-8"),
        Skipped(f"{de}:4", "empty line", "the line is only whitespace"),
        ("Drei.", "Three."),
        Skipped(f"{en}:6", "empty line", "the line is empty"),  # the target side is checked too
    ]
    source = ParallelText(tmp_path)
    assert source.splits()["train"] == expected
    assert list(source.iter_split("train")) == expected  # the stream gives the same items


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
    (tmp_path / "test.de").unlink()
    with pytest.raises(FileNotFoundError, match="test.de not found"):
        ParallelText(tmp_path).splits()
