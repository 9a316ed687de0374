"""Data: tokenizers, text pair sources, image-caption sources (attend.data.images), speech sources
(attend.data.audio), the audio front end, bucketing, datamodules."""

from attend.data.bucketing import BucketBatchSampler
from attend.data.caption_datamodule import CaptionDataModule
from attend.data.char import CharTokenizer
from attend.data.datamodule import TranslationDataModule
from attend.data.dataset import TranslationCollate, TranslationDataset
from attend.data.dates import DatePairs
from attend.data.ding import DingNotFoundError, DingPairs
from attend.data.parallel_text import ParallelText, ParallelTextError
from attend.data.sentencepiece import SentencePieceTokenizer
from attend.data.speech_datamodule import SpeechDataModule
from attend.data.speech_features import LogMelFrontEnd, SpecAugment
from attend.data.tokenizer import Tokenizer, tokenizer_from_state
from attend.data.word import WordTokenizer

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
    "Tokenizer",
    "TranslationCollate",
    "TranslationDataModule",
    "TranslationDataset",
    "WordTokenizer",
    "tokenizer_from_state",
]
