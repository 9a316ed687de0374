"""Errors a user can fix (a config value, a file, the data, a diverging run): said in one line with the
fix, and exit status 2, instead of a traceback from deep inside a library."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

from attend.data.bad_samples import DataError
from attend.model import NonFiniteLossError
from attend.run.checkpoint_io import NonFiniteWeightsError, UnreadableCheckpointError
from attend.run.config_checks import ConfigError
from attend.run.distributed import in_a_sweep

USER_ERRORS = (ConfigError, DataError, NonFiniteLossError, NonFiniteWeightsError, UnreadableCheckpointError)


@contextlib.contextmanager
def reported_as_messages() -> Iterator[None]:
    """Run an entry point; a user error becomes its message and exit status 2. In a sweep it propagates,
    so the sweep records it against its job and goes on with the others."""
    try:
        yield
    except USER_ERRORS as error:
        if in_a_sweep():
            raise
        print(f"Error: {type(error).__name__}: {error}", file=sys.stderr)  # where Hydra prints its own errors
        raise SystemExit(2) from None
