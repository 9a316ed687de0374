"""The Karpathy split JSON files (dataset_coco.json, dataset_flickr8k.json, dataset_flickr30k.json)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from attend.data.images.record import CaptionDataError, ImageCaption, ImageFiles
from attend.data.splitting import SPLITS

HOW_TO_GET = ("The Karpathy splits come in caption_datasets.zip (dataset_coco.json, dataset_flickr8k.json, "
              "dataset_flickr30k.json); pass one as data.source.path=... and the folder of its images as "
              "data.source.image_root=...")
KNOWN_SPLITS = (*SPLITS, "restval")


class KarpathyJSON(ImageFiles):
    """Records of a Karpathy split file; "restval" images join train when use_restval, else they are dropped."""

    def __init__(self, path: str | os.PathLike, image_root: str | os.PathLike, use_restval: bool = True) -> None:
        self.path = Path(path)
        self.image_root = Path(image_root)
        self.use_restval = use_restval

    def settings(self) -> dict:
        """The constructor arguments."""
        return {"path": str(self.path), "image_root": str(self.image_root), "use_restval": self.use_restval}

    def splits(self) -> dict[str, list[ImageCaption]]:
        """{"train", "val", "test"} -> records, in file order."""
        out: dict[str, list[ImageCaption]] = {split: [] for split in SPLITS}
        for index, image in enumerate(self.read_images()):
            split = self.field(image, index, "split")
            if split not in KNOWN_SPLITS:
                raise CaptionDataError(f"{self.path}: image {index} has split {split!r}; expected one of "
                                       f"{', '.join(KNOWN_SPLITS)}")
            if split == "restval":
                if not self.use_restval:
                    continue
                split = "train"
            out[split].append(self.record(image, index))
        return out

    def read_images(self) -> list[dict]:
        """The "images" list of the JSON file."""
        if not self.path.is_file():
            raise CaptionDataError(f"Karpathy split file {str(self.path)!r} does not exist: it should be a JSON object "
                                   f'{{"images": [{{"filename", "split", "sentences": [{{"raw", "tokens"}}]}}], '
                                   f'"dataset": ...}}. {HOW_TO_GET}')
        try:
            with open(self.path, encoding="utf-8") as f:
                data = json.load(f)
        except json.JSONDecodeError as e:
            raise CaptionDataError(f"{self.path}:{e.lineno}:{e.colno}: invalid JSON ({e.msg}); re-download the file, "
                                   "it may be truncated") from e
        except UnicodeDecodeError as e:
            raise CaptionDataError(f"{self.path}: not UTF-8 ({e}); re-download the file") from e
        if not isinstance(data, dict) or not isinstance(data.get("images"), list):
            raise CaptionDataError(f'{self.path}: missing key "images": expected a JSON object with an "images" list, '
                                   f"as in the Karpathy split files. {HOW_TO_GET}")
        return data["images"]

    def record(self, image: dict, index: int) -> ImageCaption:
        """The record of image ``index``: its path under image_root and its sentences' raw text."""
        filename = self.field(image, index, "filename")
        relative = Path(image["filepath"], filename) if image.get("filepath") else Path(filename)
        sentences = self.field(image, index, "sentences")
        if not isinstance(sentences, list):
            raise CaptionDataError(f'{self.path}: image {index} ({filename}): "sentences" must be a list')
        captions = []
        for j, sentence in enumerate(sentences):
            if not isinstance(sentence, dict) or ("raw" not in sentence and "tokens" not in sentence):
                raise CaptionDataError(f'{self.path}: image {index} ({filename}), sentence {j}: missing key "raw" '
                                       '(and "tokens")')
            raw = sentence["raw"] if "raw" in sentence else " ".join(sentence["tokens"])
            if str(raw).strip():
                captions.append(str(raw).strip())
        if not captions:
            raise CaptionDataError(f"{self.path}: image {index} ({filename}) has no non-empty sentence")
        key = relative.as_posix()
        return ImageCaption(key=key, captions=tuple(captions), path=str(self.image_root / relative))

    def field(self, image: object, index: int, key: str) -> object:
        """image[key], or a CaptionDataError naming the image index and the key."""
        if not isinstance(image, dict) or key not in image:
            raise CaptionDataError(f'{self.path}: image {index} is missing the key "{key}"')
        return image[key]
