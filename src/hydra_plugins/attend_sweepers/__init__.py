"""Attend's Hydra sweepers (found by Hydra in the ``hydra_plugins`` namespace package):

- ``hydra/sweeper=attend`` (the default of train.py): Hydra's grid sweeper that runs every job
  even when some fail, then writes and prints a summary of the failures and exits non-zero;
- ``hydra/sweeper=attend_optuna`` (``hparams_search=*_optuna``): Optuna's TPE over the same
  override syntax, its study in SQLite in the sweep folder (resumable), trials pruned from their
  validation metric.
"""
