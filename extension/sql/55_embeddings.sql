-- Embeddings: one configured type and dimension for every
-- embedding column, validation of vectors from callers, and the pending
-- pipeline (pending_embeddings / set_memory_embeddings) shared by every kind.

-- The tables that hold embeddings and search text, each with the condition
-- that keeps a row searchable (null: every row is). Every job over both
-- tables loops over these rows, naming the table with format('%I').
CREATE OR REPLACE FUNCTION memory._memory_tables() RETURNS TABLE (kind text, table_name name, live text)
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ VALUES ('fact'::text, 'facts'::name, 'forgotten_at IS NULL'::text), ('message', 'messages', NULL) $$;

-- The schema pgvector is installed in, for the type and opclass names of DDL.
CREATE OR REPLACE FUNCTION memory._vector_schema() RETURNS name
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector'
$$;

-- The configured embedding type and dimension, read from the catalog.
CREATE OR REPLACE FUNCTION memory._embedding_config(OUT type_name text, OUT dimensions int)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT t.typname::text, a.atttypmod
    FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
    WHERE a.attrelid = 'memory.facts'::regclass AND a.attname = 'embedding'
$$;

-- A caller's real[] as a vector, or EMBEDDING_INVALID (null stays null).
CREATE OR REPLACE FUNCTION memory._embedding(value real[]) RETURNS @extschema:vector@.vector
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    expected int := (memory._embedding_config()).dimensions;
BEGIN
    IF value IS NULL THEN
        RETURN NULL;
    END IF;
    IF array_ndims(value) > 1 THEN
        PERFORM memory._fail('EMBEDDING_INVALID', 'an embedding must be a one-dimensional array');
    END IF;
    IF array_ndims(value) IS NULL OR cardinality(value) <> expected THEN
        PERFORM memory._fail('EMBEDDING_INVALID',
            format('embedding has %s dimensions, expected %s', coalesce(cardinality(value), 0), expected));
    END IF;
    -- The cast checks the elements in C: 20 us a search's 384-dimension query,
    -- against 95 us for a scan of them in SQL (bench/tenants.py profile).
    BEGIN
        RETURN value::@extschema:vector@.vector;
    EXCEPTION WHEN data_exception THEN  -- it refuses null, NaN and infinite elements
        PERFORM memory._fail('EMBEDDING_INVALID', 'embedding elements must be finite float4 numbers');
    END;
END
$$;

-- A caller's `embeddings`, a 2-D real[] with one row per `item` (n of them,
-- `items`) that a client binds in binary, as vectors in order; or
-- EMBEDDING_INVALID. No JSON to parse: ~20 us a 384-dimension row.
CREATE OR REPLACE FUNCTION memory._embedding_rows(embeddings real[], n int, item text, items text)
RETURNS @extschema:vector@.vector[]
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    expected int := (memory._embedding_config()).dimensions;
    emb real[];
    vecs @extschema:vector@.vector[] := '{}';
BEGIN
    IF cardinality(embeddings) > 0 AND array_ndims(embeddings) <> 2 THEN
        PERFORM memory._fail('EMBEDDING_INVALID', format('embeddings must be a two-dimensional array, one row per %s', item));
    END IF;
    IF coalesce(array_length(embeddings, 1), 0) <> n THEN
        PERFORM memory._fail('EMBEDDING_INVALID',
            format('embeddings must have one row per %s: %s rows for %s %s',
                   item, coalesce(array_length(embeddings, 1), 0), n, items));
    END IF;
    IF array_length(embeddings, 2) <> expected THEN
        PERFORM memory._fail('EMBEDDING_INVALID',
            format('embedding has %s dimensions, expected %s', array_length(embeddings, 2), expected));
    END IF;
    IF n = 0 THEN
        RETURN vecs;
    END IF;
    -- Row by row as 1-D arrays, each cast in C: ~20 us a 384-dimension row, against
    -- ~75 us for a slice per row through unnest and ~350 us per row aggregated.
    BEGIN
        FOREACH emb SLICE 1 IN ARRAY embeddings LOOP
            vecs := vecs || emb::@extschema:vector@.vector;
        END LOOP;
    EXCEPTION WHEN data_exception THEN  -- the cast refuses null, NaN and infinite elements
        PERFORM memory._fail('EMBEDDING_INVALID', 'embedding elements must be finite float4 numbers');
    END;
    RETURN vecs;
