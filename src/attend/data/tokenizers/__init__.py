"""Tokenizers: characters, words, SentencePiece; fitted on training text, saved in checkpoints."""
