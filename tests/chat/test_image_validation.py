"""Uploaded images are judged by their content with Pillow, re-encoded and downscaled."""

from __future__ import annotations

import io
from collections.abc import Callable

import pytest
from PIL import Image

from playground.chat.domain.attachments import ImageRefused, image_clean, read_limited
from tests.support.images import (
    GPS_IFD,
    PDF,
    SVG,
    animated_gif,
    jpeg_with_gps,
    png,
    png_bomb,
    webp,
)


def opened(data: bytes) -> Image.Image:
    return Image.open(io.BytesIO(data))


@pytest.mark.parametrize(
    ("make", "content_type"),
    [(png, "image/png"), (jpeg_with_gps, "image/jpeg"), (webp, "image/webp"), (animated_gif, "image/png")],
)
def test_png_jpeg_webp_and_gif_are_accepted(make: Callable[[], bytes], content_type: str) -> None:
    image = image_clean(make())

    assert image.content_type == content_type
    assert opened(image.data).size == (image.width, image.height)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (SVG, "It is an SVG drawing"),
        (PDF, "It is a PDF document, not an image"),
        (b"just some notes\nabout the project\n", "It is a text file, whatever its name says"),
        (b"\x01\x02\x03\x04 random binary \xff\xfe\x00", "not a PNG, JPEG, WebP or GIF image"),
        (b"", "The file is empty"),
    ],
    ids=["svg", "pdf", "text-renamed-png", "binary", "empty"],
)
def test_what_is_not_an_image_we_accept_is_refused_with_the_reason(data: bytes, reason: str) -> None:
    with pytest.raises(ImageRefused, match=reason):
        image_clean(data)


def test_a_bmp_is_refused_by_name_even_though_pillow_could_read_it() -> None:
    out = io.BytesIO()
    Image.new("RGB", (8, 8)).save(out, format="BMP")

    with pytest.raises(ImageRefused, match="It is a BMP image; only PNG, JPEG, WebP or GIF"):
        image_clean(out.getvalue())


def test_a_truncated_image_is_refused_as_damaged() -> None:
    whole = jpeg_with_gps(400, 300)

    with pytest.raises(ImageRefused, match="truncated or damaged"):
        image_clean(whole[: len(whole) // 2])


def test_a_decompression_bomb_is_refused_from_its_header_before_decoding() -> None:
    bomb = png_bomb(9_000, 9_000)  # 81 megapixels declared in a few hundred bytes
    assert len(bomb) < 1_000

    with pytest.raises(ImageRefused, match=r"canvas is too large \(9,000 x 9,000 pixels\)"):
        image_clean(bomb)


def test_a_bomb_so_large_that_pillow_itself_refuses_to_open_it_is_refused_too() -> None:
    with pytest.raises(ImageRefused, match="decompression bomb"):
        image_clean(png_bomb(30_000, 30_000))  # 900 megapixels: Pillow's DecompressionBombError


def test_a_canvas_over_our_own_cap_but_under_pillows_is_refused_too() -> None:
    with pytest.raises(ImageRefused, match="at most 1 megapixels"):
        image_clean(png(1100, 1000), max_pixels=1_000_000)


def test_exif_and_gps_are_gone_after_re_encoding() -> None:
    original = jpeg_with_gps()
    assert opened(original).getexif().get_ifd(GPS_IFD)  # the test file does carry a position
    assert b"SpyCam Corp" in original

    clean = image_clean(original).data

    assert not opened(clean).getexif()
    assert b"Exif" not in clean and b"SpyCam Corp" not in clean


def test_png_text_chunks_are_gone_after_re_encoding() -> None:
    clean = image_clean(png(text="secret location: 52.52N 13.40E")).data

    assert b"secret location" not in clean
    assert not opened(clean).text  # type: ignore[attr-defined]


def test_the_exif_orientation_is_applied_before_it_is_dropped() -> None:
    image = image_clean(jpeg_with_gps(40, 20, orientation=6))  # "rotate 90° clockwise"

    assert (image.width, image.height) == (20, 40)


def test_a_large_image_is_downscaled_to_the_maximum_side_keeping_its_shape() -> None:
    image = image_clean(png(4000, 1000), max_side=2048)

    assert (image.width, image.height) == (2048, 512)
    assert opened(image.data).size == (2048, 512)


def test_a_small_image_keeps_its_size() -> None:
    image = image_clean(png(300, 200), max_side=2048)

    assert (image.width, image.height) == (300, 200)


def test_a_gif_keeps_only_its_first_frame() -> None:
    image = opened(image_clean(animated_gif()).data)

    assert getattr(image, "n_frames", 1) == 1
    assert image.convert("RGB").getpixel((0, 0)) == (255, 0, 0)


def test_a_file_over_the_size_limit_is_refused_while_it_is_read() -> None:
    read: list[int] = []

    class Endless:
        """A file that never ends: reading it whole would never finish."""

        def read(self, size: int) -> bytes:
            read.append(size)
            return b"x" * size

    with pytest.raises(ImageRefused, match="larger than 1 MB"):
        read_limited(Endless(), limit=1024 * 1024)
    assert sum(read) <= 1024 * 1024 + 64 * 1024


def test_a_file_at_the_size_limit_is_read_whole() -> None:
    data = png(64, 64)

    assert read_limited(io.BytesIO(data), limit=len(data)) == data
