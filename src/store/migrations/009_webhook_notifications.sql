-- Notifications (status-update, end-of-call-report) not yet delivered, failed or given up: the
-- durable record of what the delivery queue must send (DECISIONS 22). A row is written before
-- the message is queued and deleted once its last attempt is made; the reconciler re-queues the
-- rows the queue lost (a Redis restart without persistence). `seq` keeps each call's order.
CREATE TABLE webhook_notifications (
  id               text PRIMARY KEY,
  seq              bigint GENERATED ALWAYS AS IDENTITY,
  organization_id  uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  call_id          uuid NOT NULL,
  event            text NOT NULL,
  url              text NOT NULL,
  secret           text,
  body             text NOT NULL,
  created_at       timestamptz NOT NULL
);
CREATE INDEX webhook_notifications_seq ON webhook_notifications (seq);
-- The calls the sweep looks at: those the log has as not over yet.
CREATE INDEX calls_unfinished ON calls (created_at) WHERE status IN ('queued', 'ringing', 'in-progress', 'forwarding');
