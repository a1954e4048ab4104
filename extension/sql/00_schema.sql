-- Tables. Every table leads its primary key with its distribution column
-- (organization_id) so the same schema distributes on Citus (SPEC §13).
-- Users never touch tables: no grants, and row-level security with no
-- policy as a second wall (functions run as the table owner, who bypasses it).

-- A namespace: the user (default), an agent/chat/project of that user, or
-- the organization itself. Its id is derived from its key (see
-- memory._namespace_id), so readers never need to look it up or create it.
CREATE TABLE memory.namespaces (
    organization_id uuid NOT NULL,
    id uuid NOT NULL,
    scope text NOT NULL CHECK (scope IN ('user', 'agent', 'chat', 'project', 'organization')),
    owner_id uuid,
    scope_id text,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (organization_id, id),
    CHECK ((scope = 'organization') = (owner_id IS NULL)),
    CHECK ((scope IN ('agent', 'chat', 'project')) = (scope_id IS NOT NULL))
);
CREATE INDEX namespaces_owner_idx ON memory.namespaces (organization_id, owner_id);

-- Core memory: one row per file; directories exist while a file lies below.
CREATE TABLE memory.files (
    organization_id uuid NOT NULL,
    namespace_id uuid NOT NULL,
    path text COLLATE "C" NOT NULL,
    content text NOT NULL,
    version bigint NOT NULL DEFAULT 1 CHECK (version > 0),
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (organization_id, namespace_id, path),
    FOREIGN KEY (organization_id, namespace_id)
        REFERENCES memory.namespaces (organization_id, id) ON DELETE CASCADE
);

-- Permissions granted with memory.grant (the default permission_check).
CREATE TABLE memory.permissions (
    organization_id uuid NOT NULL,
    user_id uuid NOT NULL,
    permission text NOT NULL CHECK (permission <> '' AND octet_length(permission) <= 256),
    granted_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (organization_id, user_id, permission)
);

-- Settings that differ from their defaults (memory._setting_defaults).
CREATE TABLE memory.settings (
    key text PRIMARY KEY,
    value jsonb NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

ALTER TABLE memory.namespaces ENABLE ROW LEVEL SECURITY;
ALTER TABLE memory.files ENABLE ROW LEVEL SECURITY;
ALTER TABLE memory.permissions ENABLE ROW LEVEL SECURITY;
ALTER TABLE memory.settings ENABLE ROW LEVEL SECURITY;

-- pg_dump keeps the rows of extension tables only when they are registered.
SELECT pg_catalog.pg_extension_config_dump('memory.namespaces', '');
SELECT pg_catalog.pg_extension_config_dump('memory.files', '');
SELECT pg_catalog.pg_extension_config_dump('memory.permissions', '');
SELECT pg_catalog.pg_extension_config_dump('memory.settings', '');
