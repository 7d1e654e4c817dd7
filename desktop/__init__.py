"""Hivenote's desktop side: the tray app and dashboard window (imports hivenote.server, never the reverse)."""
