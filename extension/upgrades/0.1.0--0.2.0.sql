-- From 0.1.0 to 0.2.0: the state (tables, types, indexes) that changes.
-- Only DDL belongs here; every function, trigger, grant and comment of
-- sql/*.sql runs again after this step (docs/operations.md).

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

-- memory._nearest takes the search depth of a namespace's own index (ef_search).
DROP FUNCTION memory._nearest(text, uuid, uuid[], text, @extschema:vector@.vector, int, boolean, tstzrange);
-- memory._text_ranked takes the query text (a namespace with its own index ranks its rarer lexemes).
DROP FUNCTION memory._text_ranked(text, uuid, uuid[], text, tsquery, int, tstzrange);

-- memory.save_facts takes the facts' vectors as a trailing real[] (embeddings).
DROP FUNCTION memory.save_facts(uuid, jsonb, jsonb, double precision);
-- memory.set_memory_embeddings takes the batch's vectors as a trailing real[] too.
DROP FUNCTION memory.set_memory_embeddings(uuid[], text[], jsonb, text);

-- The shared HNSW index holds only the facts of namespaces past
-- exact_search_max_rows. Every fact is in it today, so every fact starts in;
-- the namespaces already past the line join (and the others' new facts stay out).
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
INSERT INTO memory.shared_index_namespaces (organization_id, namespace_id)
SELECT f.organization_id, f.namespace_id FROM memory.facts f
WHERE f.forgotten_at IS NULL
GROUP BY 1, 2 HAVING count(*) > memory._setting_int('exact_search_max_rows');
-- The index is dropped first and built once, after the column, with the new
-- predicate and the configured type's operator class: the whole graph again,
-- which takes a while on a large table.
DO $$
DECLARE
    definition text := regexp_replace(pg_get_indexdef('memory.facts_embedding_idx'::regclass), ' WHERE .*$',
                                      ' WHERE forgotten_at IS NULL AND in_shared_index');
BEGIN
    DROP INDEX memory.facts_embedding_idx;
    -- A volatile default makes PostgreSQL write the value into every row now
    -- (one rewrite of the table) rather than keep it as the column's missing
    -- value, which a fresh install's table does not have.
    ALTER TABLE memory.facts ADD COLUMN in_shared_index boolean NOT NULL DEFAULT (clock_timestamp() IS NOT NULL);
    ALTER TABLE memory.facts ALTER COLUMN in_shared_index SET DEFAULT false;
    EXECUTE definition;
END
$$;
CREATE INDEX facts_unshared_idx ON memory.facts (organization_id, namespace_id)
    WHERE forgotten_at IS NULL AND NOT in_shared_index;

-- A chat's messages in their order from a watermark on, for capture (it was
-- (organization_id, chat_id), which made every lease read the whole chat).
DROP INDEX memory.messages_chat_idx;
CREATE INDEX messages_chat_idx ON memory.messages (organization_id, chat_id, namespace_id, created_at, id);
