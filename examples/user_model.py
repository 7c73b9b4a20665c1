"""An example of your own model for the collector (docs/models.md):

    make collect MODELS=examples/user_model.py:build BATCH_SIZES=16
    make collect MODELS=examples/user_model.py:build:width=512,depth=4

The collector imports this file in each cell process and calls `build(batch_size, **options)`;
options come from the reference (`:width=512,depth=4`) and are part of the cell's key. It returns a
`Built`: the module, its positional inputs (batch first), the training target and the loss. Import
torch inside the function: the collector reads the reference without importing torch. Keep the
weights random and the inputs synthetic, and dropout off (eager and compiled outputs are compared).
"""
from collector.models import Built


def build(batch_size: int, width: int = 256, depth: int = 3, classes: int = 10) -> Built:
    import torch
    import torch.nn.functional as F
    from torch import nn

    layers = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.GELU(), nn.LayerNorm(width)]
    module = nn.Sequential(*layers, nn.Linear(width, classes))
    x = torch.randn(batch_size, width)
    labels = torch.randint(0, classes, (batch_size,))
    return Built(module, (x,), labels, lambda out, target: F.cross_entropy(out.float(), target))


def broken(batch_size: int) -> Built:
    """A build function that fails, to see what a failing user model gives: a build_error row."""
    raise RuntimeError("this example model fails on purpose")
