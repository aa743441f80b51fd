"""The farm hierarchy: farms, their rows, racks and shelves, and the sample farm."""
