"""One self-contained HTML page per input: the page data inside, the script inside, nothing fetched (it opens
offline, from a file, a W&B panel or the local server)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

TEMPLATE = Path(__file__).with_name("page.html")
DATA_SLOT = "/*DATA*/null"


@cache
def template() -> str:
    return TEMPLATE.read_text(encoding="utf-8")


def explorer_page(data: dict) -> str:
    """The page for one input's data (``attend.explore.pages.explore_batch``)."""
    # "</" would end the script element early; "<\/" is the same JSON string
    return template().replace(DATA_SLOT, json.dumps(data, allow_nan=False).replace("</", "<\\/"))


def write_pages(pages: list[dict], folder: Path, stem: str, first: int = 0) -> list[Path]:
    """Each page as ``folder/<stem>_<first + N>.html``; returns the paths."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, data in enumerate(pages):
        path = folder / f"{stem}_{first + i}.html"
        path.write_text(explorer_page(data), encoding="utf-8")
        paths.append(path)
    return paths
