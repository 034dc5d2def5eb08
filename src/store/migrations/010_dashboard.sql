-- The dashboard (DECISIONS 19): a name for each API key (GET/POST/DELETE /keys), a workflow's
-- layout (where the editor draws each node) kept beside its definition, not in it.
ALTER TABLE api_keys ADD COLUMN name text;
-- {"<node id>": {"x": number, "y": number}}; {} until the editor saves one
ALTER TABLE workflows ADD COLUMN layout jsonb NOT NULL DEFAULT '{}';
-- The overview (GET /calls/stats): a period's calls counted from this index alone, not their rows
CREATE INDEX calls_org_created_stats ON calls (organization_id, created_at) INCLUDE (status, ended_reason, started_at, ended_at);
-- The search by customer number (GET /calls?customer=) matches a substring, which no index
-- finds; this one lets the database read the numbers from the index instead of every whole row
CREATE INDEX calls_org_customer ON calls (organization_id, customer_number, created_at DESC, id DESC)
  WHERE customer_number IS NOT NULL;
-- The {{variables}} given for each call (POST /calls, POST /calls/web, an assistant-request
-- answer), shown on the call's page; {} with gdpr_mode
ALTER TABLE calls ADD COLUMN variables jsonb NOT NULL DEFAULT '{}';
