import math

import pytest
import torch

from attend.encoders import AudioEncoder
from attend.memory import Memory


def batch(lengths=(37, 20, 9, 1), mels: int = 12, seed: int = 0):
    """Features (B, N, mels) with random values in the padding too, and their lengths."""
    generator = torch.Generator().manual_seed(seed)
    features = torch.randn(len(lengths), max(lengths), mels, generator=generator)
    return features, torch.tensor(lengths)


def encoder(**kwargs) -> AudioEncoder:
    torch.manual_seed(0)
    options = dict(input_dim=12, hidden_size=8, conv_channels=4, dropout=0.0) | kwargs
    return AudioEncoder(**options).eval()


@pytest.mark.parametrize("subsample_layers", [0, 1, 2])
@pytest.mark.parametrize("pyramid_layers", [0, 2])
def test_shapes_and_lengths(subsample_layers, pyramid_layers):
    features, lengths = batch()
    model = encoder(subsample_layers=subsample_layers, pyramid_layers=pyramid_layers)
    memory = model(features, lengths)
    reduction = 2 ** (subsample_layers + pyramid_layers)
    assert isinstance(memory, Memory) and model.time_reduction == reduction
    assert memory.values.shape == (4, math.ceil(37 / reduction), 16) and model.output_dim == 16
    assert memory.final.shape == (4, 16) and memory.grid is None
    expected = [math.ceil(n / reduction) for n in lengths.tolist()]
    assert model.output_lengths(lengths).tolist() == expected == memory.mask.sum(dim=1).tolist()
    assert memory.mask[:, 0].all()  # even one frame leaves one position
    assert torch.all(memory.values[~memory.mask] == 0)


@pytest.mark.parametrize("rnn_type", ["lstm", "gru"])
@pytest.mark.parametrize("subsample_layers,pyramid_layers", [(2, 0), (0, 2), (1, 1)])
def test_padding_does_not_change_valid_positions(rnn_type, subsample_layers, pyramid_layers):
    """A row encodes the same alone, in a batch, and padded longer with garbage (odd lengths too)."""
    features, lengths = batch(lengths=(37, 21, 9))
    model = encoder(rnn_type=rnn_type, subsample_layers=subsample_layers, pyramid_layers=pyramid_layers)
    longer = torch.cat([features, 5 * torch.randn(3, 11, 12)], dim=1)  # (3, 48, 12)
    batched, padded = model(features, lengths), model(longer, lengths)
    for row, length in enumerate(lengths.tolist()):
        alone = model(features[row : row + 1, :length], lengths[row : row + 1])
        valid = int(alone.mask.sum())
        for other in (batched, padded):
            torch.testing.assert_close(other.values[row, :valid], alone.values[0])
            torch.testing.assert_close(other.final[row], alone.final[0])
            assert int(other.mask[row].sum()) == valid


@pytest.mark.parametrize("rnn_type", ["lstm", "gru"])
def test_gradients_flow_to_every_parameter(rnn_type):
    features, lengths = batch()
    features.requires_grad_(True)
    model = encoder(rnn_type=rnn_type, pyramid_layers=1, dropout=0.1).train()
    memory = model(features, lengths)
    (memory.values.sum() + memory.final.sum()).backward()
    for name, parameter in model.named_parameters():
        assert parameter.grad is not None and parameter.grad.abs().sum() > 0, name
    assert features.grad[1, :20].abs().sum() > 0
    assert torch.all(features.grad[1, 20:] == 0)  # padding frames are never read


def test_wrong_feature_size_names_the_settings():
    features, lengths = batch(mels=40)
    with pytest.raises(ValueError, match="data.modality.frontend.n_mels and encoder.input_dim"):
        encoder()(features, lengths)


def test_empty_utterance_names_the_minimum():
    features, _ = batch()
    with pytest.raises(ValueError, match="at least 1 frame"):
        encoder()(features, torch.tensor([37, 20, 0, 1]))


def test_bad_rnn_type():
    with pytest.raises(ValueError, match="encoder.rnn_type"):
        encoder(rnn_type="transformer")


@pytest.mark.parametrize("subsample_layers", [0, 2])
def test_nan_padding_never_reaches_the_memory(subsample_layers):
    features, lengths = batch()
    features[1, 20:] = float("nan")
    memory = encoder(subsample_layers=subsample_layers, pyramid_layers=1)(features, lengths)
    assert torch.isfinite(memory.values).all() and torch.isfinite(memory.final).all()
