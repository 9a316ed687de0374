"""The error of a configuration that cannot run, on the ground floor: every room may raise it."""

from __future__ import annotations


class ConfigError(ValueError):
    """A configuration that cannot run; the message names the key and the fix."""
