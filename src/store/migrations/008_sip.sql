-- Direct SIP (DECISIONS 15): the organization's trunk settings (passwords in here are never
-- returned by the API), and numbers whose calls come and go over it (provider 'sip').
ALTER TABLE account_settings ADD COLUMN sip jsonb;
