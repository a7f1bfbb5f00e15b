"""Image path safety, validation and content-addressed storage (pure code, no database)."""

from __future__ import annotations

import hashlib
import io
import struct
import zlib
from pathlib import Path

import pytest
from PIL import Image

from annotation.importers.images import ImageRejected, check_image, resolve_inside, store_image
from tests.annotation.spiqa_support import png_bytes, png_claiming_size

LIMITS = {"max_pixels": 1_000_000, "max_bytes": 1_000_000}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    images = tmp_path / "images"
    (images / "paper").mkdir(parents=True)
    (images / "paper" / "figure.png").write_bytes(png_bytes())
    return images


def write(path: Path, content: bytes) -> Path:
    path.write_bytes(content)
    return path


def image_bytes(image_format: str, size: tuple[int, int] = (4, 3)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, (200, 30, 30)).save(buffer, format=image_format)
    return buffer.getvalue()


# resolve_inside -------------------------------------------------------------------------


def test_it_resolves_a_relative_path_inside_the_root(root: Path) -> None:
    assert resolve_inside(root, "paper/figure.png") == (root / "paper" / "figure.png").resolve()


def test_it_resolves_a_path_written_with_backslashes(root: Path) -> None:
    assert resolve_inside(root, "paper\\figure.png") == (root / "paper" / "figure.png").resolve()


@pytest.mark.parametrize("relative", ["", "paper/fig\x00ure.png"])
def test_it_rejects_an_empty_path_or_one_with_a_nul_byte(root: Path, relative: str) -> None:
    with pytest.raises(ImageRejected, match="empty or contains a NUL byte"):
        resolve_inside(root, relative)


@pytest.mark.parametrize("relative", ["/etc/passwd", "\\etc\\passwd", "C:\\Windows\\win.ini", "c:figure.png"])
def test_it_rejects_an_absolute_image_path(root: Path, relative: str) -> None:
    with pytest.raises(ImageRejected, match="is absolute"):
        resolve_inside(root, relative)


@pytest.mark.parametrize("relative", ["../outside.png", "paper/../../outside.png", "paper/../figure.png", "..\\x.png"])
def test_it_rejects_an_image_path_with_dot_dot(root: Path, relative: str) -> None:
    with pytest.raises(ImageRejected, match=r"contains '\.\.'"):
        resolve_inside(root, relative)


def test_it_rejects_a_symlinked_file_that_points_outside_the_root(root: Path, tmp_path: Path) -> None:
    secret = write(tmp_path / "secret.png", png_bytes())
    (root / "paper" / "link.png").symlink_to(secret)

    with pytest.raises(ImageRejected, match="resolves outside the images directory"):
        resolve_inside(root, "paper/link.png")


def test_it_rejects_a_symlinked_folder_that_points_outside_the_root(root: Path, tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    write(tmp_path / "elsewhere" / "figure.png", png_bytes())
    (root / "linked").symlink_to(tmp_path / "elsewhere", target_is_directory=True)

    with pytest.raises(ImageRejected, match="resolves outside the images directory"):
        resolve_inside(root, "linked/figure.png")


def test_it_rejects_a_symlink_loop_instead_of_crashing(root: Path) -> None:
    (root / "paper" / "one.png").symlink_to(root / "paper" / "two.png")
    (root / "paper" / "two.png").symlink_to(root / "paper" / "one.png")

    with pytest.raises(ImageRejected, match="cannot be resolved"):
        check_image(resolve_inside(root, "paper/one.png"), **LIMITS)


def test_it_follows_a_symlink_that_stays_inside_the_root(root: Path) -> None:
    (root / "alias.png").symlink_to(root / "paper" / "figure.png")

    assert resolve_inside(root, "alias.png") == (root / "paper" / "figure.png").resolve()


def test_it_accepts_a_root_that_is_itself_a_symlink(root: Path, tmp_path: Path) -> None:
    (tmp_path / "images-link").symlink_to(root, target_is_directory=True)

    assert resolve_inside(tmp_path / "images-link", "paper/figure.png") == (root / "paper" / "figure.png").resolve()


# check_image ----------------------------------------------------------------------------


def test_it_hashes_and_measures_a_png(root: Path) -> None:
    path = root / "paper" / "figure.png"

    checked = check_image(path, **LIMITS)

    assert (checked.width, checked.height, checked.extension) == (4, 3, "png")
    assert checked.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert checked.storage_name == f"figures/{checked.sha256[:2]}/{checked.sha256}.png"


@pytest.mark.parametrize(("image_format", "extension"), [("JPEG", "jpg"), ("GIF", "gif"), ("WEBP", "webp")])
def test_it_accepts_the_other_allowed_formats(tmp_path: Path, image_format: str, extension: str) -> None:
    path = write(tmp_path / "figure.png", image_bytes(image_format))

    assert check_image(path, **LIMITS).extension == extension


def test_it_names_the_format_by_content_not_by_file_name(tmp_path: Path) -> None:
    path = write(tmp_path / "figure.png", image_bytes("JPEG"))

    assert check_image(path, **LIMITS).storage_name.endswith(".jpg")


@pytest.mark.parametrize("image_format", ["BMP", "TIFF"])
def test_it_rejects_a_real_image_of_a_format_that_is_not_allowed(tmp_path: Path, image_format: str) -> None:
    path = write(tmp_path / "figure.png", image_bytes(image_format))

    with pytest.raises(ImageRejected, match=f"is {image_format}; allowed: PNG, JPEG, GIF, WEBP"):
        check_image(path, **LIMITS)


def test_it_rejects_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ImageRejected, match=r"image file not found: missing\.png"):
        check_image(tmp_path / "missing.png", **LIMITS)


