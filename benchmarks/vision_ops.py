"""The rows of the vision bench: each transform of ``dataloader.transform.vision`` at settings
that always do work, and the same operation in torchvision or in plain Pillow (what
torchvision runs on PIL images)."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

import dataloader.transform.vision as V

SIZE = 224


def ours() -> dict[str, Any]:
    """Our transform per row name; random ones at settings that always do work."""
    return {
        "Resize((256, 256))": V.Resize((256, 256)),
        "ShortestEdgeResize(256, 512)": V.ShortestEdgeResize(256, 512),
        "RandomResize((0.8, 1.2))": V.RandomResize((0.8, 1.2)),
        "RandomResizedCrop(224)": V.RandomResizedCrop(224),
        "CenterCrop(200)": V.CenterCrop(200),
        "RandomCrop(200, padding 4)": V.RandomCrop(200, padding_size=4),
        "Pad(4)": V.Pad(4),
        "RandomHorizontalFlip(p=1)": V.RandomHorizontalFlip(1.0),
        "RandomVerticalFlip(p=1)": V.RandomVerticalFlip(1.0),
        "BrightnessTransform(0.4)": V.BrightnessTransform(0.4),
        "ContrastTransform(0.4)": V.ContrastTransform(0.4),
        "SaturationTransform(0.4)": V.SaturationTransform(0.4),
        "HueTransform(0.1)": V.HueTransform(0.1),
        "ColorJitter(0.4, 0.4, 0.4, 0.1)": V.ColorJitter(0.4, 0.4, 0.4, 0.1),
        "Lighting(0.1)": V.Lighting(0.1),
        "GaussianNoise(0, 0.05)": V.GaussianNoise(0.0, 0.05),
        "Normalize(mean, std)": V.Normalize([103.5, 116.3, 123.7], [57.4, 57.1, 58.4]),
        "ToMode('CHW')": V.ToMode("CHW"),
    }


def pillow_ops(rng: np.random.Generator) -> dict[str, Callable[[Any], Any]]:
    """Plain-Pillow versions of the same operations (what torchvision runs on PIL images)."""
    from PIL import Image, ImageEnhance, ImageOps

    bilinear = Image.Resampling.BILINEAR

    def factor(v: float) -> float:
        return float(rng.uniform(max(0.0, 1 - v), 1 + v))

    def random_resized_crop(img: Any) -> Any:
        side = int(SIZE * np.sqrt(rng.uniform(0.08, 1.0)))
        x, y = rng.integers(SIZE - side + 1, size=2)
        return img.resize((224, 224), bilinear, box=(x, y, x + side, y + side))

    def random_crop(img: Any) -> Any:
        padded = ImageOps.expand(img, 4)
        x, y = rng.integers(SIZE + 8 - 200 + 1, size=2)
        return padded.crop((x, y, x + 200, y + 200))

    def hue(img: Any) -> Any:
        h, s, v = img.convert("HSV").split()
        shift = int(rng.uniform(-0.1, 0.1) * 255) % 256
        h = h.point(lambda p: (p + shift) % 256)
        return Image.merge("HSV", (h, s, v)).convert("RGB")

    def jitter(img: Any) -> Any:
        img = ImageEnhance.Brightness(img).enhance(factor(0.4))
        img = ImageEnhance.Contrast(img).enhance(factor(0.4))
        img = ImageEnhance.Color(img).enhance(factor(0.4))
        return hue(img)

    def random_resize(img: Any) -> Any:
        side = int(round(SIZE * rng.uniform(0.8, 1.2)))
        return img.resize((side, side), bilinear)

    margin = (SIZE - 200) // 2
    return {
        "Resize((256, 256))": lambda img: img.resize((256, 256), bilinear),
        "ShortestEdgeResize(256, 512)": lambda img: img.resize((256, 256), bilinear),
        "RandomResize((0.8, 1.2))": random_resize,
        "RandomResizedCrop(224)": random_resized_crop,
        "CenterCrop(200)": lambda img: img.crop((margin, margin, margin + 200, margin + 200)),
        "RandomCrop(200, padding 4)": random_crop,
        "Pad(4)": lambda img: ImageOps.expand(img, 4),
        "RandomHorizontalFlip(p=1)": lambda img: img.transpose(Image.Transpose.FLIP_LEFT_RIGHT),
        "RandomVerticalFlip(p=1)": lambda img: img.transpose(Image.Transpose.FLIP_TOP_BOTTOM),
        "BrightnessTransform(0.4)": lambda img: ImageEnhance.Brightness(img).enhance(factor(0.4)),
        "ContrastTransform(0.4)": lambda img: ImageEnhance.Contrast(img).enhance(factor(0.4)),
        "SaturationTransform(0.4)": lambda img: ImageEnhance.Color(img).enhance(factor(0.4)),
        "HueTransform(0.1)": hue,
        "ColorJitter(0.4, 0.4, 0.4, 0.1)": jitter,
    }


def torchvision_ops() -> dict[str, Callable[[Any], Any]] | None:
    """torchvision's equivalents on PIL images, or None when torchvision is not importable."""
    try:
        import torchvision.transforms as T
    except ImportError:
        return None
    return {
        "Resize((256, 256))": T.Resize((256, 256)),
        "ShortestEdgeResize(256, 512)": T.Resize(256, max_size=512),
        "RandomResizedCrop(224)": T.RandomResizedCrop(224),
        "CenterCrop(200)": T.CenterCrop(200),
        "RandomCrop(200, padding 4)": T.RandomCrop(200, padding=4),
        "Pad(4)": T.Pad(4),
        "RandomHorizontalFlip(p=1)": T.RandomHorizontalFlip(1.0),
        "RandomVerticalFlip(p=1)": T.RandomVerticalFlip(1.0),
        "BrightnessTransform(0.4)": T.ColorJitter(brightness=0.4),
        "ContrastTransform(0.4)": T.ColorJitter(contrast=0.4),
        "SaturationTransform(0.4)": T.ColorJitter(saturation=0.4),
        "HueTransform(0.1)": T.ColorJitter(hue=0.1),
        "ColorJitter(0.4, 0.4, 0.4, 0.1)": T.ColorJitter(0.4, 0.4, 0.4, 0.1),
    }
