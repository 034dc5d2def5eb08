-- The call log: every call of an organization from its first status to its report, kept after
-- the 24 h call session is gone and across restarts (GET /calls, GET /calls/{id}). Written by
-- src/calls/call-log.ts, pruned by age (CALL_RETENTION_DAYS). Neither the workflow definition nor
-- the assistant is copied here: `definition_hash` says which definition the call ran.
CREATE TABLE calls (
  id                 uuid PRIMARY KEY,
  organization_id    uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  -- inbound_phone_call (outbound_phone_call, web_call later)
  type               text NOT NULL,
  -- the way the call came in (twilio) and its ids there ({call_sid, account_sid})
  transport          text NOT NULL,
  transport_ids      jsonb NOT NULL DEFAULT '{}',
  -- no foreign keys to numbers, assistants or workflows: the log outlives them
  number_id          uuid,
  phone_number       text,
  phone_number_name  text,
  customer_number    text,
  assistant_id       uuid,
  workflow_id        uuid,
  -- sha256 hex of the definition's canonical JSON (the engine's hash), null without a workflow
  definition_hash    text,
  workflow_note      text,
  status             text NOT NULL,
  ended_reason       text,
  created_at         timestamptz NOT NULL,
  started_at         timestamptz,
  ended_at           timestamptz,
  -- [] with gdpr_mode
  messages           jsonb NOT NULL DEFAULT '[]',
  nodes_visited      jsonb NOT NULL DEFAULT '[]',
  current_node       text,
  errors             jsonb NOT NULL DEFAULT '[]',
  structured_data    jsonb,
  -- where the call's recording is kept, once recordings exist
  recording_ref      text,
  updated_at         timestamptz NOT NULL DEFAULT now()
);
-- GET /calls: newest first, keyset pagination on (created_at, id), and its filters
CREATE INDEX calls_org_created ON calls (organization_id, created_at DESC, id DESC);
CREATE INDEX calls_org_status_created ON calls (organization_id, status, created_at DESC, id DESC);
CREATE INDEX calls_org_assistant_created ON calls (organization_id, assistant_id, created_at DESC, id DESC)
  WHERE assistant_id IS NOT NULL;
CREATE INDEX calls_org_number_created ON calls (organization_id, number_id, created_at DESC, id DESC)
  WHERE number_id IS NOT NULL;
-- A replayed voice webhook finds its call by the carrier's id after the call session is gone
CREATE INDEX calls_transport_call ON calls (transport, (transport_ids->>'call_sid'));
-- Retention: the pruner deletes the oldest calls in small batches, oldest first
CREATE INDEX calls_created ON calls (created_at);
