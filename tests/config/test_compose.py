"""compose_config: the entry points' configs composed outside a Hydra run (tests, scripts and benchmarks), with the
paths a run would give them."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra.errors import HydraException
from omegaconf import OmegaConf

from attend.config.compose import CONF_DIR, compose_config
from tests.helpers.paths import CONF, DATES, ROOT


def test_the_train_config_gets_the_checkout_and_the_run_folder(tmp_path):
    cfg = compose_config(["attention=dot"], output_dir=tmp_path)
    assert CONF_DIR == CONF and cfg.paths.root_dir == str(ROOT) and cfg.paths.output_dir == str(tmp_path)
    assert cfg.paths.cache_dir == f"{ROOT}/data_cache"  # interpolations of the given paths resolve
    assert cfg.attention._target_ == "attend.attention.DotAttention"  # the overrides apply
    assert "hydra" not in cfg  # the job never sees Hydra's own node
    OmegaConf.to_container(cfg, resolve=True)


def test_without_a_run_folder_each_call_gets_a_new_temporary_one():
    first, second = (Path(compose_config().paths.output_dir) for _ in range(2))
    try:
        assert first.is_dir() and second.is_dir() and first != second
        assert first.name.startswith("attend-train-")
    finally:
        first.rmdir()
        second.rmdir()


def test_paths_given_as_overrides_win(tmp_path):
    given = [f"paths.root_dir={tmp_path}", f"paths.output_dir={tmp_path / 'run'}"]
    cfg = compose_config(given, output_dir="/elsewhere")
    assert cfg.paths.root_dir == str(tmp_path) and cfg.paths.output_dir == str(tmp_path / "run")
    assert cfg.paths.cache_dir == f"{tmp_path}/data_cache"


def test_keep_hydra_keeps_the_choices_a_run_never_sees(tmp_path):
    cfg = compose_config(["task=caption", "decoder=luong"], output_dir=tmp_path, keep_hydra=True)
    assert cfg.hydra.runtime.choices.task == "caption" and cfg.hydra.runtime.choices.decoder == "luong"
    assert cfg.paths.output_dir == str(tmp_path)


@pytest.mark.parametrize("name", ["eval", "predict"])
def test_eval_and_predict_configs_compose_for_a_checkpoint(name, tmp_path):
    cfg = compose_config([f"ckpt_path={DATES}"], name, tmp_path)
    assert cfg.ckpt_path == str(DATES) and cfg.paths.output_dir == str(tmp_path)
    OmegaConf.to_container(cfg, resolve=True)


def test_an_unknown_choice_is_hydras_error_naming_it():
    with pytest.raises(HydraException, match="attention/nope"):
        compose_config(["attention=nope"], output_dir="/unused")


def test_a_temporary_run_folder_is_removed_at_exit_unless_something_was_written_there(tmp_path):
    """compose_config without an output folder makes a temporary one: a process that wrote nothing there leaves no
    empty folder behind in /tmp; one that wrote keeps its files."""
    import subprocess
    import sys

    script = ("import sys\nfrom attend.config.compose import compose_config\n"
              "empty, written = compose_config().paths.output_dir, compose_config().paths.output_dir\n"
              "open(written + '/kept.txt', 'w').write('x')\nprint(empty)\nprint(written)\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    empty, written = (Path(line) for line in result.stdout.split())
    assert not empty.exists() and (written / "kept.txt").is_file()
    (written / "kept.txt").unlink()
    written.rmdir()