END
$$;

-- A JSON array of numbers as a vector, or EMBEDDING_INVALID.
CREATE OR REPLACE FUNCTION memory._embedding_json(value jsonb) RETURNS @extschema:vector@.vector
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF jsonb_typeof(value) IS DISTINCT FROM 'array' THEN
        PERFORM memory._fail('EMBEDDING_INVALID', 'an embedding must be a JSON array of numbers');
    END IF;
    IF jsonb_path_exists(value, 'strict $[*] ? (@.type() != "number")') THEN
        PERFORM memory._fail('EMBEDDING_INVALID', 'embedding elements must be finite float4 numbers');
    END IF;
    -- Only numbers inside: the JSON text with braces for brackets is a real[] literal,
    -- parsed in one call rather than element by element (bench/embed.py).
    RETURN memory._embedding(translate(value::text, '[]', '{}')::real[]);
EXCEPTION WHEN numeric_value_out_of_range THEN
    -- Beyond float4's range, or non-zero and too small for it (e.g. 1e-50).
    PERFORM memory._fail('EMBEDDING_INVALID', 'embedding elements must be finite float4 numbers');
END
$$;

-- Keeps every embedding column's vectors in their rows (storage MAIN). With the
-- vector type's own storage (EXTERNAL) PostgreSQL moves a vector to the TOAST
-- table once its row passes ~2 KB (384 dimensions and ~200 characters of
-- content), and every exact pass and distance then fetches it from there:
-- save_facts 4.4 times slower (bench/dedupe.py --storage). MAIN moves the
-- content out first. Run by every install and upgrade (below) and after a
-- retype. Citus refuses SET STORAGE on a distributed table
-- (feature_not_supported): its vectors keep the type's storage rather than
-- the install, upgrade or retype failing.
CREATE OR REPLACE FUNCTION memory._keep_vectors_inline() RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t record;
BEGIN
    FOR t IN SELECT * FROM memory._memory_tables() LOOP
        BEGIN
            EXECUTE format('ALTER TABLE memory.%I ALTER COLUMN embedding SET STORAGE MAIN', t.table_name);
        EXCEPTION WHEN feature_not_supported THEN
            NULL;
        END;
    END LOOP;
END
$$;

SELECT memory._keep_vectors_inline();

-- Changes the embedding type and dimension (service only): the columns of
-- facts and messages are retyped, every embedding becomes pending and the
-- HNSW indexes are rebuilt.
CREATE OR REPLACE FUNCTION memory.configure_embeddings(dimensions int, type text DEFAULT 'vector') RETURNS jsonb
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    kind text := $2;  -- "type" is awkward as an identifier in PL/pgSQL
    -- HNSW indexes up to 2,000 dimensions of vector and 4,000 of halfvec.
    max_dimensions int := CASE $2 WHEN 'halfvec' THEN 4000 ELSE 2000 END;
    vector_schema name := memory._vector_schema();
    t record;
