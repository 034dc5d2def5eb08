-- Notification e-mails (DECISIONS 13): one row per attempt at one e-mail (one recipient of one
-- call), so that a customer can see what happened to a call's e-mails (GET /calls/{id}/emails).
-- Neither the message nor anything of the conversation is kept here (gdpr_mode).
CREATE TABLE email_attempts (
  id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  organization_id  uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  call_id          uuid NOT NULL,
  -- the e-mail's id, the same on every attempt at it (its Message-ID is <email_id@sender domain>)
  email_id         text NOT NULL,
  recipient        text NOT NULL,
  attempt          integer NOT NULL,
  -- sent | retrying | failed | gave-up
  outcome          text NOT NULL,
  -- the SMTP server's reply code and text (null when no reply came: connection refused, timeout)
  smtp_code        integer,
  smtp_response    text,
  error            text,
  duration_ms      integer NOT NULL,
  next_retry_at    timestamptz,
  created_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX email_attempts_call ON email_attempts (organization_id, call_id, created_at, id);
