"""Shared builder for the torchvision image classifiers (random weights, 224x224 inputs)."""
from collector.models.base import Built


def build_torchvision(arch: str, batch_size: int, opts: dict) -> Built:
    import torch
    import torch.nn.functional as F
    import torchvision

    module = getattr(torchvision.models, arch)(weights=None, num_classes=opts["classes"])
    x = torch.randn(batch_size, 3, opts["image_size"], opts["image_size"])
    labels = torch.randint(0, opts["classes"], (batch_size,))
    return Built(module, (x,), labels, lambda out, t: F.cross_entropy(out.float(), t))
