-- Retention (WEBHOOK_DELIVERY_RETENTION_DAYS): the pruner deletes the oldest attempts in small
-- batches, oldest first; this index lets each batch find them without scanning the table.
CREATE INDEX webhook_deliveries_created ON webhook_deliveries (created_at);
