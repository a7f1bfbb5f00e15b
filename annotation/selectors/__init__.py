"""Reads that views, APIs and commands share, one module per area: ``corpus`` (datasets,
items, exports), ``workbench`` (what an annotator sees of their own work) and
``dashboard`` (what a lead sees of a project)."""
