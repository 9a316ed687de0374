"""Follow eval.py's config through ``evaluate``: every Attend function that receives it (or a node of it), in call
order, the modules those stops are in, and how often the path turns back to a module it had left (issue 40's
measure of how scattered a checkpoint's config handling is).

    .venv/bin/python scripts/follow_cfg.py [ckpt_path] [eval.py overrides]

ckpt_path defaults to the dates checkpoint of tests/fixtures/old_checkpoints/. Prints one stop a line, then
``stops N modules M turns back T``."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from omegaconf import DictConfig

from attend.config.compose import ROOT, compose_config
from attend.run.evaluate import evaluate

DATES = ROOT / "tests" / "fixtures" / "old_checkpoints" / "dates.ckpt"


def node_ids(node: DictConfig) -> set[int]:
    """The ids of ``node`` and every config node under it."""
    ids = {id(node)}
    for key in node:
        child = node._get_node(key)
        if isinstance(child, DictConfig):
            ids |= node_ids(child)
    return ids


def followed(cfg: DictConfig) -> list[str]:
    """``module.function`` of every Attend call during ``evaluate(cfg)`` that receives cfg or one of its nodes."""
    ids, stops = node_ids(cfg), []

    def tracer(frame, event, arg):
        module = frame.f_globals.get("__name__", "")
        if event == "call" and module.startswith("attend"):
            code = frame.f_code
            names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
            if any(id(frame.f_locals.get(name)) in ids for name in names):
                stops.append(f"{module}.{code.co_name}")
        return None

    sys.settrace(tracer)
    try:
        evaluate(cfg)
    finally:
        sys.settrace(None)
    return stops


def turns_back(modules: list[str]) -> int:
    """How often the path enters a module it had already left."""
    seen: set[str] = set()
    turns, previous = 0, None
    for module in modules:
        if module != previous:
            turns += module in seen
            seen.add(module)
            previous = module
    return turns


def main() -> None:
    args = sys.argv[1:]
    ckpt = args.pop(0) if args and "=" not in args[0] else str(DATES)
    with tempfile.TemporaryDirectory() as folder:
        cfg = compose_config([f"ckpt_path={ckpt}", "accelerator=cpu", "num_plots=0", *args], "eval", Path(folder))
        stops = followed(cfg)
    modules = [stop.rsplit(".", 1)[0] for stop in stops]
    print("\n".join(stops))
    print(f"stops {len(stops)} modules {len(set(modules))} turns back {turns_back(modules)}")


if __name__ == "__main__":
    main()
