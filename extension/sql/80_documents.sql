-- Documents for agent runtimes, service only: versioned text
-- under an opaque scope key (at most 8,192 bytes) and path (at most 4,096
-- bytes), with optimistic concurrency and an optional lifetime. An expired
-- document reads as absent before any purge.

CREATE OR REPLACE FUNCTION memory._document_key(scope_key text, path text, OUT scope_hash bytea, OUT path_hash bytea)
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF scope_key IS NULL OR scope_key = '' OR octet_length(scope_key) > 8192 THEN
        PERFORM memory._fail('MEMORY_INVALID', 'scope_key must be a non-empty string of at most 8192 bytes');
    END IF;
    IF path IS NULL OR path = '' OR octet_length(path) > 4096 THEN
        PERFORM memory._fail('MEMORY_INVALID', 'path must be a non-empty string of at most 4096 bytes');
    END IF;
    scope_hash := sha256(convert_to(scope_key, 'UTF8'));
    path_hash := sha256(convert_to(path, 'UTF8'));
END
$$;

-- The live document, locked for a change (expired ones count as absent).
CREATE OR REPLACE FUNCTION memory._document_for_update(scope_key text, path text) RETURNS memory.documents
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
    -- Positional: in a SQL function a column named like an argument would win.
    SELECT d.* FROM memory._document_key($1, $2) k
    JOIN memory.documents d ON d.scope_hash = k.scope_hash AND d.path_hash = k.path_hash
    FOR UPDATE OF d
$$;

CREATE OR REPLACE FUNCTION memory._live(expires_at timestamptz) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT expires_at IS NULL OR expires_at > now() $$;

CREATE OR REPLACE FUNCTION memory.document_read(scope_key text, path text) RETURNS jsonb
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    key record;
    doc memory.documents;
BEGIN
    PERFORM memory._require_service();
    key := memory._document_key(scope_key, path);
    SELECT d.* INTO doc FROM memory.documents d
    WHERE d.scope_hash = key.scope_hash AND d.path_hash = key.path_hash AND memory._live(d.expires_at);
    IF doc.version IS NULL THEN
        RETURN NULL;
    END IF;
    RETURN jsonb_build_object('content', doc.content, 'version', doc.version,
                              'expires_at', doc.expires_at, 'updated_at', doc.updated_at);
END
$$;

-- The error for a document that is not at the version the caller expected.
CREATE OR REPLACE FUNCTION memory._document_conflict(path text, version bigint, expected_version bigint) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM memory._fail('MEMORY_DOCUMENT_CONFLICT',
        format('document %s is at version %s, not %s', path, coalesce(version::text, 'none'), expected_version));
END
$$;

-- Writes a document; expected_version null = it must not exist yet, n = it
-- must still be at version n; otherwise MEMORY_DOCUMENT_CONFLICT and nothing
-- is written. expires_in (seconds) sets a lifetime; null means none.
CREATE OR REPLACE FUNCTION memory.document_write(scope_key text, path text, content text, expected_version bigint,
                                      expires_in int DEFAULT NULL) RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    key record;
    existing memory.documents;
    expires timestamptz := now() + make_interval(secs => expires_in);
    written bigint;
BEGIN
    PERFORM memory._require_service();
    key := memory._document_key(scope_key, path);
    IF content IS NULL OR length(content) > 10000000 THEN
        PERFORM memory._fail('MEMORY_INVALID', 'content must be a string of at most 10,000,000 characters');
    END IF;
    IF expires_in <= 0 THEN
        PERFORM memory._fail('MEMORY_INVALID', 'expires_in must be a positive number of seconds');
    END IF;
    existing := memory._document_for_update(scope_key, path);
    IF existing.version IS NOT NULL AND NOT memory._live(existing.expires_at) THEN
        DELETE FROM memory.documents d WHERE d.scope_hash = key.scope_hash AND d.path_hash = key.path_hash;
        existing := NULL;
    END IF;
    IF expected_version IS NULL THEN
        INSERT INTO memory.documents (scope_hash, path_hash, scope_key, path, content, expires_at)
        VALUES (key.scope_hash, key.path_hash, scope_key, path, content, expires)
        ON CONFLICT ON CONSTRAINT documents_pkey DO NOTHING
        RETURNING version INTO written;
        IF written IS NULL THEN
            PERFORM memory._fail('MEMORY_DOCUMENT_CONFLICT',
                format('document %s already exists (expected it not to)', path));
        END IF;
        RETURN written;
    END IF;
    IF existing.version IS DISTINCT FROM expected_version THEN
        PERFORM memory._document_conflict(path, existing.version, expected_version);
    END IF;
    UPDATE memory.documents d
    SET content = document_write.content, version = d.version + 1, expires_at = expires, updated_at = now()
    WHERE d.scope_hash = key.scope_hash AND d.path_hash = key.path_hash
    RETURNING d.version INTO written;
    RETURN written;
END
$$;

-- Deletes a document; expected_version null deletes whatever is there, n
-- only version n (else MEMORY_DOCUMENT_CONFLICT). True when one was deleted.
CREATE OR REPLACE FUNCTION memory.document_delete(scope_key text, path text, expected_version bigint DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    existing memory.documents;
BEGIN
    PERFORM memory._require_service();
    PERFORM memory._document_key(scope_key, path);  -- refuses bad keys even when nothing matches
    existing := memory._document_for_update(scope_key, path);
    IF existing.version IS NOT NULL AND NOT memory._live(existing.expires_at) THEN
        existing := NULL;
    END IF;
    IF expected_version IS NOT NULL AND existing.version IS DISTINCT FROM expected_version THEN
        PERFORM memory._document_conflict(path, existing.version, expected_version);
    END IF;
    DELETE FROM memory.documents d
    WHERE d.scope_hash = existing.scope_hash AND d.path_hash = existing.path_hash;
    RETURN existing.version IS NOT NULL;
END
$$;

CREATE OR REPLACE FUNCTION memory.document_list(scope_key text, prefix text DEFAULT '')
RETURNS TABLE (path text, version bigint, expires_at timestamptz, updated_at timestamptz)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    key record;
BEGIN
    PERFORM memory._require_service();
    key := memory._document_key(scope_key, '-');
    RETURN QUERY
    SELECT d.path, d.version, d.expires_at, d.updated_at FROM memory.documents d
    WHERE d.scope_hash = key.scope_hash AND starts_with(d.path, coalesce(prefix, ''))
      AND memory._live(d.expires_at)
    ORDER BY d.path COLLATE "C";
END
$$;

-- Removes expired documents; returns how many.
CREATE OR REPLACE FUNCTION memory.purge_documents() RETURNS int
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    purged int;
BEGIN
    PERFORM memory._require_service();
    DELETE FROM memory.documents d WHERE d.expires_at <= now();
    GET DIAGNOSTICS purged = ROW_COUNT;
    RETURN purged;
END
$$;
