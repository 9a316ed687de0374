import torch

from attend.encoders import TextEncoder
from attend.encoders.text import reverse_padded


def test_memory_shapes_and_mask(source_batch):
    src, lengths = source_batch
    memory = TextEncoder(40, embedding_dim=8, hidden_size=8, dropout=0.0)(src, lengths)
    assert memory.values.shape == (3, 7, 16)
    assert memory.final.shape == (3, 16)
    assert memory.mask.tolist()[2] == [True, True] + [False] * 5
    assert torch.all(memory.values[~memory.mask] == 0)  # packed: padding produces nothing


def test_padding_does_not_change_real_positions(source_batch):
    """Packed sequences: a sentence encodes the same alone and padded in a batch."""
    src, lengths = source_batch
    torch.manual_seed(0)
    encoder = TextEncoder(
        40, embedding_dim=8, hidden_size=8, rnn_type="lstm", num_layers=2, dropout=0.0
    ).eval()
    batched = encoder(src, lengths)
    alone = encoder(src[2:3, :2], lengths[2:3])
    torch.testing.assert_close(batched.values[2, :2], alone.values[0])
    torch.testing.assert_close(batched.final[2], alone.final[0])


def test_reverse_padded_keeps_padding():
    tokens = torch.tensor([[1, 2, 3, 0], [4, 5, 0, 0]])
    assert reverse_padded(tokens, torch.tensor([3, 2])).tolist() == [[3, 2, 1, 0], [5, 4, 0, 0]]


def test_reverse_source_aligns_memory_with_tokens(source_batch):
    """With reversal, memory position j still belongs to token j: a unidirectional encoder's
    state at the first token has then read the whole sentence."""
    src, lengths = source_batch
    torch.manual_seed(0)
    forward = TextEncoder(40, embedding_dim=8, hidden_size=8, bidirectional=False, dropout=0.0).eval()
    torch.manual_seed(0)
    backward = TextEncoder(
        40, embedding_dim=8, hidden_size=8, bidirectional=False, dropout=0.0, reverse_source=True
    )
    backward = backward.eval()
    flipped = reverse_padded(src, lengths)
    torch.testing.assert_close(backward(src, lengths).values[0, 0], forward(flipped, lengths).values[0, 6])


def test_word_dropout_zeroes_whole_source_tokens_in_training_only() -> None:
    torch.manual_seed(0)
    encoder = TextEncoder(vocab_size=20, embedding_dim=8, hidden_size=4, dropout=0.0, word_dropout=0.5)
    embedded = encoder.word_dropout(torch.ones(64, 50, 8))
    dropped = (embedded == 0).all(-1)  # (B, S): whole rows or nothing
    assert ((embedded == 0).any(-1) == dropped).all()
    assert 0.4 < dropped.float().mean() < 0.6
    assert torch.allclose(embedded[~dropped], torch.full_like(embedded[~dropped], 2.0))  # kept ones scaled
    src, lengths = torch.randint(4, 20, (3, 7)), torch.tensor([7, 5, 2])
    encoder.eval()
    assert torch.equal(encoder(src, lengths).values, encoder(src, lengths).values)
