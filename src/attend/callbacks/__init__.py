"""Attend's Lightning callbacks, one file each: the attention plots, the training throughput, the thread count
measured to fit the machine, the schedule and stop that follow the time budget's clock, the checkpoints that
survive a resume, those kept for averaging, the resume position, preemption, the W&B run id, Optuna pruning and
the run summary. The ones every run lists are imported here; the rest are named by their config files
(conf/callbacks/) and imported from their own modules."""

from attend.callbacks.attention_plots import (
    AttentionLogger,
    AttentionPlots,
    ExplorerLogger,
    draw_attention,
    reference_text,
)
from attend.callbacks.resumable_checkpoint import ResumableCheckpoint, latest_checkpoints_last
from attend.callbacks.threads_that_fit import ThreadsThatFit
from attend.callbacks.time_budget import FollowTheClock
from attend.callbacks.tokens_per_second import TokensPerSecond

__all__ = ["AttentionLogger", "AttentionPlots", "ExplorerLogger", "FollowTheClock", "ResumableCheckpoint",
           "ThreadsThatFit", "TokensPerSecond", "draw_attention", "latest_checkpoints_last", "reference_text"]
