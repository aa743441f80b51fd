"""Readings: the durable writer, the fan-out of committed readings, queries and retention."""
