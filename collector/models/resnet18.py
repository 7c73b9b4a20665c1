"""torchvision ResNet-18 with random weights (needs torchvision)."""
from collector.models._vision import build_torchvision
from collector.models.base import ModelSpec

OPTIONS = {"classes": 1000, "image_size": 224}


def build(batch_size: int, opts: dict):
    return build_torchvision("resnet18", batch_size, opts)


SPEC = ModelSpec("resnet18", "torchvision ResNet-18, random weights, 224x224", build, OPTIONS, (64, 32, 128, 256),
                 requires=("torchvision",))
