"""Real files for the OCR tests: text drawn into images with Pillow (DejaVu, or Pillow's own
scalable font), and image-only PDFs made from those images or rendered from a typeset PDF with
pypdfium2. This module holds no tests."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

_FONT_FILES = ("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", "DejaVuSans.ttf")


def font(size: int = 28) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    for name in _FONT_FILES:
        try:
            return ImageFont.truetype(name, size)
        except OSError:
            continue
    return ImageFont.load_default(size=size)


def text_image(lines: Sequence[str], *, width: int = 1100, size: int = 28, columns: Sequence[Sequence[str]] = ()) -> Image.Image:
    """A white page with `lines` drawn top down at (60, 60 + n * 1.6 size); `columns`, when given,
    are drawn side by side below them (each column's lines top down)."""
    line_height = int(size * 1.6)
    rows = len(lines) + max((len(column) for column in columns), default=0)
    image = Image.new("L", (width, 120 + rows * line_height), 255)
    draw = ImageDraw.Draw(image)
    face = font(size)
    y = 60
    for line in lines:
        draw.text((60, y), line, fill=0, font=face)
        y += line_height
    if columns:
        column_width = (width - 120) // len(columns)
        for number, column in enumerate(columns):
            for row, line in enumerate(column):
                draw.text((60 + number * column_width, y + row * line_height), line, fill=0, font=face)
    return image


def image_only_pdf(path: Path, images: Sequence[Image.Image], *, dpi: int = 150) -> Path:
    """A PDF whose pages are the images and nothing else: no text layer (a scan)."""
    first, *rest = [image.convert("RGB") for image in images]
    first.save(path, "PDF", resolution=dpi, save_all=True, append_images=rest)
    return path


def render_pages(pdf: Path, indices: Sequence[int], *, dpi: int = 150) -> list[Image.Image]:
    """Pages of a real PDF rendered to grayscale images with pypdfium2, as a scanner would see them."""
    import pypdfium2 as pdfium

    document = pdfium.PdfDocument(str(pdf))
    try:
        return [document[index].render(scale=dpi / 72, grayscale=True).to_pil() for index in indices]  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType]  # real pypdfium2 API that typings/pypdfium2 (src's parts only) leaves out
    finally:
        document.close()
