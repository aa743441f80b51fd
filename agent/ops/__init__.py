"""Running the agent as a service: systemd notification, serving, backups, salvage, install."""
