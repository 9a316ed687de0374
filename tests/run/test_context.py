"""What surrounds a run (attend.run.context): which exceptions end a run as expected."""

from __future__ import annotations

import optuna

from attend.run.context import EXPECTED_STOPS, expected_stop


def test_a_pruned_optuna_trial_is_an_expected_stop_and_other_errors_are_not():
    assert EXPECTED_STOPS and all(isinstance(name, str) for name in EXPECTED_STOPS)
    assert expected_stop(optuna.TrialPruned("pruned after epoch 0"))
    assert not expected_stop(ValueError("Invalid learning rate"))
    assert not expected_stop(RuntimeError("TrialPruned"))
