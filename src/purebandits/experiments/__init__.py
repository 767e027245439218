"""Reproduced tables and figures of the five papers (one module each)."""
