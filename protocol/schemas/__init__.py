"""Request and response models of /api/v1, shared by agent and cloud."""
