"""Images on a grid with a caption under each, as a PNG (Pillow): what ``show`` draws.

A grid is rows of :class:`Tile` under a header of column titles. Each tile is scaled to
the same side (nearest neighbour, so a pixel stays a pixel); captions may span lines.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from PIL import Image, ImageDraw, ImageFont

from dali_pipes.data.files import write_atomic

BACKGROUND = (255, 255, 255)
INK = (20, 20, 20)
PAD = 6


@dataclass(frozen=True)
class Tile:
    """One uint8 ``[3, H, W]`` (or grey ``[1, H, W]``) image and the caption under it."""

    image: torch.Tensor
    caption: str = ""


def font(size: int) -> ImageFont.ImageFont | ImageFont.FreeTypeFont:
    """Pillow's built-in font at ``size`` pixels (no font file needed)."""
    try:
        return ImageFont.load_default(size=size)
    except TypeError:  # Pillow < 10.1 has one size only
        return ImageFont.load_default()


def as_pil(image: torch.Tensor, side: int) -> Image.Image:
    """A uint8 ``[3, H, W]`` tensor (or a grey ``[1, H, W]`` one) as an RGB image whose
    longer side is ``side``."""
    rgb = image.detach().cpu().expand(3, -1, -1)
    array = rgb.permute(1, 2, 0).contiguous().numpy().astype(np.uint8)
    picture = Image.fromarray(array, mode="RGB")
    scale = side / max(picture.size)
    size = (max(1, round(picture.width * scale)), max(1, round(picture.height * scale)))
    return picture.resize(size, Image.Resampling.NEAREST)


def draw_grid(
    rows: Sequence[Sequence[Tile]],
    header: Sequence[str],
    side: int,
    title: str = "",
    row_titles: Sequence[str] = (),
) -> Image.Image:
    """The tiles as one image: ``title`` on top, ``header`` over the columns, an optional
    title left of each row, every tile ``side`` pixels with its caption under it."""
    text = font(max(10, side // 12))
    line = int(text.getbbox("Ag")[3]) + 2
    captions = [["\n".join(fit(t.caption, text, side)) for t in r] for r in rows]
    caption_lines = max((c.count("\n") + 1 for r in captions for c in r), default=1)
    cell_w, cell_h = side + PAD, side + PAD + caption_lines * line
    left = int(max((text.getlength(t) for t in row_titles), default=0)) + PAD if row_titles else 0
    columns = max([len(header), *(len(r) for r in rows)])
    width = left + columns * cell_w + PAD
    heading = wrap(title, text, width - 2 * PAD)
    top = (len(heading) * line + PAD if heading else 0) + line + PAD
    canvas = Image.new("RGB", (width, top + len(rows) * cell_h), BACKGROUND)
    pen = ImageDraw.Draw(canvas)
    if heading:
        pen.multiline_text((PAD, PAD // 2), "\n".join(heading), fill=INK, font=text, spacing=2)
    for c, name in enumerate(header):
        pen.text((left + c * cell_w + PAD, top - line - PAD // 2), name, fill=INK, font=text)
    for r, row in enumerate(rows):
        y = top + r * cell_h
        if r < len(row_titles):
            pen.text((PAD, y + side // 2 - line), row_titles[r], fill=INK, font=text)
        for c, tile in enumerate(row):
            x = left + c * cell_w + PAD
            canvas.paste(as_pil(tile.image, side), (x, y))
            pen.multiline_text((x, y + side + 2), captions[r][c], fill=INK, font=text, spacing=2)
    return canvas


def wrap(text: str, face: ImageFont.ImageFont | ImageFont.FreeTypeFont, width: int) -> list[str]:
    """``text`` in lines no wider than ``width`` pixels where it has spaces to break at
    (a path without spaces is broken at its slashes)."""
    lines: list[str] = []
    for word in text.replace("/", "/ ").split(" "):
        if not word:
            continue
        glue = "" if lines and lines[-1].endswith("/") else " "
        joined = f"{lines[-1]}{glue}{word}" if lines else word
        if lines and face.getlength(joined) <= width:
            lines[-1] = joined
        else:
            lines.append(word)
    return lines


def fit(caption: str, face: ImageFont.ImageFont | ImageFont.FreeTypeFont, width: int) -> list[str]:
    """``caption``'s lines wrapped to ``width`` pixels, a word longer than that cut short."""
    lines = []
    for part in caption.split("\n"):
        for line in wrap(part, face, width) or [""]:
            while len(line) > 1 and face.getlength(line) > width:
                line = line[:-2] + "…"
            lines.append(line)
    return lines


def save_png(image: Image.Image, path: Path) -> Path:
    """Write ``image`` to ``path`` as a PNG, whole or not at all
    (:func:`dali_pipes.data.files.write_atomic`); return ``path``."""
    write_atomic(path, lambda f: image.save(f, format="PNG"), hint="choose another path")
    return path
