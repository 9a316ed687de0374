"""The dashboards a run logs to: W&B (wandb_run.py: Attend's logger, the run's name, tags, group and id) and
TensorBoard (tensorboard_run.py: the logger, its run folder and the HParams session). The CSV logger is
Lightning's own, set up in conf/logger/csv.yaml. Below the run harness; above the callbacks."""
