"""Cut a stretch of an `evaluate.py --record-video` mp4 into a small looping GIF (for the README).

    .venv/bin/python scripts/video_to_gif.py VIDEO.mp4 OUT.gif --start 30 --seconds 8
    .venv/bin/python scripts/video_to_gif.py VIDEO.mp4 strip.png --strip 6   # 6 frames side by side

Uses imageio (installed with moviepy) to read the video and Pillow (installed with matplotlib) to
write the GIF with one shared palette (GIF frame times are in 1/100 s: 15 fps plays as 14.3), so an Atari game stays a few hundred kB.
"""

from __future__ import annotations

import argparse
import sys

import imageio.v3 as iio
import numpy as np
from PIL import Image


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("video")
    parser.add_argument("out", help="a .gif, or a .png with --strip")
    parser.add_argument("--start", type=float, default=0.0, help="seconds into the video")
    parser.add_argument("--seconds", type=float, default=8.0, help="length of the GIF")
    parser.add_argument("--every", type=int, default=1, help="keep every N-th frame (the GIF plays at the same speed)")
    parser.add_argument("--scale", type=float, default=1.0, help="resize factor")
    parser.add_argument("--strip", type=int, metavar="N", help="instead of a GIF: N frames of the stretch side by side in one PNG")
    args = parser.parse_args()

    fps = iio.immeta(args.video).get("fps", 15)
    first, count = int(args.start * fps), int(args.seconds * fps)
    frames = [frame for i, frame in enumerate(iio.imiter(args.video)) if first <= i < first + count][:: args.every]
    if not frames:
        print(f"{args.video}: no frames between {args.start} s and {args.start + args.seconds} s", file=sys.stderr)
        return 2
    images = [Image.fromarray(np.asarray(frame)) for frame in frames]
    if args.scale != 1.0:
        images = [im.resize((round(im.width * args.scale), round(im.height * args.scale)), Image.NEAREST) for im in images]
    if args.strip:
        picks = [images[round(i * (len(images) - 1) / max(1, args.strip - 1))] for i in range(args.strip)]
        strip = Image.new("RGB", (sum(im.width for im in picks) + 4 * (len(picks) - 1), picks[0].height), "white")
        x = 0
        for im in picks:
            strip.paste(im, (x, 0))
            x += im.width + 4
        strip.save(args.out, optimize=True)
    else:
        palette = images[len(images) // 2].convert("P", palette=Image.ADAPTIVE, colors=32)
        gif = [im.quantize(palette=palette, dither=Image.Dither.NONE) for im in images]
        gif[0].save(args.out, save_all=True, append_images=gif[1:], duration=10 * round(100 * args.every / fps), loop=0, optimize=True)
    print(f"{args.out}: {len(images) if not args.strip else args.strip} frames from {args.start:g} s to {args.start + len(frames) * args.every / fps:g} s of {args.video}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
