"""`tv:<name>`: a torchvision model with random weights, standing in for TorchBench's torchvision models
(runs in the cell process).

`torchvision.models.get_model(name, weights=None)`, options passed to it (`num_classes=`, a detection
model's `min_size=`/`max_size=`, ...) except `image_size` and `frames`, read here. Inputs and losses as
torchvision's own training references build them:

- classification: random images (224 px; 299 for inception_v3), cross-entropy on random labels (the
  main logits where the model also returns auxiliary ones in training: GoogLeNet, Inception);
- semantic segmentation (FCN, DeepLabV3, LR-ASPP): 520 px images (the references' evaluation size),
  per-pixel cross-entropy against random masks of the model's classes, plus 0.5 x the auxiliary
  head's where it has one (references/segmentation's criterion);
- detection (Faster/Mask R-CNN, RetinaNet, FCOS, SSD): a batch of images (800 px: the R-CNN transform's
  own minimum size; SSD's own 300 or 320) with four random boxes each, labels, and masks for Mask R-CNN; in training the
  model's loss dictionary summed (references/detection), in inference its detections (boxes and scores
  of every image, concatenated);
- video classification (R3D, MC3, R(2+1)D, S3D, MViT, Swin3D): clips of 16 frames of 112 px (224 for
  S3D, MViT and Swin3D), cross-entropy on random labels.

Optical flow (RAFT) and the quantized models are `skipped` with the reason: their inputs (image
pairs) and integer kernels are another harness. Dropout and stochastic depth stay as torchvision sets
them off in eval; training compares eager and compiled under the same seed.
"""
from __future__ import annotations

from collector.models.base import Built, ModelSkipped

OWN = ("image_size", "frames")
DETECTION_BOXES = 4


def family(name: str) -> str:
    """'classification', 'segmentation', 'detection', 'video', 'optical_flow' or 'quantized'."""
    import torchvision.models as tvm

    for fam, module in (("detection", tvm.detection), ("segmentation", tvm.segmentation), ("video", tvm.video),
                        ("optical_flow", tvm.optical_flow), ("quantized", tvm.quantization)):
        if name in tvm.list_models(module=module):
            return fam
    return "classification"


def build(name: str, batch_size: int, opts: dict) -> Built:
    import torch
    import torchvision.models as tvm

    fam = family(name)
    if fam in ("optical_flow", "quantized"):
        raise ModelSkipped(f"tv:{name} is a torchvision {fam.replace('_', ' ')} model: the tv: source builds "
                           "classification, segmentation, detection and video models")
    kwargs = {k: v for k, v in opts.items() if k not in OWN}
    if fam in ("detection", "segmentation"):
        kwargs.setdefault("weights_backbone", None)  # random too: the default downloads ImageNet weights
    model = tvm.get_model(name, weights=None, **kwargs)
    if fam == "detection":
        return _detection(model, name, batch_size, opts)
    if fam == "segmentation":
        return _segmentation(model, batch_size, opts)
    if fam == "video":
        size = int(opts.get("image_size") or (224 if name.startswith(("s3d", "mvit", "swin3d")) else 112))
        x = torch.randn(batch_size, 3, int(opts.get("frames") or 16), size, size)
    else:
        size = int(opts.get("image_size") or (299 if name == "inception_v3" else 224))
        x = torch.randn(batch_size, 3, size, size)
    classes = int(kwargs.get("num_classes") or _classes(model))
    return Built(model, (x,), torch.randint(0, classes, (batch_size,)), _cross_entropy,
                 settings={"image_size": size})


def _classes(model) -> int:
    import torch

    last = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    return int(last[-1].out_features) if last else 1000


def _cross_entropy(out, target):
    import torch.nn.functional as F

    logits = out[0] if isinstance(out, (tuple, list)) else out  # GoogLeNet, Inception: (logits, aux) in training
    return F.cross_entropy(logits.float(), target)


def _segmentation(model, batch_size: int, opts: dict) -> Built:
    import torch

    size = int(opts.get("image_size") or 520)
    classes = int(opts.get("num_classes") or 21)  # torchvision's segmentation models' default (VOC's 21)
    module = _DictOut(model)
    x = torch.randn(batch_size, 3, size, size)
    target = torch.randint(0, classes, (batch_size, size, size))

    def loss(out, target):
        import torch.nn.functional as F

        total = F.cross_entropy(out[0].float(), target)
        return total + 0.5 * F.cross_entropy(out[1].float(), target) if len(out) > 1 else total
    return Built(module, (x,), target, loss, settings={"image_size": size})


def _detection(model, name: str, batch_size: int, opts: dict) -> Built:
    import torch

    size = int(opts.get("image_size") or (320 if "ssdlite320" in name else 300 if "ssd300" in name else 800))
    gen = torch.Generator().manual_seed(0)
    classes = int(opts.get("num_classes") or 91)
    targets = []
    for _ in range(batch_size):
        xy = torch.rand(DETECTION_BOXES, 2, generator=gen) * size * 0.5
        wh = torch.rand(DETECTION_BOXES, 2, generator=gen) * size * 0.4 + 8
        t = {"boxes": torch.cat([xy, xy + wh], 1), "labels": torch.randint(1, classes, (DETECTION_BOXES,), generator=gen)}
        if "maskrcnn" in name:
            t["masks"] = (torch.rand(DETECTION_BOXES, size, size, generator=gen) > 0.5).to(torch.uint8)
        targets.append(t)
    module = _Detection(model, targets)
    x = torch.rand(batch_size, 3, size, size)

    def loss(out, target):
        return out[0]  # the model's own losses, summed
    return Built(module, (x,), torch.zeros(()), loss, settings={"image_size": size})


def _wrappers():
    import torch

    class DictOut(torch.nn.Module):
        """A segmentation model's {'out', 'aux'} as a tuple (the harness compares tensors)."""

        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, x):
            got = self.model(x)
            return tuple(got[k] for k in ("out", "aux") if k in got)

    class Detection(torch.nn.Module):
        """A detection model on a batch tensor: the images as the list it takes; in training its
        losses summed against the targets (kept as buffers, so they move with the module), in
        inference the boxes and scores of every image, concatenated."""

        def __init__(self, model, targets):
            super().__init__()
            self.model, self.keys = model, [sorted(t) for t in targets]
            for i, t in enumerate(targets):
                for k, v in t.items():
                    self.register_buffer(f"t{i}_{k}", v)

        def forward(self, x):
            images = list(x.unbind(0))
            if self.training:
                targets = [{k: getattr(self, f"t{i}_{k}") for k in keys} for i, keys in enumerate(self.keys)]
                losses = self.model(images, targets)
                return (sum(losses.values()),)
            got = self.model(images)
            return torch.cat([d["boxes"] for d in got]), torch.cat([d["scores"] for d in got])
    return DictOut, Detection


def _DictOut(model):  # noqa: N802 (classes made on first use: this module must import without torch)
    return _wrappers()[0](model)


def _Detection(model, targets):  # noqa: N802
    return _wrappers()[1](model, targets)
