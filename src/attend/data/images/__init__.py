"""Image-caption sources: synthetic shape scenes, Tux Paint stamps, emoji, Flickr8k, the Karpathy split files."""

from __future__ import annotations

from attend.data.images.emoji_images import EmojiImages
from attend.data.images.flickr8k import Flickr8k
from attend.data.images.karpathy import KarpathyJSON
from attend.data.images.record import CaptionDataError, ImageCaption, ImageReadError, SceneObject, read_rgb
from attend.data.images.shapes import ShapeScenes
from attend.data.images.tuxpaint import TuxPaintStamps

__all__ = ["CaptionDataError", "EmojiImages", "Flickr8k", "ImageCaption", "ImageReadError", "KarpathyJSON",
           "SceneObject", "ShapeScenes", "TuxPaintStamps", "read_rgb"]
