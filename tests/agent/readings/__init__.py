"""Readings store, ingest writer, queries and retention."""
