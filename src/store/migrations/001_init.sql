-- Organizations, API keys, workflows, assistants, numbers and account settings.
CREATE TABLE organizations (
  id          uuid PRIMARY KEY,
  name        text NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE api_keys (
  id               uuid PRIMARY KEY,
  organization_id  uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  prefix           text NOT NULL UNIQUE,
  key_hash         text NOT NULL UNIQUE,
  created_at       timestamptz NOT NULL DEFAULT now(),
  revoked_at       timestamptz
);

CREATE TABLE workflows (
  id               uuid PRIMARY KEY,
  organization_id  uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  name             text NOT NULL,
  is_active        boolean NOT NULL DEFAULT true,
  definition       jsonb NOT NULL,
  entry_node       text NOT NULL,
  node_count       integer NOT NULL,
  edge_count       integer NOT NULL,
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now(),
  -- lets numbers reference (id, organization_id) so a number never points into another org
  UNIQUE (id, organization_id)
);
CREATE INDEX workflows_org_created ON workflows (organization_id, created_at, id);

CREATE TABLE assistants (
  id               uuid PRIMARY KEY,
  organization_id  uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  fields           jsonb NOT NULL,
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now(),
  UNIQUE (id, organization_id)
);
CREATE INDEX assistants_org_created ON assistants (organization_id, created_at, id);

CREATE TABLE numbers (
  id               uuid PRIMARY KEY,
  organization_id  uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  number           text NOT NULL UNIQUE,
  name             text,
  provider         text NOT NULL DEFAULT 'twilio',
  assistant_id     uuid,
  workflow_id      uuid,
  webhook          jsonb,
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now(),
  -- deleting a workflow or assistant that a number uses is refused by the database itself
  CONSTRAINT numbers_workflow_fk FOREIGN KEY (workflow_id, organization_id)
    REFERENCES workflows (id, organization_id) ON DELETE RESTRICT,
  CONSTRAINT numbers_assistant_fk FOREIGN KEY (assistant_id, organization_id)
    REFERENCES assistants (id, organization_id) ON DELETE RESTRICT
);
CREATE INDEX numbers_org_created ON numbers (organization_id, created_at, id);
CREATE INDEX numbers_workflow ON numbers (workflow_id) WHERE workflow_id IS NOT NULL;
CREATE INDEX numbers_assistant ON numbers (assistant_id) WHERE assistant_id IS NOT NULL;

CREATE TABLE account_settings (
  organization_id  uuid PRIMARY KEY REFERENCES organizations (id) ON DELETE CASCADE,
  webhook          jsonb,
  twilio           jsonb,
  updated_at       timestamptz NOT NULL DEFAULT now()
);
