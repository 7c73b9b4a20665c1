"""MLP 768-2048-768 (GELU): a tiny, launch-bound model that shows compile overhead."""
from collector.models.base import Built, ModelSpec

OPTIONS = {"d_model": 768, "hidden": 2048}


def build(batch_size: int, opts: dict) -> Built:
    import torch
    from torch import nn

    d, h = opts["d_model"], opts["hidden"]
    module = nn.Sequential(nn.Linear(d, h), nn.GELU(), nn.Linear(h, d))
    x = torch.randn(batch_size, d)
    target = torch.randn(batch_size, d)
    return Built(module, (x,), target, lambda out, t: nn.functional.mse_loss(out.float(), t.float()))


SPEC = ModelSpec("mlp", "MLP 768-2048-768, GELU, MSE loss", build, OPTIONS, (32, 256, 2048))
