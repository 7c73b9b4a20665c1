"""GPT-style decoder: GPT-2 small shape (768 wide, 12 heads), configurable depth and length."""
from collector.models.base import Built, ModelSpec

OPTIONS = {"layers": 12, "d_model": 768, "heads": 12, "seq_len": 512, "vocab": 50304}


def build(batch_size: int, opts: dict) -> Built:
    import torch
    from torch import nn
    import torch.nn.functional as F

    d, heads = opts["d_model"], opts["heads"]

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
            q, k, v = (z.view(b, t, heads, d // heads).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
            return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(opts["vocab"], d)
            self.pos = nn.Embedding(opts["seq_len"], d)
            self.blocks = nn.ModuleList(Block() for _ in range(opts["layers"]))
            self.ln_f = nn.LayerNorm(d)
            self.head = nn.Linear(d, opts["vocab"], bias=False)
            self.head.weight = self.tok.weight  # tied, as in GPT-2

        def forward(self, idx):
            pos = torch.arange(idx.shape[1], device=idx.device)
            x = self.tok(idx) + self.pos(pos)
            for blk in self.blocks:
                x = blk(x)
            return self.head(self.ln_f(x))

    idx = torch.randint(0, opts["vocab"], (batch_size, opts["seq_len"]))
    target = torch.roll(idx, -1, dims=1)

    def loss(logits, t):
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), t.view(-1))

    return Built(GPT(), (idx,), target, loss, float_inputs=())


SPEC = ModelSpec("gpt", "GPT-2-small-shaped decoder, causal SDPA, tied embeddings", build, OPTIONS, (8, 1, 16, 32))
