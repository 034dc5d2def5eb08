-- Test suites for assistants (DECISIONS 20) and their runs. A suite names its assistant and
-- workflow without a foreign key: deleting them is not refused; a run then fails each test
-- saying so. A run's results are one JSON array, written as its tests finish.
CREATE TABLE test_suites (
  id               uuid PRIMARY KEY,
  organization_id  uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  name             text NOT NULL,
  assistant_id     uuid NOT NULL,
  workflow_id      uuid,
  llm_config       jsonb,
  tests            jsonb NOT NULL,
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX test_suites_org_created ON test_suites (organization_id, created_at, id);

CREATE TABLE test_suite_runs (
  id               uuid PRIMARY KEY,
  organization_id  uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  suite_id         uuid NOT NULL REFERENCES test_suites (id) ON DELETE CASCADE,
  -- running, passed or failed
  status           text NOT NULL,
  results          jsonb NOT NULL,
  created_at       timestamptz NOT NULL,
  ended_at         timestamptz,
  -- a run still running after this was lost with its process (it reads as failed)
  deadline_at      timestamptz NOT NULL
);
CREATE INDEX test_suite_runs_suite_created ON test_suite_runs (suite_id, created_at DESC, id DESC);
