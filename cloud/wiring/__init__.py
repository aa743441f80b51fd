"""Builders of the cloud's services, one module per capability (called by cloud/app.py)."""
