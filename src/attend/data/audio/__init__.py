"""Speech-recognition sources: Asterisk prompts, espeak-ng synthesis, Tux Paint recordings, LibriSpeech, JSON-lines
manifests."""

from __future__ import annotations

from attend.data.audio.amazon_queen import AmazonQueenSpeech
from attend.data.audio.asterisk import AsteriskPrompts
from attend.data.audio.espeak import EspeakNotInstalledError, EspeakSpeech
from attend.data.audio.librispeech import LibriSpeech
from attend.data.audio.manifest import JsonlManifest
from attend.data.audio.number_words import number_words
from attend.data.audio.record import (
    AudioReadError,
    SpeechDataError,
    Utterance,
    audio_duration,
    normalize_transcript,
    read_audio,
)
from attend.data.audio.tuxpaint_speech import TuxPaintSpeech

__all__ = ["AmazonQueenSpeech", "AsteriskPrompts", "AudioReadError", "EspeakNotInstalledError", "EspeakSpeech",
           "JsonlManifest", "LibriSpeech", "SpeechDataError", "TuxPaintSpeech", "Utterance", "audio_duration",
           "normalize_transcript", "number_words", "read_audio"]
