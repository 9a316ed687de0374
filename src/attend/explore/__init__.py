"""The decoding explorer: one offline HTML page per input that steps through the search (the attention weights, each
head's, the decoder's likeliest next tokens, the beam's live hypotheses) and teacher forcing on a reference, drawn
from the numbers the search itself recorded (``attend.search.StepRecorder``)."""

from attend.explore.animation import steps_animation
from attend.explore.page import explorer_page, write_pages
from attend.explore.pages import decode_and_explore, explore_batch
from attend.explore.steps import StepLog

__all__ = ["StepLog", "decode_and_explore", "explore_batch", "explorer_page", "steps_animation", "write_pages"]
