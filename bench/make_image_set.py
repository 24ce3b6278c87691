#!/usr/bin/env python3
"""Makes the JPEG sets bench_data and bench/torchvision_data.py time, from the photographs that
scikit-image ships in its package (nothing is downloaded): each image is a random crop of one of
them (30-100 % of its area), resized with Lanczos so that its longer side is in [--min, --max]
pixels, flipped at random, its brightness and saturation nudged so that no two files are alike,
and saved as JPEG at a random quality in [75, 95], in --classes class folders.

  python bench/make_image_set.py --out results/images/small --count 500 --min 300 --max 500
  python bench/make_image_set.py --out results/images/large --count 200 --min 1000 --max 2000

Needs Pillow and scikit-image (PyPI); used by the benchmark only, never by the tests. The large set
is upscaled from photos of about 500 pixels: smooth at 2000, so its JPEGs are smaller and decode a
little faster than camera photos of that size would."""
import argparse
import random
from pathlib import Path

import numpy as np
from PIL import Image, ImageEnhance
from skimage import data

# The colour and grey photographs in scikit-image's own package data (no download).
SOURCES = ["astronaut", "chelsea", "coffee", "rocket", "camera", "coins", "moon", "page", "text",
           "immunohistochemistry", "hubble_deep_field", "colorwheel", "grass", "gravel", "brick"]


def sources():
    images = []
    for name in SOURCES:
        try:
            a = getattr(data, name)()
        except Exception:  # not in this version's package data
            continue
        if a.ndim == 2:
            a = np.stack([a] * 3, axis=-1)
        a = a[..., :3]
        if a.dtype != np.uint8:
            a = (255 * (a - a.min()) / max(1e-9, float(a.max() - a.min()))).astype(np.uint8)
        if min(a.shape[:2]) >= 256:
            images.append(Image.fromarray(a))
    if not images:
        raise SystemExit("make_image_set: scikit-image ships none of " + ", ".join(SOURCES))
    return images


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--count", type=int, default=500)
    ap.add_argument("--min", type=int, default=300, help="smallest longer side, pixels")
    ap.add_argument("--max", type=int, default=500, help="largest longer side, pixels")
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    photos = sources()
    for i in range(args.count):
        src = photos[i % len(photos)]
        w, h = src.size
        area = rng.uniform(0.3, 1.0)
        cw, ch = max(64, int(w * area ** 0.5 * rng.uniform(0.8, 1.2))), max(64, int(h * area ** 0.5 * rng.uniform(0.8, 1.2)))
        cw, ch = min(cw, w), min(ch, h)
        left, top = rng.randint(0, w - cw), rng.randint(0, h - ch)
        img = src.crop((left, top, left + cw, top + ch))
        side = rng.randint(args.min, args.max)
        scale = side / max(cw, ch)
        img = img.resize((max(1, round(cw * scale)), max(1, round(ch * scale))), Image.LANCZOS)
        if rng.random() < 0.5:
            img = img.transpose(Image.FLIP_LEFT_RIGHT)
        img = ImageEnhance.Brightness(img).enhance(rng.uniform(0.8, 1.2))
        img = ImageEnhance.Color(img).enhance(rng.uniform(0.7, 1.3))
        path = args.out / f"class{i % args.classes:03d}" / f"img{i:05d}.jpg"
        path.parent.mkdir(parents=True, exist_ok=True)
        img.save(path, quality=rng.randint(75, 95))
    print(f"make_image_set: {args.count} JPEGs of {args.min}-{args.max} px in {args.out}")


if __name__ == "__main__":
    main()
