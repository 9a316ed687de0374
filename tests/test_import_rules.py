"""The layers import downwards only, read from the source with ``ast`` (nothing is imported): the data modules
know nothing of metrics, the run harness, callbacks or the model, the builder nothing of the run harness
(which sits above it: its config checks and entry points call the builder), and what data and metrics share
(``caption_tokens``) nothing of either."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import ROOT

PACKAGE = ROOT / "src" / "attend"
# a module (and everything under it) -> the packages it must not import from
RULES = {
    "attend.data": ("attend.metrics", "attend.run", "attend.callbacks", "attend.model"),
    "attend.builder": ("attend.run",),
    "attend.caption_tokens": ("attend.data", "attend.metrics"),  # below both, which share it
}


def module_name(path: Path) -> str:
    """attend.data.text.dates for src/attend/data/text/dates.py; a package's __init__.py is the package."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(source: str, module: str, is_package: bool = False) -> set[str]:
    """Every dotted name ``source`` imports, at any depth (inside functions and TYPE_CHECKING blocks too),
    relative imports resolved against ``module``: ``from a import b`` gives a and a.b."""
    package = module if is_package else module.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            names |= {base} | {f"{base}.{alias.name}" for alias in node.names}
    return names


def broken_rules(source: str, module: str, is_package: bool = False) -> list[str]:
    """``module imports name`` for each import that a rule forbids ``module``."""
    forbidden = [banned for owner, bans in RULES.items() if within(module, owner) for banned in bans]
    return sorted(
        f"{module} imports {name}"
        for name in imported(source, module, is_package)
        if any(within(name, banned) for banned in forbidden)
    )


def within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_the_layers_import_downwards_only():
    broken = [
        rule
        for path in sources()
        for rule in broken_rules(path.read_text(encoding="utf-8"), module_name(path), path.name == "__init__.py")
    ]
    assert not broken, "imports against the layering:\n" + "\n".join(broken)


def test_the_rules_cover_real_modules():
    names = {module_name(path) for path in sources()}
    assert {"attend.builder", "attend.caption_tokens"} <= names and any(within(name, "attend.data") for name in names)


@pytest.mark.parametrize(
    "module, source",
    [
        ("attend.data.unseen", "from attend.metrics.caption import caption_tokens"),
        ("attend.data.text.dates", "import attend.run.checkpoint"),
        ("attend.data.images.pixels", "def f():\n    from attend.callbacks import AttentionPlots"),
        ("attend.data.store", "if TYPE_CHECKING:\n    from attend.model import Seq2Seq"),
        ("attend.data.text.dates", "from ...metrics import BLEU"),  # relative: attend.metrics
        ("attend.data.text.dates", "from ... import model"),  # attend.model
        ("attend.builder", "from attend.run.config_checks import ConfigError"),
        ("attend.builder", "from .run import config_checks"),
        ("attend.caption_tokens", "from attend.metrics.caption import CaptionBLEU"),
    ],
)
def test_an_import_against_the_rules_is_caught(module, source):
    assert broken_rules(source, module)


@pytest.mark.parametrize(
    "module, source",
    [
        ("attend.data.unseen", "from attend.caption_tokens import caption_tokens"),
        ("attend.data.text.dates", "from ..tokenizers import CharTokenizer\nimport attend.memory"),
        ("attend.data.store", "from attend.metrics_helpers import x"),  # a name that only starts the same
        ("attend.run.evaluate", "from attend.builder import build_model\nfrom attend.metrics import BLEU"),
        ("attend.builder", "from attend.model import Seq2Seq"),
    ],
)
def test_imports_the_rules_allow_pass(module, source):
    assert not broken_rules(source, module)
