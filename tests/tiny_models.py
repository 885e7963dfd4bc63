"""Small torch models built in the tests (CPU, seeded): what a user holds in a session."""

from __future__ import annotations


def tiny_lm(torch, seed: int = 0, width: int = 64, dtype=None):
    """An embedding, two blocks of attention-like and MLP Linear layers with LayerNorms, a
    Conv1d and an lm_head: every kind of tensor a planner meets, at a few thousand values."""
    nn = torch.nn
    torch.manual_seed(seed)

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm = nn.LayerNorm(width)
            self.q_proj = nn.Linear(width, width)
            self.up_proj = nn.Linear(width, 2 * width, bias=False)
            self.down_proj = nn.Linear(2 * width, width)

        def forward(self, x):
            h = self.norm(x)
            h = self.q_proj(h)
            return x + self.down_proj(torch.nn.functional.gelu(self.up_proj(h)))

    class TinyLM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed_tokens = nn.Embedding(100, width)
            self.conv = nn.Conv1d(width, width, 3, padding=1)
            self.layers = nn.ModuleList([Block(), Block()])
            self.final_norm = nn.LayerNorm(width)
            self.lm_head = nn.Linear(width, 100, bias=False)

        def forward(self, ids):
            x = self.embed_tokens(ids)
            x = x + self.conv(x.transpose(1, 2)).transpose(1, 2)
            for block in self.layers:
                x = block(x)
            return self.lm_head(self.final_norm(x))

    model = TinyLM().eval()
    with torch.no_grad():  # an outlier channel, as real models have
        model.layers[1].up_proj.weight[:, 3] *= 20
    if dtype is not None:
        model = model.to(dtype)
    return model
