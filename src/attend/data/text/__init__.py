"""Text-to-text data: the Ding dictionary, dates, line-aligned parallel corpora, and their data module."""
