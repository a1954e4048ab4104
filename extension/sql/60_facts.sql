-- Archival memory: facts saved once (near-duplicates refused),
-- forgotten or superseded but kept, edited with a version bump.

CREATE OR REPLACE FUNCTION memory._search_text(content text) RETURNS tsvector
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT to_tsvector(memory._setting_text('text_search_config')::regconfig, content) $$;

-- Every writer of facts and messages gets its tsvector here, from its content.
CREATE OR REPLACE FUNCTION memory._derive_search_text() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    NEW.search_text := memory._search_text(NEW.content);
    RETURN NEW;
END
$$;

CREATE OR REPLACE TRIGGER facts_search_text BEFORE INSERT OR UPDATE OF content ON memory.facts
    FOR EACH ROW EXECUTE FUNCTION memory._derive_search_text();
CREATE OR REPLACE TRIGGER messages_search_text BEFORE INSERT OR UPDATE OF content ON memory.messages
    FOR EACH ROW EXECUTE FUNCTION memory._derive_search_text();

-- After text_search_config changes, every stored tsvector follows it.
CREATE OR REPLACE FUNCTION memory._rederive_search_text() RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t record;
BEGIN
    FOR t IN SELECT * FROM memory._memory_tables() LOOP
        EXECUTE format('UPDATE memory.%I SET search_text = memory._search_text(content)', t.table_name);
    END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION memory._check_fact_text(content text) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF content IS NULL OR btrim(content) = '' THEN
        PERFORM memory._fail('MEMORY_INVALID', 'a fact needs non-empty content');
    END IF;
    PERFORM memory._check_size(content, 'Fact');
END
$$;

-- A fact's provenance is small metadata, not a second copy of the conversation.
CREATE OR REPLACE FUNCTION memory._check_source(source jsonb) RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF octet_length(source::text) > 16384 THEN
        PERFORM memory._fail('MEMORY_TOO_LARGE',
            format('Fact source is %s bytes of JSON, over the limit of 16384 bytes', octet_length(source::text)));
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION memory._insert_fact(target memory.namespaces, content text,
                                    embedding @extschema:vector@.vector, source jsonb, model text) RETURNS uuid
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
    INSERT INTO memory.facts (organization_id, namespace_id, content, embedding, embedding_model, source)
    VALUES (target.organization_id, target.id, content, embedding,
            CASE WHEN embedding IS NOT NULL THEN model END, source)
    RETURNING id
$$;

-- Facts are [{"content", "embedding"?, "source"?, "embedding_model"?}].
-- Saves facts, refusing each one whose cosine similarity to a live fact of
-- the namespace (or an earlier fact of this batch) is >= threshold; without
-- an embedding a fact is deduplicated by its normalized text. Callers saving
-- into one namespace serialize on its lock, so a fact is stored once.
CREATE OR REPLACE FUNCTION memory.save_facts(org uuid, facts jsonb, ns jsonb DEFAULT '{}', threshold float8 DEFAULT NULL)
RETURNS TABLE (ord int, id uuid, duplicate_of uuid, similarity float8)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET hnsw.iterative_scan = 'relaxed_order'
SET hnsw.ef_search = 400  -- the top-1 dedupe check must not miss (bench/dedupe.py)
AS $$
DECLARE
    target memory.namespaces := memory._resolve(org, ns, 'write');
    item record;
    vecs @extschema:vector@.vector[] := '{}';  -- parsed once, by ordinal
    vec @extschema:vector@.vector;
    key text;
    nearest record;
    exact boolean;
    near_ids uuid[];       -- small namespace: each vector's nearest live fact before the batch
    near_sims float8[];
    batch_ids uuid[] := '{}';  -- and the facts this batch has saved so far
    batch_vecs @extschema:vector@.vector[] := '{}';
