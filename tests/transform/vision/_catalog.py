"""One instance of every vision transform, for tests that sweep them all."""

from __future__ import annotations

import dataloader.transform.vision as V

# name -> (factory taking `order`, does it draw random parameters?)
CATALOG = {
    "ToMode": (lambda order: V.ToMode("CHW", order=order), False),
    "Pad": (lambda order: V.Pad((1, 2, 3, 4), value=7, mask_value=9, order=order), False),
    "Resize": (lambda order: V.Resize((30, 50), order=order), False),
    "ResizeShortSide": (lambda order: V.Resize(24, order=order), False),
    "ShortestEdgeResize": (lambda order: V.ShortestEdgeResize((20, 40), 80, order=order), True),
    "RandomResize": (lambda order: V.RandomResize((0.5, 1.5), order=order), True),
    "RandomCrop": (lambda order: V.RandomCrop(32, padding_size=4, order=order), True),
    "RandomResizedCrop": (
        lambda order: V.RandomResizedCrop(28, interpolation=[V.INTER_LINEAR, V.INTER_CUBIC], order=order),
        True,
    ),
    "CenterCrop": (lambda order: V.CenterCrop((20, 30), order=order), False),
    "RandomHorizontalFlip": (lambda order: V.RandomHorizontalFlip(order=order), True),
    "RandomVerticalFlip": (lambda order: V.RandomVerticalFlip(order=order), True),
    "Normalize": (lambda order: V.Normalize([100, 110, 120], [50, 60, 70], order=order), False),
    "GaussianNoise": (lambda order: V.GaussianNoise(0.0, 0.1, order=order), True),
    "BrightnessTransform": (lambda order: V.BrightnessTransform(0.5, order=order), True),
    "ContrastTransform": (lambda order: V.ContrastTransform(0.5, order=order), True),
    "SaturationTransform": (lambda order: V.SaturationTransform(0.5, order=order), True),
    "HueTransform": (lambda order: V.HueTransform(0.3, order=order), True),
    "ColorJitter": (lambda order: V.ColorJitter(0.4, 0.4, 0.4, 0.1, order=order), True),
    "Lighting": (lambda order: V.Lighting(0.5, order=order), True),
    "Compose": (
        lambda order: V.Compose(
            [V.RandomHorizontalFlip(), V.RandomResizedCrop(24), V.ColorJitter(0.3, 0.3)],
            shuffle_indices=[(1, 3)],
            order=order,
        ),
        True,
    ),
}

RANDOM = sorted(name for name, (_, random) in CATALOG.items() if random)
