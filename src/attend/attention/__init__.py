"""Attention types; the files of conf/attention/ list the options."""

from attend.attention.additive import AdditiveAttention
from attend.attention.base import Attention, AttentionOutput, mask_value, masked_softmax
from attend.attention.cosine import CosineAttention
from attend.attention.dot import DotAttention
from attend.attention.general import GeneralAttention
from attend.attention.hard import HardAttention
from attend.attention.location import LocationAttention
from attend.attention.multihead import MultiHeadAttention
from attend.attention.scaled_dot import ScaledDotAttention
from attend.attention.self_attention import SelfAttention

__all__ = [
    "Attention",
    "AttentionOutput",
    "AdditiveAttention",
    "CosineAttention",
    "DotAttention",
    "GeneralAttention",
    "HardAttention",
    "LocationAttention",
    "MultiHeadAttention",
    "ScaledDotAttention",
    "SelfAttention",
    "masked_softmax",
    "mask_value",
]
