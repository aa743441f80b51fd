"""Devices found on the farm network, listed until a person adds or ignores them."""