def test_it_rejects_a_file_name_too_long_for_the_file_system_instead_of_crashing(root: Path) -> None:
    with pytest.raises(ImageRejected, match="cannot be read"):
        check_image(resolve_inside(root, "paper/" + "x" * 300 + ".png"), **LIMITS)


def test_it_rejects_a_directory(tmp_path: Path) -> None:
    with pytest.raises(ImageRejected, match="image file not found"):
        check_image(tmp_path, **LIMITS)


def test_it_rejects_a_file_named_png_that_is_no_image(tmp_path: Path) -> None:
    path = write(tmp_path / "figure.png", b"%PDF-1.4 not a picture")

    with pytest.raises(ImageRejected, match=r"figure.png is not a readable image \(UnidentifiedImageError\)"):
        check_image(path, **LIMITS)


def test_it_rejects_a_truncated_png(tmp_path: Path) -> None:
    content = image_bytes("PNG", (120, 80))
    path = write(tmp_path / "figure.png", content[: len(content) // 2])

    with pytest.raises(ImageRejected, match="is not a readable image"):
        check_image(path, **LIMITS)


def test_it_rejects_a_png_cut_off_before_its_end_chunk(tmp_path: Path) -> None:
    content = image_bytes("PNG", (120, 80))
    path = write(tmp_path / "figure.png", content[: content.rindex(b"IEND") - 4])

    with pytest.raises(ImageRejected, match="is not a readable image"):
        check_image(path, **LIMITS)


def test_it_rejects_a_file_larger_than_the_byte_limit(tmp_path: Path) -> None:
    path = write(tmp_path / "figure.png", png_bytes())

    with pytest.raises(ImageRejected, match=r"bytes; the limit is 10$"):
        check_image(path, max_pixels=1_000_000, max_bytes=10)


def test_it_rejects_an_image_with_more_pixels_than_the_limit(tmp_path: Path) -> None:
    path = write(tmp_path / "figure.png", png_bytes(40, 30))

    with pytest.raises(ImageRejected, match="is 40x30 = 1,200 pixels; the limit is 1,199"):
        check_image(path, max_pixels=1_199, max_bytes=1_000_000)


def test_it_accepts_an_image_with_exactly_the_pixel_limit(tmp_path: Path) -> None:
    path = write(tmp_path / "figure.png", png_bytes(40, 30))

    assert check_image(path, max_pixels=1_200, max_bytes=1_000_000).width == 40


def test_it_rejects_a_decompression_bomb_by_its_header(tmp_path: Path) -> None:
    path = write(tmp_path / "bomb.png", png_claiming_size(100_000, 100_000))

    with pytest.raises(ImageRejected, match="decompression bomb"):
        check_image(path, max_pixels=10**12, max_bytes=1_000_000)


def test_it_rejects_a_header_above_pillow_warning_limit_even_with_a_higher_setting(tmp_path: Path) -> None:
    # Pillow only warns between MAX_IMAGE_PIXELS and twice that; the check makes it an error.
    side = int((Image.MAX_IMAGE_PIXELS or 0) ** 0.5) + 100
    path = write(tmp_path / "large.png", png_claiming_size(side, side))

    with pytest.raises(ImageRejected, match="too large to decode safely"):
        check_image(path, max_pixels=10**12, max_bytes=1_000_000)


# store_image ----------------------------------------------------------------------------


def test_it_stores_an_image_once_under_its_content_hash(root: Path, tmp_path: Path) -> None:
    media = tmp_path / "media"
    checked = check_image(root / "paper" / "figure.png", **LIMITS)

    assert store_image(checked, media) is True
    assert store_image(checked, media) is False
    assert [path.relative_to(media).as_posix() for path in media.rglob("*") if path.is_file()] == [checked.storage_name]
    assert (media / checked.storage_name).read_bytes() == (root / "paper" / "figure.png").read_bytes()


def test_it_rejects_a_png_whose_pixel_data_is_damaged_though_its_checksums_are_right(tmp_path: Path) -> None:
    data = bytearray(image_bytes("PNG", (64, 64)))
    start = data.index(b"IDAT")
    length = struct.unpack(">I", data[start - 4 : start])[0]
    payload = bytearray(data[start + 4 : start + 4 + length])
    payload[len(payload) // 2] ^= 0xFF
    data[start + 4 : start + 4 + length] = payload
    data[start + 4 + length : start + 8 + length] = struct.pack(">I", zlib.crc32(b"IDAT" + payload))
    with pytest.raises(ImageRejected, match="not a readable image"):
        check_image(write(tmp_path / "damaged.png", bytes(data)), max_pixels=10**6, max_bytes=10**6)
