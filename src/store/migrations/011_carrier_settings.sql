-- The settings of carriers other than Twilio and SIP (which keep their own columns), one key per
-- carrier id: {"telnyx": {...}} (src/telephony/registry.ts). A new carrier needs no migration.
ALTER TABLE account_settings ADD COLUMN carriers jsonb;
