"""`timm:<name>`: a timm model with random weights at its default input size (runs in the cell process).

As PyTorch's own TIMM suite does: `timm.create_model(name, pretrained=False)`, random images of the
model's `pretrained_cfg` input size, cross-entropy against random labels for training. Dropout and
stochastic depth are off unless asked for (`drop_rate=`, `drop_path_rate=`): random masks would make
eager and compiled outputs differ by more than any tolerance.
"""
from __future__ import annotations

from collector.models.base import Built

OWN = ("image_size", "classes")  # options read here; the rest go to timm.create_model


def input_size(model) -> tuple[int, int, int]:
    """(channels, height, width) from the model's pretrained config (3x224x224 when it names none)."""
    cfg = getattr(model, "pretrained_cfg", None) or getattr(model, "default_cfg", None) or {}
    size = cfg.get("input_size") or (3, 224, 224)
    return tuple(int(s) for s in size)


def build(name: str, batch_size: int, opts: dict) -> Built:
    import torch
    import torch.nn.functional as F
    import timm

    kwargs = {k: v for k, v in opts.items() if k not in OWN}
    if "classes" in opts:
        kwargs["num_classes"] = int(opts["classes"])
    module = timm.create_model(name, pretrained=False, **kwargs)
    channels, height, width = input_size(module)
    if "image_size" in opts:
        height = width = int(opts["image_size"])
    classes = int(getattr(module, "num_classes", 0) or 1000)
    x = torch.randn(batch_size, channels, height, width)
    labels = torch.randint(0, classes, (batch_size,))

    def loss(out, target):
        logits = out[0] if isinstance(out, (tuple, list)) else out  # e.g. deit_*_distilled in train mode
        return F.cross_entropy(logits.float(), target)
    return Built(module, (x,), labels, loss)
