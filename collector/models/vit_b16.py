"""torchvision ViT-B/16 with random weights (needs torchvision)."""
from collector.models._vision import build_torchvision
from collector.models.base import ModelSpec

OPTIONS = {"classes": 1000, "image_size": 224}


def build(batch_size: int, opts: dict):
    return build_torchvision("vit_b_16", batch_size, opts)


SPEC = ModelSpec("vit_b16", "torchvision ViT-B/16, random weights, 224x224", build, OPTIONS, (32, 64, 128),
                 requires=("torchvision",))
