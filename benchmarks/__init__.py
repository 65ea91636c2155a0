"""Throughput harness: the reference cluster against independent brokers, stock clients."""
