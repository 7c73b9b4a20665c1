"""Mixture-of-experts layer stack with top-k routing and fixed expert capacity.

Tokens are dispatched into a static [experts, capacity, d] buffer (GShard/Switch
style) so every shape is static: overflowing tokens are dropped, as in those models.
"""
from collector.models.base import Built, ModelSpec

OPTIONS = {"layers": 4, "d_model": 768, "hidden": 3072, "experts": 8, "top_k": 2,
           "seq_len": 256, "capacity_factor": 1.25}


def build(batch_size: int, opts: dict) -> Built:
    import math

    import torch
    from torch import nn
    import torch.nn.functional as F

    d, h, E, k = opts["d_model"], opts["hidden"], opts["experts"], opts["top_k"]
    tokens = batch_size * opts["seq_len"]
    capacity = max(1, math.ceil(tokens * k / E * opts["capacity_factor"]))

    class MoELayer(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln = nn.LayerNorm(d)
            self.router = nn.Linear(d, E, bias=False)
            self.w1 = nn.Parameter(torch.randn(E, d, h) / math.sqrt(d))
            self.w2 = nn.Parameter(torch.randn(E, h, d) / math.sqrt(h))

        def forward(self, x):
            shape = x.shape
            xt = self.ln(x).reshape(-1, d)
            gate, expert = torch.topk(F.softmax(self.router(xt).float(), dim=-1), k, dim=-1)
            expert, gate = expert.t().reshape(-1), gate.t().reshape(-1)  # first choices first
            onehot = F.one_hot(expert, E)
            pos = ((torch.cumsum(onehot, 0) - 1) * onehot).sum(-1)
            keep = pos < capacity
            slot = torch.where(keep, expert * capacity + pos, E * capacity)  # dropped -> spare row
            token = torch.arange(xt.shape[0], device=x.device).repeat(k)
            buf = xt.new_zeros(E * capacity + 1, d).index_copy(0, slot, xt[token])
            hid = torch.bmm(F.gelu(torch.bmm(buf[:-1].view(E, capacity, d), self.w1)), self.w2)
            hid = torch.cat([hid.reshape(E * capacity, d), hid.new_zeros(1, d)])
            weighted = hid[slot] * (gate * keep).to(hid.dtype).unsqueeze(1)
            y = xt.new_zeros(xt.shape).index_add(0, token, weighted.to(xt.dtype))  # autocast: bf16 into fp32
            return x + y.view(shape)

    module = nn.Sequential(*(MoELayer() for _ in range(opts["layers"])))
    x = torch.randn(batch_size, opts["seq_len"], d)
    target = torch.randn(batch_size, opts["seq_len"], d)
    return Built(module, (x,), target, lambda out, t: F.mse_loss(out.float(), t.float()))


SPEC = ModelSpec("moe", "MoE stack, top-2 of 8 experts, static capacity dispatch", build, OPTIONS, (8, 1, 32))
