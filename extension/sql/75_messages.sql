-- Recall: earlier chat messages, embedded and searched across a
-- user's chats. Messages live in their owner's user namespace and share the
-- facts' embedding columns, pending pipeline and ranking.

CREATE OR REPLACE FUNCTION memory._message_text(message jsonb, key text, max_bytes int) RETURNS text
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF jsonb_typeof(message -> key) IS DISTINCT FROM 'string' OR message ->> key = ''
       OR octet_length(message ->> key) > max_bytes THEN
        PERFORM memory._fail('MEMORY_INVALID',
            format('message %s must be a non-empty string of at most %s bytes', key, max_bytes));
    END IF;
    RETURN message ->> key;
END
$$;

-- Indexes one message {id, chat_id, owner_id, role, content, temporary?,
-- created_at? (ISO 8601), embedding_model?} (service only); idempotent per
-- (org, owner, chat_id, id).
-- A temporary chat stores nothing and answers false. Changed content makes
-- the embedding pending again (unless a new one comes with it).
CREATE OR REPLACE FUNCTION memory.index_message(org uuid, message jsonb, embedding real[] DEFAULT NULL) RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    owner memory.namespaces;
    content text;
    vec @extschema:vector@.vector;
    created timestamptz;
BEGIN
    PERFORM memory._require_service();
    vec := memory._embedding(embedding);
    IF jsonb_typeof(message) IS DISTINCT FROM 'object' THEN
        PERFORM memory._fail('MEMORY_INVALID', 'message must be a JSON object');
    END IF;
    IF message ? 'temporary' AND jsonb_typeof(message -> 'temporary') NOT IN ('boolean', 'null') THEN
        PERFORM memory._fail('MEMORY_INVALID', 'message temporary must be a boolean');
    END IF;
    IF (message ->> 'temporary')::boolean THEN
        RETURN false;
    END IF;
    IF jsonb_typeof(message -> 'owner_id') IS DISTINCT FROM 'string' OR NOT memory._is_uuid(message ->> 'owner_id') THEN
        PERFORM memory._fail('MEMORY_INVALID', 'message owner_id must be a uuid');
    END IF;
    IF jsonb_typeof(message -> 'content') IS DISTINCT FROM 'string' THEN
        PERFORM memory._fail('MEMORY_INVALID', 'message content must be a string');
    END IF;
    content := message ->> 'content';
    PERFORM memory._check_size(content, 'Message');
    created := coalesce(memory._timestamp(message -> 'created_at', 'message created_at'), now());
    owner := memory._resolve(org, jsonb_build_object('owner_id', message ->> 'owner_id'), 'write');
    INSERT INTO memory.messages AS m (organization_id, namespace_id, chat_id, message_id, role, content,
                                      embedding, embedding_model, created_at)
    VALUES (org, owner.id, memory._message_text(message, 'chat_id', 1024), memory._message_text(message, 'id', 1024),
            memory._message_text(message, 'role', 64), content,
            vec, CASE WHEN vec IS NOT NULL THEN message ->> 'embedding_model' END, created)
    ON CONFLICT ON CONSTRAINT messages_message_key DO UPDATE
    SET role = excluded.role, content = excluded.content, created_at = excluded.created_at, indexed_at = now(),
        embedding = CASE WHEN excluded.embedding IS NOT NULL THEN excluded.embedding
                         WHEN m.content_hash = excluded.content_hash THEN m.embedding END,
        embedding_model = CASE WHEN excluded.embedding IS NOT NULL THEN excluded.embedding_model
                               WHEN m.content_hash = excluded.content_hash THEN m.embedding_model END,
        lease_until = NULL;
    -- The chat is pending capture (a failed one stays parked until retry_captures).
    INSERT INTO memory.captures AS c (organization_id, namespace_id, chat_id, owner_id)
    VALUES (org, owner.id, message ->> 'chat_id', owner.owner_id)
    ON CONFLICT ON CONSTRAINT captures_pkey DO UPDATE SET indexed_at = now();
    RETURN true;
END
$$;

-- The caller's own closest earlier messages, across chats; `exclude_chat`
-- leaves out the chat the conversation is in.
CREATE OR REPLACE FUNCTION memory.search_messages(org uuid, query text, query_embedding real[] DEFAULT NULL,
                                       exclude_chat text DEFAULT NULL, k int DEFAULT 5, options jsonb DEFAULT '{}')
RETURNS SETOF memory.message_hit
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- For this function only: PostgreSQL restores the caller's values on return and on error.
SET hnsw.iterative_scan = 'relaxed_order'
SET hnsw.ef_search = 800  -- as search_facts
SET hnsw.max_scan_tuples = 100000
AS $$
DECLARE
    own uuid := (memory._resolve(org, '{}', 'read')).id;
    vec @extschema:vector@.vector := memory._embedding(query_embedding);
    opts jsonb := memory._search_options(options);
    least_similar float8 := (opts ->> 'min_similarity')::float8;
BEGIN
    PERFORM memory._check_between('k', k, 1, 100);
    IF opts ? 'ef_search' THEN  -- as search_facts: undone on return
        PERFORM set_config('hnsw.ef_search', opts ->> 'ef_search', true);
    END IF;
    RETURN QUERY
    SELECT m.message_id, m.chat_id, m.role, m.content, r.score,
           1 - (m.embedding OPERATOR(@extschema:vector@.<=>) vec)::float8, m.created_at
    FROM memory._rank('message', org, ARRAY[own], exclude_chat, query, vec, k, options) r
    JOIN memory.messages m ON m.organization_id = org AND m.id = r.id
    WHERE memory._similar_enough(1 - (m.embedding OPERATOR(@extschema:vector@.<=>) vec)::float8, least_similar)
    ORDER BY r.score DESC, m.id;
END
$$;

-- Deletes a chat's messages: a user's own, or (the service) everyone's.
CREATE OR REPLACE FUNCTION memory.delete_chat(org uuid, chat_id text) RETURNS int
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    who memory.caller := memory._caller();
    own uuid;
    deleted int;
BEGIN
    IF org IS NULL THEN
        PERFORM memory._fail('MEMORY_INVALID', 'an organization id is required');
    END IF;
    IF NOT who.service THEN
        own := (memory._resolve(org, '{}', 'read')).id;
    END IF;
    DELETE FROM memory.messages m
    WHERE m.organization_id = org AND m.chat_id = delete_chat.chat_id
      AND (who.service OR m.namespace_id = own);
    GET DIAGNOSTICS deleted = ROW_COUNT;
    DELETE FROM memory.captures c
    WHERE c.organization_id = org AND c.chat_id = delete_chat.chat_id
      AND (who.service OR c.namespace_id = own);
    RETURN deleted;
END
$$;
