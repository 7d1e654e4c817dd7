"""Hivenote's server side: the notebook core, the store and everything that serves them (no GUI imports)."""

__version__ = "0.1.0"
