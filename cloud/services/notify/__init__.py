"""Notifications the cloud sends: farms whose agent went silent, and back (the contact points
are those the farm's agent syncs; integrations/notify/ sends)."""
