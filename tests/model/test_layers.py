"""attend.layers holds what encoders and decoders share: decoders never import from the encoders."""

from __future__ import annotations

import ast
import functools

import torch

from attend.attention import AdditiveAttention
from attend.decoders import TransformerDecoder
from attend.encoders import TransformerEncoder
from attend.layers import FeedForward, Positions
from tests.helpers.paths import ROOT

DECODERS = ROOT / "src" / "attend" / "decoders"


def imported_modules(path) -> set[str]:
    """Every module a file imports, at any depth (function-level imports included)."""
    modules = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            modules |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules.add(node.module)
            modules |= {f"{node.module}.{alias.name}" for alias in node.names}  # from attend import encoders
    return modules


def test_no_decoder_imports_from_the_encoders():
    files = sorted(DECODERS.glob("*.py"))
    assert {"transformer.py", "rnn.py"} <= {f.name for f in files}
    for path in files:
        offending = sorted(m for m in imported_modules(path) if m == "attend.encoders" or
                           m.startswith("attend.encoders."))
        assert not offending, f"{path.name} imports {offending}: shared layers belong in attend.layers"


def test_encoder_and_decoder_use_the_shared_layers_with_unchanged_parameter_names():
    sizes = {"d_model": 8, "num_layers": 1, "num_heads": 2, "ff_dim": 16}
    encoder = TransformerEncoder("text", vocab_size=20, positions="learned", **sizes)
    decoder = TransformerDecoder(20, 8, functools.partial(AdditiveAttention, hidden_dim=8), d_model=8, num_layers=1,
                                 num_heads=2, ff_dim=16, positions="learned")
    assert isinstance(encoder.stem.positions, Positions) and isinstance(decoder.positions, Positions)
    assert isinstance(encoder.layers[0].feed_forward, FeedForward)
    assert isinstance(decoder.layers[0].feed_forward, FeedForward)
    names = set(decoder.state_dict())  # checkpoints keep loading: the same keys as before the move
    assert {"positions.table.weight", "layers.0.feed_forward.0.weight", "layers.0.feed_forward.3.bias"} <= names
    assert {"stem.positions.table.weight", "layers.0.feed_forward.0.weight"} <= set(encoder.state_dict())


def test_feed_forward_is_the_papers_ffn():
    torch.manual_seed(0)
    ffn = FeedForward(4, 8).eval()
    x = torch.randn(2, 3, 4)
    first, second = ffn[0], ffn[3]
    expected = torch.relu(x @ first.weight.T + first.bias) @ second.weight.T + second.bias
    torch.testing.assert_close(ffn(x), expected)
