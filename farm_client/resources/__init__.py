"""Typed resources of /api/v1, one small class per collection."""
