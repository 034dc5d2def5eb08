-- Outbound calls (DECISIONS 11): who the call was for and who answered it, in the call log; the
-- organization's dialling limits in its account settings.
ALTER TABLE calls ADD COLUMN customer_name text;
-- human | machine | unknown; null for inbound calls and outbound calls not answered (yet)
ALTER TABLE calls ADD COLUMN answered_by text;
-- {"max_concurrent_calls": int, "calls_per_second": number}; null: the defaults (10, 1)
ALTER TABLE account_settings ADD COLUMN outbound jsonb;
