-- What was observed of a call (DECISIONS 21): its trace id, its turns with their latency split
-- and the p50/p95 of their totals, its usage by provider and model, and its cost; null until the
-- call ends (src/observability/). An organization's own prices over the shipped ones.
ALTER TABLE calls ADD COLUMN observed jsonb;
ALTER TABLE account_settings ADD COLUMN pricing jsonb;
