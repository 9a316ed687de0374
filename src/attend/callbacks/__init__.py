"""Attend's Lightning callbacks, one file each: the attention plots, the training throughput and the schedule
fitted to the time budget. The run harness's own callbacks (resume position, preemption, the W&B run id, Optuna
pruning, the run summary) live with the harness in ``attend.run``."""

from attend.callbacks.attention_plots import AttentionLogger, AttentionPlots, draw_attention, reference_text
from attend.callbacks.time_budget import FitScheduleToTime
from attend.callbacks.tokens_per_second import TokensPerSecond

__all__ = ["AttentionLogger", "AttentionPlots", "FitScheduleToTime", "TokensPerSecond", "draw_attention",
           "reference_text"]