BEGIN
    threshold := coalesce(threshold, (memory.setting('dedupe_threshold'))::float8);
    IF threshold <= 0 OR threshold > 1 THEN
        PERFORM memory._fail('MEMORY_INVALID', 'threshold must be in (0, 1]');
    END IF;
    IF jsonb_typeof(facts) IS DISTINCT FROM 'array' OR jsonb_array_length(facts) > 1000 THEN
        PERFORM memory._fail('MEMORY_INVALID', 'facts must be a JSON array of at most 1000 facts');
    END IF;
    -- Validate the whole batch before saving any of it.
    FOR item IN SELECT f.value AS fact, f.n::int AS n FROM jsonb_array_elements(facts) WITH ORDINALITY f(value, n) LOOP
        IF jsonb_typeof(item.fact) <> 'object' OR jsonb_typeof(item.fact -> 'content') IS DISTINCT FROM 'string' THEN
            PERFORM memory._fail('MEMORY_INVALID', 'each fact must be an object with a "content" string');
        END IF;
        PERFORM memory._check_fact_text(item.fact ->> 'content');
        PERFORM memory._check_source(item.fact -> 'source');
        vecs[item.n] := CASE WHEN item.fact -> 'embedding' <> 'null'::jsonb
                             THEN memory._embedding_json(item.fact -> 'embedding') END;
    END LOOP;
    PERFORM memory._lock_namespace(target, 'facts');
    -- Exact or index is decided once per batch: the namespace barely changes meanwhile.
    exact := memory._small_set('fact', org, ARRAY[target.id], NULL);
    IF exact THEN
        -- Every vector's nearest fact, reading the namespace once rather than once per fact.
        WITH live AS MATERIALIZED (
            SELECT f.id, f.embedding FROM memory.facts f
            WHERE f.organization_id = org AND f.namespace_id = target.id
              AND f.forgotten_at IS NULL AND f.embedding IS NOT NULL)
        SELECT array_agg(nn.id ORDER BY b.n), array_agg(1 - nn.d ORDER BY b.n) INTO near_ids, near_sims
        FROM unnest(vecs) WITH ORDINALITY b(v, n)
        LEFT JOIN LATERAL (
            SELECT e.id, (e.embedding OPERATOR(@extschema:vector@.<=>) b.v)::float8 AS d FROM live e
            WHERE b.v IS NOT NULL
            ORDER BY 2, e.id LIMIT 1) nn ON true;
    END IF;
    FOR item IN SELECT f.value AS fact, f.n::int AS n FROM jsonb_array_elements(facts) WITH ORDINALITY f(value, n) LOOP
        ord := item.n;
        vec := vecs[item.n];
        key := memory._normalized_key(item.fact ->> 'content');  -- once, not per row scanned
        SELECT f.id, 1.0::float8 AS similarity INTO nearest FROM memory.facts f
        WHERE f.organization_id = org AND f.namespace_id = target.id AND f.forgotten_at IS NULL
          AND f.text_key = key
        ORDER BY f.created_at LIMIT 1;
        IF nearest.id IS NULL AND vec IS NOT NULL AND exact THEN
            SELECT c.id, c.similarity INTO nearest FROM (
                SELECT near_ids[item.n] AS id, near_sims[item.n] AS similarity
                UNION ALL
                SELECT s.id, 1 - (s.v OPERATOR(@extschema:vector@.<=>) vec)::float8
                FROM unnest(batch_ids, batch_vecs) s(id, v)) c
            WHERE c.id IS NOT NULL
            ORDER BY c.similarity DESC, c.id LIMIT 1;
        ELSIF nearest.id IS NULL AND vec IS NOT NULL THEN
            SELECT n.id, 1 - n.distance AS similarity INTO nearest
            FROM memory._nearest('fact', org, ARRAY[target.id], NULL, vec, 1, false) n;
        END IF;
        IF nearest.id IS NOT NULL AND nearest.similarity >= threshold THEN
            id := NULL; duplicate_of := nearest.id; similarity := nearest.similarity;
        ELSE
            id := memory._insert_fact(target, item.fact ->> 'content', vec, nullif(item.fact -> 'source', 'null'),
                                      item.fact ->> 'embedding_model');
            duplicate_of := NULL; similarity := NULL;
            IF exact AND vec IS NOT NULL THEN
                batch_ids := batch_ids || id; batch_vecs := batch_vecs || vec;
            END IF;
        END IF;
        nearest := NULL;
        RETURN NEXT;
    END LOOP;
END
$$;

-- One fact; returns its new id, or the id of the fact it duplicates.
CREATE OR REPLACE FUNCTION memory.save_fact(org uuid, content text, embedding real[] DEFAULT NULL, ns jsonb DEFAULT '{}',
                                 source jsonb DEFAULT NULL) RETURNS uuid
LANGUAGE sql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT coalesce(s.id, s.duplicate_of)
    FROM memory.save_facts(org, jsonb_build_array(jsonb_build_object(
        'content', content, 'embedding', to_jsonb(embedding), 'source', source)), ns) s
$$;

-- A fact of `org` and its namespace, locked for a write, once the caller may
-- `need` it. The organization comes first (a distributed table is routed by
-- it, and a caller without read permission there learns nothing of its ids);
-- another user's fact answers exactly like a missing one.
CREATE OR REPLACE FUNCTION memory._fact(org uuid, fact_id uuid, need text) RETURNS memory.facts
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    who memory.caller := memory._caller();
    fact memory.facts;
    home memory.namespaces;
