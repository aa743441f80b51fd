-- Retention of webhook deliveries: settled ones (delivered, failed) older than
-- CLOUD_WEBHOOK_DELIVERY_RETENTION_DAYS are deleted by the delivery loops, oldest first.
CREATE INDEX webhook_deliveries_settled ON webhook_deliveries (created_at)
    WHERE status <> 'pending';
