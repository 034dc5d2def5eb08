-- The outbound dial queue of the in-process dialer (src/calls/dialer.ts; with REDIS_URL the
-- queue is BullMQ's and this table stays empty): one row per queued outbound call, from
-- `POST /calls` until the call is dialled, skipped or given up, so queued calls survive a restart.
-- `record` is the call's whole record as queued: the embedded default keeps call sessions in
-- memory only, and the dialer must be able to place the call after a restart.
CREATE TABLE outbound_queue (
  call_id          uuid PRIMARY KEY,
  organization_id  uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  record           jsonb NOT NULL,
  -- dial attempts started; above 0 after a restart: an earlier attempt may have reached the carrier
  attempts         integer NOT NULL DEFAULT 0,
  -- a retry after a failed dial waits until then
  not_before       timestamptz,
  created_at       timestamptz NOT NULL DEFAULT now(),
  -- FIFO within an organization: a campaign's rows share created_at (one statement), not seq
  seq              bigint GENERATED ALWAYS AS IDENTITY
);
CREATE INDEX outbound_queue_order ON outbound_queue (seq);
