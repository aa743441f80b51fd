"""Crop catalogue data (catalogue.toml), read by agent.services.grow_plans.crop_catalogue."""
