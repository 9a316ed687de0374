"""Encoders: each turns a batch's source into a Memory."""

from attend.encoders.audio import AudioEncoder
from attend.encoders.efficientnet import EfficientNetEncoder
from attend.encoders.image_cnn import CNNEncoder
from attend.encoders.resnet import ResNetEncoder, WeightsError
from attend.encoders.text import TextEncoder
from attend.encoders.transformer import TransformerEncoder

__all__ = [
    "AudioEncoder",
    "CNNEncoder",
    "EfficientNetEncoder",
    "ResNetEncoder",
    "TextEncoder",
    "TransformerEncoder",
    "WeightsError",
]