BEGIN
    PERFORM memory._require_service();
    IF kind IS NULL OR kind NOT IN ('vector', 'halfvec') THEN
        PERFORM memory._fail('MEMORY_INVALID', 'embedding type must be vector or halfvec');
    END IF;
    IF dimensions IS NULL OR dimensions < 1 OR dimensions > max_dimensions THEN
        PERFORM memory._fail('MEMORY_INVALID',
            format('embedding dimensions must be between 1 and %s for %s', max_dimensions, kind));
    END IF;
    IF (memory._embedding_config()).type_name = kind AND (memory._embedding_config()).dimensions = dimensions THEN
        RETURN jsonb_build_object('dimensions', dimensions, 'type', kind);
    END IF;
    PERFORM memory._drop_namespace_indexes();  -- of the old type; memory.maintain() builds them again
    FOR t IN SELECT * FROM memory._memory_tables() LOOP
        EXECUTE format('DROP INDEX memory.%I', t.table_name || '_embedding_idx');
        EXECUTE format('ALTER TABLE memory.%I ALTER COLUMN embedding TYPE %I.%I(%s) USING NULL',
                       t.table_name, vector_schema, kind, dimensions);
        -- Leases go too: vectors computed for the old dimension would be refused anyway.
        EXECUTE format('UPDATE memory.%I SET embedding_model = NULL, lease_until = NULL '
                       'WHERE embedding_model IS NOT NULL OR lease_until IS NOT NULL', t.table_name);
        EXECUTE format('CREATE INDEX %I ON memory.%I USING hnsw (embedding %I.%I)',
                       t.table_name || '_embedding_idx', t.table_name, vector_schema, kind || '_cosine_ops')
             || coalesce(' WHERE ' || t.live, '')
             || CASE WHEN t.kind = 'fact' THEN ' AND in_shared_index' ELSE '' END;  -- as facts_embedding_idx
    END LOOP;
    PERFORM memory._keep_vectors_inline();  -- a retype resets the columns' storage to the type's
    RETURN jsonb_build_object('dimensions', dimensions, 'type', kind);
END
$$;

-- The configured embedding and how many memories have one or wait for one,
-- across organizations (service only): what configure_embeddings would turn
-- pending. A look: nothing is leased.
CREATE OR REPLACE FUNCTION memory.embedding_status() RETURNS jsonb
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    config record := memory._embedding_config();
    embedded bigint := 0;
    pending bigint := 0;
    t record;
    n_embedded bigint;
    n_pending bigint;
BEGIN
    PERFORM memory._require_service();
    FOR t IN SELECT * FROM memory._memory_tables() LOOP
        EXECUTE format('SELECT count(*) FILTER (WHERE embedding IS NOT NULL), '
                       'count(*) FILTER (WHERE embedding IS NULL AND %s) FROM memory.%I',
                       coalesce(t.live, 'true'), t.table_name)
        INTO n_embedded, n_pending;
        embedded := embedded + n_embedded;
        pending := pending + n_pending;
    END LOOP;
    RETURN jsonb_build_object('dimensions', config.dimensions, 'type', config.type_name,
                              'embedded', embedded, 'pending', pending);
END
$$;

-- Rows waiting for an embedding, leased to this caller for five minutes so
-- that concurrent workers never get the same row (service only).
CREATE OR REPLACE FUNCTION memory.pending_embeddings(max int DEFAULT 100)
RETURNS TABLE (id uuid, kind text, content text, content_hash text)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t record;
    handed int := 0;
    picked int;
BEGIN
    PERFORM memory._require_service();
    PERFORM memory._check_between('max', max, 1, 10000);
    FOR t IN SELECT * FROM memory._memory_tables() LOOP
        EXIT WHEN handed >= max;
        RETURN QUERY EXECUTE format(
            'WITH picked AS ('
            '    SELECT p.organization_id, p.id FROM memory.%1$I p'
            '    WHERE p.embedding IS NULL AND %2$s'
            '      AND (p.lease_until IS NULL OR p.lease_until < clock_timestamp())'
            '    ORDER BY p.created_at LIMIT $1 FOR UPDATE SKIP LOCKED)'
            ' UPDATE memory.%1$I r SET lease_until = clock_timestamp() + interval ''5 minutes'''
            ' FROM picked WHERE r.organization_id = picked.organization_id AND r.id = picked.id'
            ' RETURNING r.id, $2, r.content, r.content_hash',
            t.table_name, coalesce('p.' || t.live, 'true'))
        USING max - handed, t.kind;
        GET DIAGNOSTICS picked = ROW_COUNT;
        handed := handed + picked;
    END LOOP;
