"""Models a person might hand `tdx fit` by import path (tests/test_fit_cli.py): each one a case."""
import torch
from torch import nn


def mlp() -> nn.Module:
    """Starts with a Linear: fed (batch, in_features)."""
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 8))


def conv_net() -> nn.Module:
    """Starts with a convolution: its inputs cannot be guessed."""
    return nn.Sequential(nn.Conv2d(3, 8, 3), nn.Flatten(), nn.Linear(8 * 14 * 14, 10))


def images(batch: int, seq: int) -> torch.Tensor:
    """Example inputs for conv_net: (batch, 3, 16, 16); seq is not used."""
    return torch.randn(batch, 3, 16, 16)


class Masked(nn.Module):
    """Starts with an Embedding, but its forward also needs a mask."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(100, 16)
        self.head = nn.Linear(16, 100)

    def forward(self, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.head(self.embed(tokens) * mask.unsqueeze(-1))


class Float32Only(nn.Module):
    """Casts its input to fp32 itself: cannot run with bf16 weights."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.float() @ self.linear.weight.t()


def downloads_weights() -> nn.Module:
    """As a hub model does offline: the download fails with the library's own error."""
    raise OSError("We couldn't connect to 'https://huggingface.co' to load the files, and couldn't find them "
                  "in the cached files.")


not_a_model = 42


def returns_a_dict() -> dict:
    return {"weights": 1}
