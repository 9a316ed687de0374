"""Attend's Lightning callbacks, one file each: the attention plots, the training throughput, the thread count
measured to fit the machine, the schedule and stop that follow the time budget's clock and the checkpoints that
survive a resume. The run harness's own callbacks (resume position, preemption, the W&B run id, Optuna pruning,
the run summary) live with the harness in ``attend.run``."""

from attend.callbacks.attention_plots import AttentionLogger, AttentionPlots, draw_attention, reference_text
from attend.callbacks.resumable_checkpoint import ResumableCheckpoint, latest_checkpoints_last
from attend.callbacks.threads_that_fit import ThreadsThatFit
from attend.callbacks.time_budget import FollowTheClock
from attend.callbacks.tokens_per_second import TokensPerSecond

__all__ = ["AttentionLogger", "AttentionPlots", "FollowTheClock", "ResumableCheckpoint", "ThreadsThatFit",
           "TokensPerSecond", "draw_attention", "latest_checkpoints_last", "reference_text"]
