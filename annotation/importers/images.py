"""Figure images: safe path resolution, validation with Pillow, content-addressed storage.

A path from the data can never leave the images directory (no absolute paths, no ``..``,
no symlink that resolves outside). A file is accepted only if Pillow opens it as a real
image of an allowed format within the pixel limit; files are stored once per content hash.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from PIL import Image, UnidentifiedImageError

ALLOWED_FORMATS = {"PNG": "png", "JPEG": "jpg", "GIF": "gif", "WEBP": "webp"}


class ImageRejected(Exception):
    pass


@dataclass(frozen=True, slots=True)
class CheckedImage:
    source: Path
    sha256: str
    extension: str
    width: int
    height: int

    @property
    def storage_name(self) -> str:
        """Name under MEDIA_ROOT: one file per distinct content."""
        return f"figures/{self.sha256[:2]}/{self.sha256}.{self.extension}"


def resolve_inside(root: Path, relative: str) -> Path:
    """The file ``relative`` names under ``root``; refuses anything that would escape it."""
    if not relative or "\x00" in relative:
        raise ImageRejected("image path is empty or contains a NUL byte")
    posix = PurePosixPath(relative.replace("\\", "/"))
    if posix.is_absolute() or relative.startswith(("/", "\\")) or (len(relative) > 1 and relative[1] == ":"):
        raise ImageRejected(f"image path {relative!r} is absolute; paths must be relative to the images directory")
    if ".." in posix.parts:
        raise ImageRejected(f"image path {relative!r} contains '..' and could leave the images directory")
    root_resolved = root.resolve()
    try:
        candidate = (root_resolved / Path(*posix.parts)).resolve()
    except (RuntimeError, OSError):
        # A symlink loop (RuntimeError before Python 3.13, OSError after).
        raise ImageRejected(f"image path {relative!r} cannot be resolved (a symlink loop?)") from None
    if not candidate.is_relative_to(root_resolved):
        raise ImageRejected(f"image path {relative!r} resolves outside the images directory")
    return candidate


def check_image(path: Path, *, max_pixels: int, max_bytes: int) -> CheckedImage:
    """Validate one image file and hash it; raises ``ImageRejected`` with a readable reason."""
    try:
        is_file = path.is_file()
        size = path.stat().st_size if is_file else 0
    except OSError as error:
        # A name too long for the file system, say: the data is wrong, not the import.
        raise ImageRejected(f"image file {path.name[:100]!r} cannot be read ({error.strerror})") from None
    if not is_file:
        raise ImageRejected(f"image file not found: {path.name}")
    if size > max_bytes:
        raise ImageRejected(f"image {path.name} is {size:,} bytes; the limit is {max_bytes:,}")
    width, height, image_format = _open_checked(path, max_pixels=max_pixels)
    if image_format not in ALLOWED_FORMATS:
        raise ImageRejected(
            f"image {path.name} is {image_format or 'of unknown format'}; allowed: PNG, JPEG, GIF, WEBP"
        )
    return CheckedImage(
        source=path,
        sha256=_sha256(path),
        extension=ALLOWED_FORMATS[image_format],
        width=width,
        height=height,
    )


def _open_checked(path: Path, *, max_pixels: int) -> tuple[int, int, str]:
    with warnings.catch_warnings():
        # Pillow only warns between MAX_IMAGE_PIXELS and twice that; make every excess an error.
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            with Image.open(path) as image:
                width, height = image.size
                if width * height > max_pixels:
                    raise ImageRejected(
                        f"image {path.name} is {width}x{height} = {width * height:,} pixels; the limit is "
                        f"{max_pixels:,} (a possible decompression bomb)"
                    )
                image_format = image.format or ""
                image.verify()
            # verify() checks structure and checksums only; decoding every pixel (bounded by
            # the pixel limit above) also catches damaged image data.
            with Image.open(path) as image:
                image.load()
        except ImageRejected:
            raise
        except (Image.DecompressionBombError, Image.DecompressionBombWarning):
            raise ImageRejected(
                f"image {path.name} is too large to decode safely (a possible decompression bomb)"
            ) from None
        except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as error:
            raise ImageRejected(f"{path.name} is not a readable image ({error.__class__.__name__})") from None
    return width, height, image_format


def _sha256(path: Path) -> str:
    hasher = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            hasher.update(block)
    return hasher.hexdigest()


def store_image(checked: CheckedImage, media_root: Path) -> bool:
    """Copy the image into content-addressed storage; returns True if a new file was written."""
    target = media_root / checked.storage_name
    if target.exists():
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    # Copy to a temporary name and rename, so a crash never leaves a half-written figure.
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=".incoming-")
    os.close(handle)
    try:
        shutil.copyfile(checked.source, temporary)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return True
