"""Gold exports as pure code: the split rule (``splits``), the canonical record (``records``),
each source's native layout (``native``), the streaming writers (``writers``), the dataset card
(``card``), what a capture learns from the raw labels (``labels``), the documents a snapshot
freezes (``frozen``) and the text of the statements PostgreSQL runs to freeze and spell them
itself (``sql``). No queries here: the services in ``reviews/services/exports.py`` read and
write the database and call these.
"""
