"""Encoders: each turns a batch's source into a Memory."""

from attend.encoders.text import TextEncoder

__all__ = ["TextEncoder"]
