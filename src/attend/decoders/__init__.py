"""Decoders: state is returned, never hidden."""

from attend.decoders.bahdanau import BahdanauDecoder
from attend.decoders.base import Decoder
from attend.decoders.luong import LuongDecoder
from attend.decoders.rnn import RNNDecoder
from attend.decoders.transformer import TransformerDecoder

__all__ = ["Decoder", "RNNDecoder", "BahdanauDecoder", "LuongDecoder", "TransformerDecoder"]
