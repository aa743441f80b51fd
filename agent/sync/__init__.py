"""Agent-to-cloud sync (DESIGN.md section 8): outbox, pairing, uploader, identity replica."""
