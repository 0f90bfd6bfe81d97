"""Everyday private tests: proportions, ranks, distributions, tables, bounded means."""

__all__ = []
