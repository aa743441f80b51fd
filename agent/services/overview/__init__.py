"""The farm overview: one farm at a glance, read from every other capability."""
