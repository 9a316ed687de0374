"""Start-up type checks: each option of a ``_target_`` node must fit the type its class's ``__init__``
declares (an int for ``encoder.hidden_size``, a float for ``optim.optimizer.lr``), named by its key."""

from __future__ import annotations

import importlib
import re
import types
import typing
from typing import Any, Literal, Union

from omegaconf import DictConfig, ListConfig, OmegaConf

# what an option's value may be, per simple declared type (an int is a fine float; a bool is no int here)
ACCEPTS = {int: (int,), float: (int, float), str: (str,), bool: (bool,)}
GROUPS = ("data", "encoder", "attention", "decoder", "model", "optim", "trainer")


def type_errors(cfg: DictConfig) -> list[str]:
    """One message per option whose value does not fit its declared type, over the run's groups."""
    errors: list[str] = []
    for group in GROUPS:
        node = cfg.get(group)
        if isinstance(node, DictConfig):
            errors += node_errors(node, group)
    return errors


def node_errors(node: DictConfig, key: str) -> list[str]:
    """Check ``node`` against its ``_target_``'s signature, then every nested node."""
    errors: list[str] = []
    hints = declared_types(node.get("_target_")) if "_target_" in node else {}
    for name in node:
        name = str(name)
        if name.startswith("_"):
            continue
        child = node._get_node(name)
        if isinstance(child, DictConfig):
            errors += node_errors(child, f"{key}.{name}")
            continue
        if name not in hints or isinstance(child, ListConfig):
            continue
        value, fix = option_value(node, name, f"{key}.{name}")
        if isinstance(value, (DictConfig, ListConfig)) or value is UNRESOLVED:
            continue  # a node is checked where it stands
        if typing.get_origin(hints[name]) is Literal:  # one of named choices, e.g. model.init
            choices = typing.get_args(hints[name])
            if value not in choices:
                listed = ", ".join(map(str, choices))
                errors.append(f"{key}.{name} must be one of {listed}, not {value!r}: set {fix}=<{listed}>")
            continue
        expected = allowed_types(hints[name])
        if expected is not None and not isinstance(value, expected):
            names = type_names(expected)
            errors.append(f"{key}.{name} must be {names}, not {value!r}: set {fix}=<{names}>")
    return errors


UNRESOLVED = object()
SIMPLE_INTERPOLATION = re.compile(r"^\$\{([\w.]+)\}$")


def option_value(node: DictConfig, name: str, key: str) -> tuple[Any, str]:
    """The option's value and the key a user sets to change it: its own, or for ``${decoding.beam_size}`` the
    key it points at (the searches read the task's ``decoding`` node). UNRESOLVED when it cannot resolve here
    (a resolver that needs Hydra's runtime)."""
    if not OmegaConf.is_interpolation(node, name):
        return node._get_node(name)._value(), key
    pointed = SIMPLE_INTERPOLATION.match(str(node._get_node(name)._value()))
    try:
        value = node[name]
    except Exception:
        return UNRESOLVED, key
    return value, pointed.group(1) if pointed else key


def declared_types(target: Any) -> dict[str, Any]:
    """The annotated parameters of ``target`` (a class's ``__init__`` or a function); none when unreadable."""
    module_name, _, name = str(target).rpartition(".")
    try:
        obj = getattr(importlib.import_module(module_name), name)
        return typing.get_type_hints(obj.__init__ if isinstance(obj, type) else obj)
    except Exception:  # not importable here, or annotations that do not resolve: not checked
        return {}


def allowed_types(hint: Any) -> tuple[type, ...] | None:
    """The Python types a value of ``hint`` may have, or None when the hint is not a simple one."""
    if hint in ACCEPTS:
        return ACCEPTS[hint]
    if typing.get_origin(hint) in (Union, types.UnionType):
        allowed: tuple[type, ...] = ()
        for arg in typing.get_args(hint):
            if arg is type(None):
                allowed += (type(None),)
            elif arg in ACCEPTS:
                allowed += ACCEPTS[arg]
            elif not isinstance(arg, type):
                return None  # a member such as Sequence[int] or a Literal: not checked
            # another class (Tensor, Path): a YAML scalar is never one, so it adds nothing here
        return allowed or None
    return None


def type_names(types_: tuple[type, ...]) -> str:
    """``int or null`` for (int, NoneType)."""
    return " or ".join(sorted({"null" if t is type(None) else t.__name__ for t in types_}))
