"""Crop catalogue data (catalogue.toml), read by agent.services.crop_catalogue."""
