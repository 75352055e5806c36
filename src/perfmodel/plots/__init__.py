"""Figures drawn from the public API's outputs (matplotlib is imported only in here)."""
