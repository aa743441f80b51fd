"""Grow plans: the crop catalogue, plans and their progress, the harvest-ready notice."""
