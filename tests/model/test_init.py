"""model.init: Glorot-uniform weights per RNN gate, zero biases, padding rows zero, pretrained parts kept."""

import math

import pytest
import torch
from torch import nn

from attend.init import initialize


class Tiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embedding = nn.Embedding(50, 8, padding_idx=0)
        self.rnn = nn.GRU(8, 16, batch_first=True, bidirectional=True)
        self.output = nn.Linear(32, 50)
        self.backbone = nn.Linear(4, 4)
        self.backbone.pretrained = True


def bound(fan_out: int, fan_in: int) -> float:
    return math.sqrt(6.0 / (fan_in + fan_out))


def test_xavier_initialisation():
    torch.manual_seed(0)
    model = Tiny()
    kept = model.backbone.weight.detach().clone()
    initialize(model, "xavier")
    assert torch.all(model.embedding.weight[0] == 0)
    assert model.embedding.weight.abs().max() <= bound(50, 8)
    assert torch.all(model.output.bias == 0) and model.output.weight.abs().max() <= bound(50, 32)
    for name, parameter in model.rnn.named_parameters():
        if name.startswith("bias"):
            assert torch.all(parameter == 0)
        else:  # each of the 3 gate blocks (16 rows) has its own fan: a bound of sqrt(6 / (16 + fan_in))
            block_bound = bound(16, parameter.size(1))
            assert parameter.abs().max() <= block_bound
            assert parameter.abs().max() > 0.8 * block_bound
    torch.testing.assert_close(model.backbone.weight, kept)  # a pretrained part keeps its weights


def test_pytorch_defaults_are_left_alone_and_unknown_schemes_refused():
    torch.manual_seed(0)
    model = Tiny()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    initialize(model, "pytorch")
    for key, value in model.state_dict().items():
        torch.testing.assert_close(value, before[key])
    with pytest.raises(ValueError, match="model.init must be one of"):
        initialize(model, "orthogonal")


def test_an_unknown_scheme_stops_at_start_up_by_name(tmp_path):
    """model.init and model.loss_normalization are named choices: checked with the config, before any data."""
    from attend.config.checks import check_config
    from attend.config.compose import compose_config
    from attend.config.errors import ConfigError

    for override, expected in (("model.init=orthogonal", "model.init must be one of xavier, pytorch"),
                               ("model.loss_normalization=words", "model.loss_normalization must be one of tokens")):
        with pytest.raises(ConfigError, match=expected):
            check_config(compose_config(["experiment=dates", override], output_dir=tmp_path))
