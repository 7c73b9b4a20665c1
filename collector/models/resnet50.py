"""torchvision ResNet-50 with random weights (needs torchvision)."""
from collector.models._vision import build_torchvision
from collector.models.base import ModelSpec

OPTIONS = {"classes": 1000, "image_size": 224}


def build(batch_size: int, opts: dict):
    return build_torchvision("resnet50", batch_size, opts)


SPEC = ModelSpec("resnet50", "torchvision ResNet-50, random weights, 224x224", build, OPTIONS, (32, 64, 128),
                 requires=("torchvision",))