BEGIN
    IF org IS NULL THEN
        PERFORM memory._fail('MEMORY_INVALID', 'an organization id is required');
    END IF;
    IF NOT who.service THEN
        PERFORM memory._check_permissions(org, who.user_id, 'user', 'read');
    END IF;
    IF need = 'write' THEN
        SELECT f.* INTO fact FROM memory.facts f WHERE f.organization_id = org AND f.id = fact_id FOR UPDATE;
    ELSE
        SELECT f.* INTO fact FROM memory.facts f WHERE f.organization_id = org AND f.id = fact_id;
    END IF;
    IF fact.id IS NULL THEN
        PERFORM memory._fail('MEMORY_NOT_FOUND', format('fact %s does not exist', fact_id));
    END IF;
    SELECT n.* INTO home FROM memory.namespaces n
    WHERE n.organization_id = fact.organization_id AND n.id = fact.namespace_id;
    PERFORM memory._authorize(home, need, format('fact %s does not exist', fact_id));
    RETURN fact;
END
$$;

CREATE OR REPLACE FUNCTION memory.forget(org uuid, id uuid, superseded_by uuid DEFAULT NULL) RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    fact memory.facts := memory._fact(org, id, 'write');
BEGIN
    IF superseded_by IS NOT NULL AND NOT EXISTS (
        SELECT FROM memory.facts s
        WHERE s.organization_id = fact.organization_id AND s.id = forget.superseded_by
          AND s.namespace_id = fact.namespace_id AND s.forgotten_at IS NULL AND s.id <> fact.id) THEN
        PERFORM memory._fail('MEMORY_INVALID',
            format('superseded_by %s is not a live fact of the same namespace', superseded_by));
    END IF;
    UPDATE memory.facts f
    SET forgotten_at = coalesce(f.forgotten_at, now()), superseded_by = forget.superseded_by,
        lease_until = NULL, updated_at = now()
    WHERE f.organization_id = fact.organization_id AND f.id = fact.id;
END
$$;

-- New content: the version goes up and the embedding waits to be recomputed.
CREATE OR REPLACE FUNCTION memory.edit_fact(org uuid, id uuid, content text) RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    fact memory.facts := memory._fact(org, id, 'write');
    version bigint;
BEGIN
    PERFORM memory._check_fact_text(content);
    UPDATE memory.facts f
    SET content = edit_fact.content,
        embedding = NULL, embedding_model = NULL, lease_until = NULL,
        version = f.version + 1, updated_at = now()
    WHERE f.organization_id = fact.organization_id AND f.id = fact.id
    RETURNING f.version INTO version;
    RETURN version;
END
$$;

CREATE OR REPLACE FUNCTION memory.get_fact(org uuid, id uuid) RETURNS jsonb
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    fact memory.facts := memory._fact(org, id, 'read');
BEGIN
    RETURN jsonb_build_object(
        'id', fact.id, 'content', fact.content, 'version', fact.version,
        'ns', (SELECT memory._ns_json(n) FROM memory.namespaces n
               WHERE n.organization_id = fact.organization_id AND n.id = fact.namespace_id),
        'created_at', fact.created_at, 'forgotten_at', fact.forgotten_at,
        'superseded_by', fact.superseded_by, 'embedding_pending', fact.embedding IS NULL,
        'source', fact.source);
END
$$;

-- A namespace's facts a page at a time, oldest first (forgotten ones too on
-- request), without a query: for listing and review. `after_id` continues
-- after that fact of the same namespace.
CREATE OR REPLACE FUNCTION memory.list_facts(org uuid, ns jsonb DEFAULT '{}', max int DEFAULT 100,
                                  after_id uuid DEFAULT NULL, include_forgotten boolean DEFAULT false)
RETURNS TABLE (id uuid, content text, version bigint, created_at timestamptz, forgotten_at timestamptz,
               superseded_by uuid, embedding_pending boolean)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    target memory.namespaces := memory._resolve(org, ns, 'read');
    cursor_at timestamptz;
BEGIN
    PERFORM memory._check_between('max', max, 1, 1000);
    IF after_id IS NOT NULL THEN
        SELECT f.created_at INTO cursor_at FROM memory.facts f
        WHERE f.organization_id = org AND f.namespace_id = target.id AND f.id = after_id;
        IF cursor_at IS NULL THEN
            PERFORM memory._fail('MEMORY_NOT_FOUND', format('fact %s does not exist', after_id));
        END IF;
    END IF;
    RETURN QUERY
    SELECT f.id, f.content, f.version, f.created_at, f.forgotten_at, f.superseded_by, f.embedding IS NULL
    FROM memory.facts f
    WHERE f.organization_id = org AND f.namespace_id = target.id
      AND (include_forgotten OR f.forgotten_at IS NULL)
      AND (after_id IS NULL OR (f.created_at, f.id) > (cursor_at, after_id))
    ORDER BY f.created_at, f.id
    LIMIT max;
END
$$;
