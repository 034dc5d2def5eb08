-- Warm transfers (DECISIONS 16): a call's transfer, cold or warm ({mode, destination, result,
-- summary, operator_answered_at, joined_at}); null when it had none.
ALTER TABLE calls ADD COLUMN transfer jsonb;
