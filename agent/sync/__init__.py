"""Agent-to-cloud sync (docs/design.md section 8): outbox, pairing, uploader, identity replica."""
