-- Tables. Every primary key and unique constraint contains its table's
-- distribution column (organization_id; documents: scope_hash) and no foreign
-- key crosses organizations, so the same schema distributes on Citus
-- (docs/scale-out.md; tests/sql/test_catalog.py checks it).
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

-- Values derived from a memory's content are computed in one place each, never
-- by its writers: the hash and the dedupe key are generated columns, the
-- tsvector is set by a trigger (it follows setting text_search_config, so it
-- cannot be a generated column); see memory._derive_search_text.

-- The dedupe key of a text: trimmed, whitespace collapsed, lower-cased, hashed.
CREATE FUNCTION memory._normalized_key(content text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT md5(lower(regexp_replace(btrim(content), '\s+', ' ', 'g'))) $$;

-- Archival memory: facts with an embedding (null = pending) and a tsvector.
-- The embedding column's type and dimension follow memory.configure_embeddings;
-- its storage is memory._keep_vectors_inline's.
CREATE TABLE memory.facts (
    organization_id uuid NOT NULL,
    id uuid NOT NULL DEFAULT gen_random_uuid(),
    namespace_id uuid NOT NULL,
    content text NOT NULL CHECK (content <> ''),
    -- set_memory_embeddings writes a vector only while the hash still matches
    content_hash text NOT NULL GENERATED ALWAYS AS (md5(content)) STORED,
    -- dedupe without embeddings
    text_key text NOT NULL GENERATED ALWAYS AS (memory._normalized_key(content)) STORED,
    search_text tsvector NOT NULL,  -- memory._derive_search_text
    embedding @extschema:vector@.vector(1536),
    embedding_model text,
    lease_until timestamptz,      -- pending_embeddings hands a row to one worker at a time
    version bigint NOT NULL DEFAULT 1 CHECK (version > 0),
    source jsonb,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    forgotten_at timestamptz,
    superseded_by uuid,
    -- in the shared HNSW index: memory._derive_in_shared_index
    in_shared_index boolean NOT NULL DEFAULT false,
    PRIMARY KEY (organization_id, id),
    FOREIGN KEY (organization_id, namespace_id)
        REFERENCES memory.namespaces (organization_id, id) ON DELETE CASCADE
);
CREATE INDEX facts_live_idx ON memory.facts (organization_id, namespace_id, text_key)
    WHERE forgotten_at IS NULL;
-- Not unique: ids are unique per organization (the primary key), so an export
-- imports into another organization as it is. This one serves the embedding
-- pipeline, which is handed ids across organizations.
CREATE INDEX facts_id_idx ON memory.facts (id);
-- Only the facts of namespaces past exact_search_max_rows: a smaller one is
-- always ranked exactly, and each entry in the graph is most of a save's cost.
CREATE INDEX facts_embedding_idx ON memory.facts
    USING hnsw (embedding @extschema:vector@.vector_cosine_ops) WHERE forgotten_at IS NULL AND in_shared_index;
-- The live facts outside that index, which a search through it ranks exactly.
CREATE INDEX facts_unshared_idx ON memory.facts (organization_id, namespace_id)
    WHERE forgotten_at IS NULL AND NOT in_shared_index;
-- The namespace is a key of the text index (an array, since GIN has no uuid opclass
-- without btree_gin): a search reads only its namespaces' postings (bench/search.py).
CREATE INDEX facts_search_idx ON memory.facts USING gin ((ARRAY[namespace_id]), search_text)
    WHERE forgotten_at IS NULL;
CREATE INDEX facts_pending_idx ON memory.facts (created_at)
    WHERE embedding IS NULL AND forgotten_at IS NULL;
ALTER TABLE memory.facts ENABLE ROW LEVEL SECURITY;
SELECT pg_catalog.pg_extension_config_dump('memory.facts', '');

-- Recall: one row per indexed chat message, in its owner's user namespace.
-- Same embedding and search columns as facts: one pending pipeline and one
-- ranking serve both.
CREATE TABLE memory.messages (
    organization_id uuid NOT NULL,
    id uuid NOT NULL DEFAULT gen_random_uuid(),
    namespace_id uuid NOT NULL,
    chat_id text NOT NULL CHECK (chat_id <> '' AND octet_length(chat_id) <= 1024),
    message_id text NOT NULL CHECK (message_id <> '' AND octet_length(message_id) <= 1024),
    role text NOT NULL CHECK (role <> '' AND octet_length(role) <= 64),
    content text NOT NULL,
    content_hash text NOT NULL GENERATED ALWAYS AS (md5(content)) STORED,
    search_text tsvector NOT NULL,  -- memory._derive_search_text
    embedding @extschema:vector@.vector(1536),
    embedding_model text,
    lease_until timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(),
    indexed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (organization_id, id),
    -- A message is its owner's: the same chat and message ids under another
    -- owner are another row, so no one's messages can block or shadow another's.
    CONSTRAINT messages_message_key UNIQUE (organization_id, namespace_id, chat_id, message_id),
    FOREIGN KEY (organization_id, namespace_id)
        REFERENCES memory.namespaces (organization_id, id) ON DELETE CASCADE
);
-- The service's delete_chat, and a chat's messages in their order from a
-- watermark on (capture): a long chat's captured history is never read again.
CREATE INDEX messages_chat_idx ON memory.messages (organization_id, chat_id, namespace_id, created_at, id);
CREATE INDEX messages_id_idx ON memory.messages (id);  -- as facts_id_idx
CREATE INDEX messages_embedding_idx ON memory.messages
    USING hnsw (embedding @extschema:vector@.vector_cosine_ops);
CREATE INDEX messages_search_idx ON memory.messages USING gin ((ARRAY[namespace_id]), search_text);
CREATE INDEX messages_pending_idx ON memory.messages (created_at) WHERE embedding IS NULL;
ALTER TABLE memory.messages ENABLE ROW LEVEL SECURITY;
SELECT pg_catalog.pg_extension_config_dump('memory.messages', '');

-- Documents for agent runtimes (service only): opaque scope keys and paths,
-- keyed by their digests because a btree entry cannot hold 4 KB keys.
CREATE TABLE memory.documents (
    scope_hash bytea NOT NULL,
    path_hash bytea NOT NULL,
    scope_key text NOT NULL CHECK (scope_key <> '' AND octet_length(scope_key) <= 8192),
    path text NOT NULL CHECK (path <> '' AND octet_length(path) <= 4096),
    content text NOT NULL,
    version bigint NOT NULL DEFAULT 1 CHECK (version > 0),
    expires_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scope_hash, path_hash)
);
CREATE INDEX documents_expiry_idx ON memory.documents (expires_at) WHERE expires_at IS NOT NULL;
ALTER TABLE memory.documents ENABLE ROW LEVEL SECURITY;
SELECT pg_catalog.pg_extension_config_dump('memory.documents', '');

