"""Data: one pipeline (``DataModule``) for every modality, a plug-in per modality (text, images, audio) with its
sources, tokenizers apart; the memory-mapped example store, bucketing and bad-sample policy."""

from attend.data.audio.features import LogMelFrontEnd, SpecAugment, Spectrogram
from attend.data.audio.modality import AudioModality
from attend.data.audio.whisper_frontend import WhisperLogMel
from attend.data.bucketing import BucketBatchSampler
from attend.data.corpora import Corpora
from attend.data.datamodule import DataModule
from attend.data.images.modality import ImageModality
from attend.data.text.dates import DatePairs
from attend.data.text.ding import DingNotFoundError, DingPairs
from attend.data.text.modality import TextModality
from attend.data.text.parallel_text import ParallelText, ParallelTextError
from attend.data.tokenizers.char import CharTokenizer
from attend.data.tokenizers.sentencepiece import SentencePieceTokenizer
from attend.data.tokenizers.tokenizer import Tokenizer, tokenizer_from_state
from attend.data.tokenizers.word import WordTokenizer

__all__ = ["AudioModality", "BucketBatchSampler", "CharTokenizer", "Corpora", "DataModule", "DatePairs",
           "DingNotFoundError", "DingPairs", "ImageModality", "LogMelFrontEnd", "ParallelText", "ParallelTextError",
           "SentencePieceTokenizer", "SpecAugment", "Spectrogram", "TextModality", "Tokenizer", "WhisperLogMel",
           "WordTokenizer", "tokenizer_from_state"]