END
$$;

-- Writes a batch of vectors in one call (service only): as JSON in `vectors`,
-- or as `embeddings`, a 2-D real[] with one row per id that a client binds in
-- binary (no JSON to encode or parse: bench/embed.py). Every vector is checked
-- before anything is written; a row whose text changed since its hash was
-- handed out keeps waiting. Returns the number of rows written.
CREATE OR REPLACE FUNCTION memory.set_memory_embeddings(ids uuid[], content_hashes text[], vectors jsonb, model text DEFAULT NULL,
                                             embeddings real[] DEFAULT NULL)
RETURNS int
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    written int := 0;
    table_written int;
    t record;
    vecs @extschema:vector@.vector[];
BEGIN
    PERFORM memory._require_service();
    IF embeddings IS NOT NULL THEN
        IF vectors IS NOT NULL THEN
            PERFORM memory._fail('EMBEDDING_INVALID', 'give the vectors either as JSON or as embeddings, not both');
        END IF;
        IF ids IS NULL OR content_hashes IS NULL OR cardinality(ids) <> cardinality(content_hashes) THEN
            PERFORM memory._fail('EMBEDDING_INVALID',
                format('expected one content hash per id: %s ids, %s hashes', cardinality(ids), cardinality(content_hashes)));
        END IF;
        vecs := memory._embedding_rows(embeddings, cardinality(ids), 'id', 'ids');
    ELSE
        vecs := memory._embedding_batch_json(ids, content_hashes, vectors);
    END IF;
    FOR t IN SELECT * FROM memory._memory_tables() LOOP
        EXECUTE format('UPDATE memory.%I r SET embedding = b.embedding, embedding_model = $4, lease_until = NULL'
                       ' FROM unnest($1, $2, $3) AS b(id, hash, embedding)'
                       ' WHERE r.id = b.id AND r.content_hash = b.hash', t.table_name)
        USING ids, content_hashes, vecs, model;
        GET DIAGNOSTICS table_written = ROW_COUNT;
        written := written + table_written;
    END LOOP;
    RETURN written;
END
$$;

-- set_memory_embeddings' JSON `vectors` as vectors in order, one per id and
-- content hash, or EMBEDDING_INVALID.
CREATE OR REPLACE FUNCTION memory._embedding_batch_json(ids uuid[], content_hashes text[], vectors jsonb)
RETURNS @extschema:vector@.vector[]
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF ids IS NULL OR content_hashes IS NULL OR jsonb_typeof(vectors) IS DISTINCT FROM 'array'
       OR cardinality(ids) <> cardinality(content_hashes) OR cardinality(ids) <> jsonb_array_length(vectors) THEN
        PERFORM memory._fail('EMBEDDING_INVALID',
            format('expected one vector and one content hash per id: %s ids, %s hashes, %s vectors',
                   cardinality(ids), cardinality(content_hashes),
                   CASE WHEN jsonb_typeof(vectors) = 'array' THEN jsonb_array_length(vectors) END));
    END IF;
    IF (SELECT count(DISTINCT jsonb_array_length(v)) FROM jsonb_array_elements(vectors) v
        WHERE jsonb_typeof(v) = 'array') > 1 THEN
        PERFORM memory._fail('EMBEDDING_INVALID', 'vectors of mixed lengths in one batch');
    END IF;
    -- Every vector is parsed (and checked) once, before anything is written.
    RETURN ARRAY(SELECT memory._embedding_json(v) FROM jsonb_array_elements(vectors) WITH ORDINALITY x(v, n)
                 ORDER BY n);
END
$$;
