"""Data, by modality: text (translation, dates), images (captions), audio (speech); tokenizers apart;
the memory-mapped example store, bucketing and bad-sample policy that all three share."""

from attend.data.audio.datamodule import SpeechDataModule
from attend.data.audio.features import LogMelFrontEnd, SpecAugment, Spectrogram
from attend.data.bucketing import BucketBatchSampler
from attend.data.images.datamodule import CaptionDataModule
from attend.data.text.datamodule import TranslationDataModule
from attend.data.text.dataset import TranslationCollate, TranslationDataset
from attend.data.text.dates import DatePairs
from attend.data.text.ding import DingNotFoundError, DingPairs
from attend.data.text.parallel_text import ParallelText, ParallelTextError
from attend.data.tokenizers.char import CharTokenizer
from attend.data.tokenizers.sentencepiece import SentencePieceTokenizer
from attend.data.tokenizers.tokenizer import Tokenizer, tokenizer_from_state
from attend.data.tokenizers.word import WordTokenizer

__all__ = [
    "BucketBatchSampler",
    "CaptionDataModule",
    "CharTokenizer",
    "DatePairs",
    "DingNotFoundError",
    "DingPairs",
    "LogMelFrontEnd",
    "ParallelText",
    "ParallelTextError",
    "SentencePieceTokenizer",
    "SpecAugment",
    "SpeechDataModule",
    "Spectrogram",
    "Tokenizer",
    "TranslationCollate",
    "TranslationDataModule",
    "TranslationDataset",
    "WordTokenizer",
    "tokenizer_from_state",
]
