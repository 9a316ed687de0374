"""The test tree mirrors the package, read from the files (nothing is imported): every test module sits in the
folder of the room it tests (src/attend/<room>/..., or one of the folders for what is no package room), test modules
share code through tests/helpers/ and conftest.py fixtures, never by importing each other, and a config is composed
outside Hydra's entry point in one place only, attend.config.compose."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.helpers.paths import ROOT

TESTS = ROOT / "tests"
PACKAGE = ROOT / "src" / "attend"
# the folders for what no package room holds, and what each holds
OTHER_ROOMS = {
    "model": "the top-level modules: model, objective, reinforce, builder, layers, init, plots",
    "sweeps": "the sweepers (src/hydra_plugins) and multiruns",
    "scripts": "scripts/ and benchmarks/",
    "layout": "the layout of the package and of the tests",
}
NOT_TESTS = {"helpers", "fixtures"}  # what tests share, and their data
# composing a config outside Hydra's entry point: Hydra's compose API, which only attend.config.compose calls
COMPOSING = re.compile(
    r"\binitialize_config(_dir|_module)?\s*\(|\bhydra\.compose\s*\(|from hydra import [^\n]*\bcompose\b"
)


def all_test_files() -> list[Path]:
    return sorted(path for path in TESTS.rglob("test_*.py") if not NOT_TESTS & set(path.relative_to(TESTS).parts))


def python_files(*folders: Path) -> list[Path]:
    return sorted(path for folder in folders for path in folder.rglob("*.py") if "fixtures" not in path.parts)


def module_name(path: Path) -> str:
    """tests.run.test_entry_points for tests/run/test_entry_points.py."""
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def imported_test_modules(source: str, module: str) -> list[str]:
    """The test modules (and conftest modules) that ``source``, the code of ``module``, imports: at any depth,
    relative imports resolved against ``module``."""
    package = module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            tested = [i for i, part in enumerate(parts) if part.startswith("test_") or part == "conftest"]
            if parts[0] == "tests" and tested:
                found.add(".".join(parts[: tested[0] + 1]))
    return sorted(found)


def misplaced(relative: Path) -> str | None:
    """Why a test file at ``relative`` (under tests/) is not in a room's folder, or None."""
    folders = relative.parts[:-1]
    if not folders:
        return "a test file belongs in the folder of the room it tests, not in tests/ itself"
    if folders[0] in OTHER_ROOMS:
        return None if len(folders) == 1 else f"{folders[0]}/ has no subfolders"
    if not (PACKAGE.joinpath(*folders) / "__init__.py").is_file():
        room = "/".join(folders)
        return f"src/attend/{room} is no package: name a room of src/attend or one of {sorted(OTHER_ROOMS)}"
    return None


def test_no_test_module_imports_another():
    imports = {str(path.relative_to(ROOT)): imported_test_modules(path.read_text(encoding="utf-8"), module_name(path))
               for path in python_files(TESTS)}
    imports = {path: names for path, names in imports.items() if names}
    assert not imports, f"share code through tests/helpers/ or conftest.py fixtures, not test modules: {imports}"


def test_every_test_file_sits_in_the_folder_of_a_room():
    files = all_test_files()
    assert len(files) > 50 and {path.parent.name for path in files} >= {"attention", "data", "run", "layout"}
    wrong = {str(path.relative_to(TESTS)): misplaced(path.relative_to(TESTS)) for path in files}
    wrong = {path: why for path, why in wrong.items() if why}
    assert not wrong, wrong


def test_every_test_folder_is_a_package():
    """A package per folder: test modules of the same name in two folders would otherwise clash."""
    folders = {path.parent for path in all_test_files()} | {TESTS / "helpers"}
    folders |= {parent for folder in folders for parent in folder.parents if parent.is_relative_to(TESTS)}
    missing = sorted(str(folder.relative_to(ROOT)) for folder in folders if not (folder / "__init__.py").is_file())
    assert not missing, missing


def test_helpers_hold_no_tests():
    assert not list((TESTS / "helpers").rglob("test_*.py"))


def test_only_attend_config_compose_composes_a_config():
    """Hydra's compose API appears nowhere else: not in tests, scripts, benchmarks or the package (code in strings
    that a test or script runs in another process included)."""
    allowed = {PACKAGE / "config" / "compose.py", Path(__file__).resolve()}
    folders = (TESTS, ROOT / "scripts", ROOT / "benchmarks", ROOT / "src")
    composing = [str(path.relative_to(ROOT)) for path in python_files(*folders)
                 if path.resolve() not in allowed and COMPOSING.search(path.read_text(encoding="utf-8"))]
    assert not composing, f"compose configs with attend.config.compose.compose_config: {composing}"


@pytest.mark.parametrize("relative, wrong", [
    ("test_attention.py", True),
    ("attention/test_additive.py", False),
    ("data/audio/test_audio_datamodule.py", False),
    ("data/sounds/test_x.py", True),
    ("model/test_loss.py", False),
    ("model/extra/test_loss.py", True),
    ("plots/test_heads.py", True),
])
def test_a_misplaced_test_file_is_named(relative, wrong):
    assert (misplaced(Path(relative)) is not None) == wrong


@pytest.mark.parametrize("source, imported", [
    ("from tests.run.test_entry_points import run", ["tests.run.test_entry_points"]),
    ("import tests.search.test_search", ["tests.search.test_search"]),
    ("from .test_config import options", ["tests.config.test_config"]),
    ("from . import test_config", ["tests.config.test_config"]),
    ("def f():\n    from tests.conftest import ROOT", ["tests.conftest"]),
    ("from tests.helpers.entry_points import run\nfrom tests.helpers import audio", []),
])
def test_an_import_of_a_test_module_is_found(source, imported):
    assert imported_test_modules(source, "tests.config.test_example") == imported


@pytest.mark.parametrize("source, composes", [
    ("with initialize_config_dir(config_dir=conf, version_base='1.3'):", True),
    ("from hydra import compose, initialize_config_dir", True),
    ("cfg = hydra.compose('train')", True),
    ("with initialize_config(config_path='conf'):", True),
    ("from attend.config.compose import compose_config\ncfg = compose_config(['task=mt'])", False),
])
def test_composing_outside_compose_py_is_found(source, composes):
    assert bool(COMPOSING.search(source)) == composes
