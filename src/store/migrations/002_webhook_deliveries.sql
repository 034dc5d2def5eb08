-- Webhook delivery attempts: one row per attempt, so that a customer can see what happened to
-- the requests of a call (GET /calls/{id}/webhooks). Bodies are not kept (gdpr_mode).
CREATE TABLE webhook_deliveries (
  id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  organization_id  uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  call_id          uuid NOT NULL,
  message_id       text NOT NULL,
  event            text NOT NULL,
  url              text NOT NULL,
  attempt          integer NOT NULL,
  -- delivered | retrying | failed | gave-up
  outcome          text NOT NULL,
  status_code      integer,
  error            text,
  duration_ms      integer NOT NULL,
  next_retry_at    timestamptz,
  created_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_deliveries_call ON webhook_deliveries (organization_id, call_id, created_at, id);
CREATE INDEX webhook_deliveries_message ON webhook_deliveries (message_id);
