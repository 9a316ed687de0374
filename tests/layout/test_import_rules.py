"""The rooms import downwards only, read from the source with ``ast`` (nothing is imported). From the ground up:
``attend.config`` (ConfigError, the start-up checks, renamed options) and ``attend.ranks`` import no other room;
the data modules know nothing of metrics, the model, the plots or any room of the harness; the builder nothing of
the harness; ``attend.checkpoints`` nothing of the callbacks, loggers or entry points; the callbacks nothing of the
loggers or entry points; the loggers nothing of the entry points (``attend.run``, on top). What data and metrics
share (``caption_tokens``) imports neither."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.helpers.paths import ROOT

PACKAGE = ROOT / "src" / "attend"
HARNESS = ("attend.checkpoints", "attend.callbacks", "attend.loggers", "attend.run")
# every room of the package, for the ground floor's rule: a top-level module or package under src/attend
ROOMS = tuple(sorted(f"attend.{path.stem}" for path in PACKAGE.iterdir()
                     if path.name != "__init__.py" and (path.suffix == ".py" or (path / "__init__.py").is_file())))
# a module (and everything under it) -> the packages it must not import from
RULES = {
    "attend.config": tuple(room for room in ROOMS if room != "attend.config"),
    "attend.ranks": tuple(room for room in ROOMS if room != "attend.ranks"),
    "attend.data": ("attend.metrics", "attend.model", "attend.plots", *HARNESS),
    "attend.builder": HARNESS,
    "attend.model": HARNESS,
    "attend.checkpoints": ("attend.callbacks", "attend.loggers", "attend.run"),
    "attend.callbacks": ("attend.loggers", "attend.run"),
    "attend.loggers": ("attend.run",),
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
    assert {"attend.builder", "attend.caption_tokens", "attend.ranks"} <= names
    for room in ("attend.data", "attend.config", "attend.checkpoints", "attend.callbacks", "attend.loggers"):
        assert any(within(name, room) for name in names), room
    assert {"attend.config", "attend.checkpoints", "attend.callbacks", "attend.loggers", "attend.run"} <= set(ROOMS)


@pytest.mark.parametrize(
    "module, source",
    [
        ("attend.data.unseen", "from attend.metrics.caption import caption_tokens"),
        ("attend.data.text.dates", "import attend.checkpoints.saved_run"),
        ("attend.data.images.pixels", "def f():\n    from attend.callbacks import AttentionPlots"),
        ("attend.data.images.pixels", "from attend.plots import image_attention"),
        ("attend.data.store", "if TYPE_CHECKING:\n    from attend.model import Seq2Seq"),
        ("attend.data.text.dates", "from ...metrics import BLEU"),  # relative: attend.metrics
        ("attend.data.text.dates", "from ... import model"),  # attend.model
        ("attend.builder", "from attend.run.train import build_trainer"),
        ("attend.builder", "from .run import config_checks"),
        ("attend.caption_tokens", "from attend.metrics.caption import CaptionBLEU"),
        ("attend.config.checks", "from attend.data.modality import Modality"),
        ("attend.ranks", "from attend.config.errors import ConfigError"),
        ("attend.checkpoints.averaging", "from attend.callbacks.keep_for_averaging import KeepForAveraging"),
        ("attend.callbacks.run_summary", "from attend.run.context import run_context"),
        ("attend.callbacks.wandb_run_id", "from attend.loggers.wandb_run import WandbLogger"),
        ("attend.loggers.wandb_run", "from attend.run.train import train"),
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
        ("attend.callbacks.keep_for_averaging", "from attend.checkpoints.averaging import read_kept"),
        ("attend.loggers.wandb_run", "from attend.callbacks.wandb_run_id import CHECKPOINT_KEY"),
        ("attend.checkpoints.saved_run", "from attend.config.errors import ConfigError\nfrom attend.builder import x"),
    ],
)
def test_imports_the_rules_allow_pass(module, source):
    assert not broken_rules(source, module)
