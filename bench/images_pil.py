#!/usr/bin/env python3
"""Images per second of the Python path AIPerf uses for synthetic noise images: numpy draws
the pixels, PIL writes a PNG at its default settings, base64 makes the data URL. The
reference for `cargo bench --bench dataset_build`, which prints ours.

Needs pillow and numpy (`python3 -m venv /tmp/pil && /tmp/pil/bin/pip install pillow numpy`).
Usage: python3 bench/images_pil.py [count] [size]
"""

import base64
import io
import sys
import time

import numpy as np
from PIL import Image


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    size = int(sys.argv[2]) if len(sys.argv) > 2 else 512
    rng = np.random.default_rng(1)
    started = time.perf_counter()
    chars = 0
    for _ in range(count):
        pixels = rng.integers(0, 256, (size, size, 3), dtype=np.uint8)
        png = io.BytesIO()
        Image.fromarray(pixels).save(png, format="PNG")
        url = "data:image/png;base64," + base64.b64encode(png.getvalue()).decode()
        chars += len(url)
    took = time.perf_counter() - started
    print(
        f"PIL, {count} noise images {size}x{size} PNG on 1 thread: {count / took:.1f} images/s "
        f"({took / count * 1e3:.1f} ms each, {chars / count / 1024:.0f} KB data URL each)"
    )


if __name__ == "__main__":
    main()