-- Capture: one row per chat of an owner whose messages are captured into
-- facts (memory.pending_captures). The watermark is the last captured
-- message (created_at, id); the messages after it are pending. A lease hands
-- the chat to one worker (capture_id) up to lease_through, the last message
-- it was given.
CREATE TABLE memory.captures (
    organization_id uuid NOT NULL,
    namespace_id uuid NOT NULL,
    chat_id text NOT NULL CHECK (chat_id <> '' AND octet_length(chat_id) <= 1024),
    owner_id uuid NOT NULL,
    watermark_at timestamptz,
    watermark_id uuid,
    status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'failed')),
    attempts int NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    last_error text,
    lease_until timestamptz,
    capture_id uuid,
    lease_through_at timestamptz,
    lease_through_id uuid,
    indexed_at timestamptz NOT NULL DEFAULT now(),  -- the chat's last indexed message: idle since
    captured_at timestamptz,
    PRIMARY KEY (organization_id, namespace_id, chat_id),
    CHECK ((watermark_at IS NULL) = (watermark_id IS NULL)),
    FOREIGN KEY (organization_id, namespace_id)
        REFERENCES memory.namespaces (organization_id, id) ON DELETE CASCADE
);
CREATE INDEX captures_pending_idx ON memory.captures (indexed_at) WHERE status = 'pending';
CREATE INDEX captures_lease_idx ON memory.captures (capture_id) WHERE capture_id IS NOT NULL;
ALTER TABLE memory.captures ENABLE ROW LEVEL SECURITY;
SELECT pg_catalog.pg_extension_config_dump('memory.captures', '');

-- Recall replays: what memory.recall_context answered under an operation id,
-- kept for setting recall_replay_seconds so that the same caller asking again
-- gets exactly that answer. Keyed by the namespace whose memory the answer
-- holds — the calling user's own; for the service, the user namespace of the
-- owner named in `ns`, or the organization's — so erasing a user (their
-- namespaces) erases their replays too.
CREATE TABLE memory.recall_replays (
    organization_id uuid NOT NULL,
    namespace_id uuid NOT NULL,
    service boolean NOT NULL,  -- asked by the service; else by the namespace's user
    operation_id text NOT NULL CHECK (operation_id <> '' AND octet_length(operation_id) <= 1024),
    answer jsonb NOT NULL CHECK (jsonb_typeof(answer) = 'array'),  -- [{id, kind, content}] in order
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (organization_id, namespace_id, service, operation_id),
    FOREIGN KEY (organization_id, namespace_id)
        REFERENCES memory.namespaces (organization_id, id) ON DELETE CASCADE
);
ALTER TABLE memory.recall_replays ENABLE ROW LEVEL SECURITY;
SELECT pg_catalog.pg_extension_config_dump('memory.recall_replays', '');

-- How many live rows of a namespace with an index of its own hold each of its
-- commoner lexemes (memory.maintain), so that a search there ranks only the
-- rows holding the query's rarer ones. Derived data, rebuilt by maintain().
CREATE TABLE memory.namespace_lexemes (
    organization_id uuid NOT NULL,
    namespace_id uuid NOT NULL,
    kind text NOT NULL CHECK (kind IN ('fact', 'message')),
    lexeme text NOT NULL,
    rows int NOT NULL CHECK (rows > 0),
    total int NOT NULL CHECK (total > 0),  -- the namespace's live rows when counted
    PRIMARY KEY (organization_id, namespace_id, kind, lexeme),
    FOREIGN KEY (organization_id, namespace_id)
        REFERENCES memory.namespaces (organization_id, id) ON DELETE CASCADE
);
ALTER TABLE memory.namespace_lexemes ENABLE ROW LEVEL SECURITY;

-- The namespaces whose facts go into the shared HNSW index (facts_embedding_idx):
-- those that have held more than exact_search_max_rows live facts. A namespace
-- joins when save_facts or memory.maintain() finds it past the line, and stays.
CREATE TABLE memory.shared_index_namespaces (
    organization_id uuid NOT NULL,
    namespace_id uuid NOT NULL,
    joined_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (organization_id, namespace_id),
    FOREIGN KEY (organization_id, namespace_id)
        REFERENCES memory.namespaces (organization_id, id) ON DELETE CASCADE
);
ALTER TABLE memory.shared_index_namespaces ENABLE ROW LEVEL SECURITY;
SELECT pg_catalog.pg_extension_config_dump('memory.shared_index_namespaces', '');
