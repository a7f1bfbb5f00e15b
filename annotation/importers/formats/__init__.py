"""One module per source format; importing this package registers them all."""

from annotation.importers.formats import spiqa

__all__ = ["spiqa"]
