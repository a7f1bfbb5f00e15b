"""Gold exports as pure code: the split rule (``splits``), the canonical record (``records``),
each source's native layout (``native``), the streaming writers (``writers``), the dataset card
(``card``) and what a capture learns from the raw labels (``labels``). No queries here: the
services in ``reviews/services/exports.py`` read and write the database and call these.
"""
