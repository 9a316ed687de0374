"""Parameter initialisation of a freshly built model (``model.init``)."""

from __future__ import annotations

from torch import nn

SCHEMES = ("xavier", "pytorch")
RNN_TYPES = (nn.RNNBase,)


def initialize(model: nn.Module, scheme: str = "xavier") -> None:
    """Re-initialise every parameter the model learns from scratch.

    ``xavier``: Glorot and Bengio 2010's uniform initialisation of every weight matrix (for RNNs one gate
    block at a time, so each gate gets the fan of its own matrix, as JoeyNMT and OpenNMT do), zero biases,
    embeddings likewise with their padding row kept at zero. ``pytorch``: the layers' own defaults (the
    embeddings N(0, 1), recurrent weights U(-1/sqrt(H), 1/sqrt(H))). A module that declares
    ``pretrained = True`` (an ImageNet backbone) keeps its weights, and so does everything inside it.
    """
    if scheme not in SCHEMES:
        raise ValueError(f"model.init must be one of {', '.join(SCHEMES)}, got {scheme!r}")
    if scheme == "pytorch":
        return
    for module in _scratch_modules(model):
        if isinstance(module, RNN_TYPES):
            _init_rnn(module)
        elif isinstance(module, nn.Embedding):
            nn.init.xavier_uniform_(module.weight)
            if module.padding_idx is not None:
                module.weight.data[module.padding_idx].zero_()
        else:
            for name, parameter in module.named_parameters(recurse=False):
                if name.startswith("bias"):
                    nn.init.zeros_(parameter)
                elif parameter.dim() > 1:
                    nn.init.xavier_uniform_(parameter)


def _scratch_modules(model: nn.Module):
    """Every submodule outside the subtrees marked ``pretrained``."""
    stack = [model]
    while stack:
        module = stack.pop()
        if getattr(module, "pretrained", False):
            continue
        yield module
        stack.extend(module.children())


def _init_rnn(rnn: nn.RNNBase) -> None:
    """Xavier per gate block of each weight matrix (GRU: 3, LSTM: 4 blocks), zero biases."""
    gates = {"GRU": 3, "LSTM": 4}.get(rnn.mode, 1)
    for name, parameter in rnn.named_parameters():
        if name.startswith("bias"):
            nn.init.zeros_(parameter)
            continue
        for block in parameter.data.chunk(gates, dim=0):
            nn.init.xavier_uniform_(block)
