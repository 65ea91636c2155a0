"""Conformance suite: the same behaviours against independent broker implementations."""
