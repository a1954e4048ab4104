-- Archival memory: facts saved once (near-duplicates refused),
-- forgotten or superseded but kept, edited with a version bump.

CREATE OR REPLACE FUNCTION memory._search_text(content text) RETURNS tsvector
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT to_tsvector(memory._setting_text('text_search_config')::regconfig, content) $$;

-- The lexemes of a search query, as the stored tsvectors hold them: its first
-- 64 distinct ones, in the order they come. ts_rank_cd's cost grows steeply
-- with the query's lexemes: 1,400 of them (a query of 10,000 characters)
-- cost 60 ms a row ranked, so one search of a few thousand rows took minutes.
CREATE OR REPLACE FUNCTION memory._lexemes(query text) RETURNS text[]
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT coalesce(array_agg(w.lexeme ORDER BY w.first, w.lexeme), '{}')
    FROM (SELECT u.lexeme, u.positions[1] AS first FROM unnest(memory._search_text(coalesce(query, ''))) u
          ORDER BY u.positions[1], u.lexeme LIMIT 64) w
$$;

-- Any of these lexemes, as a tsquery (null for none).
CREATE OR REPLACE FUNCTION memory._or_lexemes(lexemes text[]) RETURNS tsquery
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT nullif(string_agg(quote_literal(replace(l, '\', '')), ' | '), '')::tsquery FROM unnest(lexemes) l $$;

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

-- A fact enters the shared HNSW index when its namespace has joined it
-- (memory._join_shared_index). One that arrives true stays true (a restored
-- dump's): the flag only decides which pass a search finds the row in, never
-- whether it finds it (memory._nearest_in).
CREATE OR REPLACE FUNCTION memory._derive_in_shared_index() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    NEW.in_shared_index := NEW.in_shared_index OR EXISTS (
        SELECT FROM memory.shared_index_namespaces s
        WHERE s.organization_id = NEW.organization_id AND s.namespace_id = NEW.namespace_id);
    RETURN NEW;
END
$$;

CREATE OR REPLACE TRIGGER facts_in_shared_index BEFORE INSERT ON memory.facts
    FOR EACH ROW EXECUTE FUNCTION memory._derive_in_shared_index();

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
    DELETE FROM memory.namespace_lexemes;  -- counts of the old lexemes; memory.maintain() counts again
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

-- Facts are [{"content", "embedding"?, "source"?, "embedding_model"?}]. Their
-- vectors come inside the JSON or, without its parse (~1 ms of each
-- 384-dimension fact, bench/bulk.py), as `embeddings`: a 2-D real[] with one
-- row per fact in order, which a client binds in binary; its facts carry no
-- "embedding". Saves facts, refusing each one whose cosine similarity to a
-- live fact of the namespace (or an earlier fact of this batch) is >=
-- threshold; without an embedding a fact is deduplicated by its normalized
-- text. Callers saving into one namespace serialize on its lock, so a fact is
-- stored once. At most 1,000 facts either way: the batch's own facts are
-- compared pair by pair, so the work per fact grows with the batch (one call
-- of 10,000 into an empty namespace took two minutes), while a call's own cost
-- is a few milliseconds.
CREATE OR REPLACE FUNCTION memory.save_facts(org uuid, facts jsonb, ns jsonb DEFAULT '{}', threshold float8 DEFAULT NULL,
                                  embeddings real[] DEFAULT NULL)
RETURNS TABLE (ord int, id uuid, duplicate_of uuid, similarity float8)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET hnsw.iterative_scan = 'relaxed_order'
SET hnsw.ef_search = 400  -- the top-1 dedupe check must not miss (bench/dedupe.py)
AS $$
DECLARE
    target memory.namespaces := memory._resolve(org, ns, 'write');
    n_facts int;
    item record;
    vecs @extschema:vector@.vector[] := '{}';  -- by ordinal, converted once
    first_of int[];    -- by ordinal: the batch's first fact with the same normalized text
    text_ids uuid[];   -- by ordinal: the earliest live fact with that text before the batch
    key_ids uuid[];    -- by first_of: the fact of this batch saved with that text
    saved_ids uuid[];  -- by ordinal: the new id of each fact saved
    exact_rows int;    -- at most 10 x 100,000,000: fits
    live_before int;   -- the namespace's live facts before the batch, counted up to exact_rows + 1
    exact boolean;
    walk_ef int;       -- large namespace: how deep the index walk of each fact's check goes
    near_ids uuid[];   -- small namespace, by ordinal: the nearest live fact before the batch, when a duplicate
    near_sims float8[];
    pair_i int[];      -- the batch's pairs of duplicates (j < i), by i
    pair_j int[];
    pair_sims float8[];
    p int := 1;
    dup_id uuid;
    dup_sim float8;
BEGIN
    threshold := coalesce(threshold, (memory.setting('dedupe_threshold'))::float8);
    IF threshold <= 0 OR threshold > 1 THEN
        PERFORM memory._fail('MEMORY_INVALID', 'threshold must be in (0, 1]');
    END IF;
    IF jsonb_typeof(facts) IS DISTINCT FROM 'array' OR jsonb_array_length(facts) > 1000 THEN
        PERFORM memory._fail('MEMORY_INVALID', 'facts must be a JSON array of at most 1000 facts');
    END IF;
    n_facts := jsonb_array_length(facts);
    -- Validate the whole batch before saving any of it.
    FOR item IN SELECT f.value AS fact, f.n::int AS n FROM jsonb_array_elements(facts) WITH ORDINALITY f(value, n) LOOP
        IF jsonb_typeof(item.fact) <> 'object' OR jsonb_typeof(item.fact -> 'content') IS DISTINCT FROM 'string' THEN
            PERFORM memory._fail('MEMORY_INVALID', 'each fact must be an object with a "content" string');
        END IF;
        PERFORM memory._check_fact_text(item.fact ->> 'content');
        PERFORM memory._check_source(item.fact -> 'source');
        IF embeddings IS NULL THEN
            vecs[item.n] := CASE WHEN item.fact -> 'embedding' <> 'null'::jsonb
                                 THEN memory._embedding_json(item.fact -> 'embedding') END;
        ELSIF item.fact ? 'embedding' THEN
            PERFORM memory._fail('MEMORY_INVALID', 'a fact must not carry an "embedding" when embeddings are given');
        END IF;
    END LOOP;
    IF embeddings IS NOT NULL THEN
        vecs := memory._embedding_rows(embeddings, n_facts, 'fact', 'facts');
    END IF;
    PERFORM memory._lock_namespace(target, 'facts');
    -- Each fact's normalized text and the earliest live fact with it, in one query
    -- rather than one per fact; the facts this batch saves are followed in key_ids.
    SELECT array_agg(k.first ORDER BY k.n), array_agg(t.id ORDER BY k.n) INTO first_of, text_ids
    FROM (SELECT b.n, b.key, min(b.n) OVER (PARTITION BY b.key) AS first
          FROM (SELECT f.n::int AS n, memory._normalized_key(f.value ->> 'content') AS key
                FROM jsonb_array_elements(facts) WITH ORDINALITY f(value, n)) b) k
    LEFT JOIN LATERAL (
        SELECT f.id FROM memory.facts f
        WHERE f.organization_id = org AND f.namespace_id = target.id AND f.forgotten_at IS NULL
          AND f.text_key = k.key
        ORDER BY f.created_at LIMIT 1) t ON true;
    key_ids := array_fill(NULL::uuid, ARRAY[n_facts]);
    saved_ids := array_fill(NULL::uuid, ARRAY[n_facts]);
    -- Only a similarity >= threshold makes a duplicate: both queries below keep just
    -- those pairs, so no whole namespace is sorted per vector (1,000 vectors against
    -- 2,000 facts: 0.5 s instead of 0.8 s).
    -- Exact or index is decided once per batch: the namespace barely changes meanwhile.
    -- The exact pass reads the namespace once for the whole batch, where the index
    -- is walked once per fact, so a batch of n ranks exactly up to min(n, 10) times
    -- exact_search_max_rows (100 facts against 5,000: 1.3 ms a fact, against 14 ms
    -- through the index; bench/dedupe.py).
    exact_rows := memory._setting_int('exact_search_max_rows') * least(n_facts, 10);
    live_before := memory._rows_upto('fact', org, ARRAY[target.id], NULL, exact_rows);
    exact := live_before <= exact_rows;
    IF exact THEN
        -- Every vector's nearest fact: each row of the namespace read once and
        -- compared with the batch's vectors in memory. (A CTE of the rows scanned
        -- once per vector spills to disk past work_mem: 2.5 times slower at 5,000.)
        SELECT array_agg(nn.id ORDER BY b.n), array_agg(1 - nn.d ORDER BY b.n) INTO near_ids, near_sims
        FROM generate_series(1, n_facts) b(n)
        LEFT JOIN (
            SELECT DISTINCT ON (x.n) x.n, f.id, x.d
            FROM memory.facts f
            CROSS JOIN LATERAL (
                SELECT v.n, (f.embedding OPERATOR(@extschema:vector@.<=>) v.v)::float8 AS d
                FROM unnest(vecs) WITH ORDINALITY v(v, n)
                WHERE 1 - (f.embedding OPERATOR(@extschema:vector@.<=>) v.v)::float8 >= threshold
                OFFSET 0) x  -- kept a subquery: the batch inner, the namespace read once
            WHERE f.organization_id = org AND f.namespace_id = target.id
              AND f.forgotten_at IS NULL AND f.embedding IS NOT NULL
            ORDER BY x.n, x.d, f.id) nn ON nn.n = b.n;
    ELSE
        -- An own index's calibrated depth serves searches' top 10; the top-1 check
        -- keeps save_facts' depth (set above) unless that index asks for more.
        walk_ef := greatest(current_setting('hnsw.ef_search')::int, memory._own_ef_search('fact', org, target.id));
    END IF;
    -- Duplicates within the batch: every pair compared once, in one query.
    SELECT array_agg(a.n ORDER BY a.n, b.n), array_agg(b.n ORDER BY a.n, b.n),
           array_agg(1 - (a.v OPERATOR(@extschema:vector@.<=>) b.v)::float8 ORDER BY a.n, b.n)
    INTO pair_i, pair_j, pair_sims
    FROM unnest(vecs) WITH ORDINALITY a(v, n)
    JOIN unnest(vecs) WITH ORDINALITY b(v, n) ON b.n < a.n
    WHERE 1 - (a.v OPERATOR(@extschema:vector@.<=>) b.v)::float8 >= threshold;
    FOR i IN 1 .. n_facts LOOP
        ord := i;
        dup_id := coalesce(text_ids[i], key_ids[first_of[i]]);
        dup_sim := 1.0;
        IF dup_id IS NULL AND vecs[i] IS NOT NULL THEN
            IF exact THEN
                dup_id := near_ids[i]; dup_sim := near_sims[i];
            ELSE
                -- The facts before the batch; this batch's own are the pairs below.
                SELECT n.id, 1 - n.distance INTO dup_id, dup_sim
                FROM memory._nearest('fact', org, ARRAY[target.id], NULL, vecs[i], 1, false, NULL, walk_ef) n;
                IF dup_sim < threshold THEN
                    dup_id := NULL;
                END IF;
            END IF;
            -- The most similar saved fact wins, then the smallest id (as one ORDER BY would).
            WHILE p <= cardinality(pair_i) AND pair_i[p] = i LOOP
                IF saved_ids[pair_j[p]] IS NOT NULL
                   AND (dup_id IS NULL OR pair_sims[p] > dup_sim
                        OR (pair_sims[p] = dup_sim AND saved_ids[pair_j[p]] < dup_id)) THEN
                    dup_id := saved_ids[pair_j[p]]; dup_sim := pair_sims[p];
                END IF;
                p := p + 1;
            END LOOP;
        END IF;
        WHILE p <= cardinality(pair_i) AND pair_i[p] <= i LOOP
            p := p + 1;
        END LOOP;
        IF dup_id IS NOT NULL AND dup_sim >= threshold THEN
            id := NULL; duplicate_of := dup_id; similarity := dup_sim;
        ELSE
            id := gen_random_uuid(); duplicate_of := NULL; similarity := NULL;
            saved_ids[i] := id;
            key_ids[first_of[i]] := id;
        END IF;
        RETURN NEXT;
    END LOOP;
    -- One insert for the batch, in its order (the checks above need no row of it).
    INSERT INTO memory.facts (organization_id, id, namespace_id, content, embedding, embedding_model, source)
    SELECT target.organization_id, s.id, target.id, f.value ->> 'content', s.v,
           CASE WHEN s.v IS NOT NULL THEN f.value ->> 'embedding_model' END, nullif(f.value -> 'source', 'null')
    FROM unnest(saved_ids, vecs) WITH ORDINALITY s(id, v, n)
    JOIN jsonb_array_elements(facts) WITH ORDINALITY f(value, n) ON f.n = s.n
    WHERE s.id IS NOT NULL
    ORDER BY s.n;
    -- Past the line the namespace's searches walk the shared index: its facts go in.
    IF live_before + cardinality(array_remove(saved_ids, NULL)) > memory._setting_int('exact_search_max_rows')
       AND NOT EXISTS (SELECT FROM memory.shared_index_namespaces s
                       WHERE s.organization_id = org AND s.namespace_id = target.id) THEN
        PERFORM memory._join_shared_index(org, target.id);
    END IF;
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
