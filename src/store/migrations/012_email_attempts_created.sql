-- Retention (EMAIL_ATTEMPT_RETENTION_DAYS): the pruner deletes the oldest e-mail attempts in small
-- batches, oldest first; this index lets each batch find them without scanning the table.
CREATE INDEX email_attempts_created ON email_attempts (created_at);
