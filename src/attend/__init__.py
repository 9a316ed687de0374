"""Attend: attention-based encoder-decoder experiments for translation, captioning and speech."""

from attend.memory import Memory

__all__ = ["Memory"]
