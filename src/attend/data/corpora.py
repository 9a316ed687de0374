"""Several corpora in one data set: each split is the concatenation of the sources' splits (real and synthetic
speech, two real corpora, several languages with one character vocabulary), each record tagged with its corpus."""

from __future__ import annotations

from typing import Any, NamedTuple

from attend.data.bad_samples import Skipped
from attend.data.store import source_settings


class Tagged(NamedTuple):
    """A record of one corpus: the records store keeps ``corpus`` as a column, the batches as a field."""

    corpus: str
    record: Any


class Corpora:
    """``sources`` by corpus name (``data.source.sources.<name>``); the order is the order of the records. A skipped
    item keeps its reason, its key prefixed by the corpus name."""

    def __init__(self, sources: dict[str, Any]) -> None:
        if not sources:
            raise ValueError("data.source.sources is empty: name at least one source, e.g. sources.asterisk={...}")
        self.sources = dict(sources)

    def settings(self) -> dict:
        """Each source's class and settings (with the stamps of the files they name), by corpus."""
        return {name: [type(source).__name__, source_settings(source)] for name, source in self.sources.items()}

    def iter_split(self, split: str):
        """The split's items corpus after corpus, without holding a streaming corpus in memory."""
        for name, source in self.sources.items():
            items = source.iter_split(split) if hasattr(source, "iter_split") else source.splits()[split]
            for item in items:
                if isinstance(item, Skipped):
                    yield item._replace(key=f"{name}/{item.key}")
                else:
                    yield Tagged(name, item)
