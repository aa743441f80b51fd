"""The integrations with systems outside the farm, one package each (docs/design.md section 2)."""
