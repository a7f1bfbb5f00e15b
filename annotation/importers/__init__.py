"""Importers and exporters for every source format Quire reads (see base.get_format)."""
