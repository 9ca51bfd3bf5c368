"""Image files for tests, made with Pillow: plain ones, ones with metadata, and hostile ones."""

from __future__ import annotations

import io
import struct
import zlib

from PIL import Image, PngImagePlugin

GPS_IFD = 0x8825
ORIENTATION = 0x0112
MAKE = 0x010F
SVG = (
    b'<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10">'
    b'<script>alert(1)</script><rect width="10" height="10"/></svg>'
)
PDF = b"%PDF-1.7\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n"


def png(
    width: int = 32, height: int = 24, *, color: tuple[int, int, int] = (200, 40, 40), text: str = ""
) -> bytes:
    info = None
    if text:
        info = PngImagePlugin.PngInfo()
        info.add_text("Comment", text)
    out = io.BytesIO()
    Image.new("RGB", (width, height), color).save(out, format="PNG", pnginfo=info)
    return out.getvalue()


def jpeg_with_gps(width: int = 40, height: int = 20, *, orientation: int = 1) -> bytes:
    """A JPEG whose EXIF names a camera, an orientation and a GPS position."""
    exif = Image.Exif()
    exif[MAKE] = "SpyCam Corp"
    exif[ORIENTATION] = orientation
    gps = exif.get_ifd(GPS_IFD)
    gps[1] = "N"
    gps[2] = (52.0, 31.0, 12.0)
    gps[3] = "E"
    gps[4] = (13.0, 24.0, 36.0)
    out = io.BytesIO()
    Image.new("RGB", (width, height), (10, 120, 200)).save(out, format="JPEG", exif=exif)
    return out.getvalue()


def webp(width: int = 30, height: int = 30) -> bytes:
    out = io.BytesIO()
    Image.new("RGBA", (width, height), (0, 160, 0, 255)).save(out, format="WEBP")
    return out.getvalue()


def animated_gif() -> bytes:
    """Two frames: red, then blue."""
    frames = [Image.new("RGB", (16, 16), color) for color in ((255, 0, 0), (0, 0, 255))]
    out = io.BytesIO()
    frames[0].save(out, format="GIF", save_all=True, append_images=frames[1:], duration=100, loop=0)
    return out.getvalue()


def png_bomb(width: int = 30_000, height: int = 30_000) -> bytes:
    """A valid-looking PNG of a few hundred bytes that declares a `width` x `height` canvas."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB
    rows = zlib.compress(b"\x00" * 1024, 9)  # far too little data: it never gets decoded
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", rows) + chunk(b"IEND", b"")
