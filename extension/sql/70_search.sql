-- Hybrid ranking, one implementation for facts and messages:
-- reciprocal rank fusion of a vector list (cosine; exact for a small set,
-- HNSW with iterative scan for a large one) and a full-text list (any shared
-- lexeme, ranked by ts_rank_cd). `kind` is 'fact' or 'message'; each query
-- reads both tables under a constant filter, so only one of them is scanned.

-- A search query's lexemes (memory._lexemes), its length checked.
CREATE OR REPLACE FUNCTION memory._query_lexemes(query text) RETURNS text[]
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF length(query) > 10000 THEN
        PERFORM memory._fail('MEMORY_TOO_LARGE', 'a search query is at most 10000 characters long');
    END IF;
    RETURN memory._lexemes(query);
END
$$;

-- The query's lexemes OR-ed: a question shares some words with its answer,
-- rarely all of them (an AND finds nearly nothing on LoCoMo).
CREATE OR REPLACE FUNCTION memory._any_lexeme(query text) RETURNS tsquery
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT memory._or_lexemes(memory._query_lexemes(query)) $$;

-- Search options with their defaults; unknown keys and bad values refused.
CREATE OR REPLACE FUNCTION memory._search_options(options jsonb) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    merged jsonb := jsonb_build_object('rrf_k', 60, 'vector_weight', 1, 'text_weight', 1)
                    || coalesce(options, '{}');
    key text;
BEGIN
    IF jsonb_typeof(coalesce(options, '{}')) <> 'object' THEN
        PERFORM memory._fail('MEMORY_INVALID', 'options must be a JSON object');
    END IF;
    FOR key IN SELECT jsonb_object_keys(merged) LOOP
        IF key NOT IN ('rrf_k', 'vector_weight', 'text_weight', 'min_similarity', 'created_after', 'created_before',
                       'ef_search', 'text_ranking') THEN
            PERFORM memory._fail('MEMORY_INVALID', format('unknown search option %L', key));
        END IF;
        IF key = 'text_ranking' THEN
            IF merged -> key NOT IN ('"ts_rank_cd"', '"idf"') THEN
                PERFORM memory._fail('MEMORY_INVALID', 'search option text_ranking must be "ts_rank_cd" or "idf"');
            END IF;
            CONTINUE;
        END IF;
        CONTINUE WHEN key IN ('created_after', 'created_before');  -- checked below
        IF key = 'ef_search' THEN  -- pgvector's own range is 1..1000; below 10 recall collapses
            PERFORM memory._check_between('search option ef_search',
                memory._as_integer(merged -> key, 10, 1000), 10, 1000);
            merged := jsonb_set(merged, ARRAY[key], to_jsonb(memory._as_integer(merged -> key)));  -- 100.0 as 100
            CONTINUE;
        END IF;
        IF key = 'min_similarity' THEN
            IF jsonb_typeof(merged -> key) <> 'number' OR (merged ->> key)::numeric NOT BETWEEN -1 AND 1 THEN
                PERFORM memory._fail('MEMORY_INVALID', 'search option min_similarity must be a number from -1 to 1');
            END IF;
            CONTINUE;
        END IF;
        IF jsonb_typeof(merged -> key) <> 'number' OR (merged ->> key)::numeric < 0
           OR (merged ->> key)::numeric > 1000000
           OR ((merged ->> key)::numeric > 0 AND (merged ->> key)::numeric < 0.000001) THEN
            PERFORM memory._fail('MEMORY_INVALID',
                format('search option %s must be 0 or a number between 0.000001 and 1000000', key));
        END IF;
    END LOOP;
    PERFORM memory._created(merged);
    RETURN merged;
END
$$;

-- The creation window of search options created_after (inclusive) and
-- created_before (exclusive), or null when neither is given.
CREATE OR REPLACE FUNCTION memory._created(options jsonb) RETURNS tstzrange
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    after timestamptz := memory._timestamp(options -> 'created_after', 'search option created_after');
    before timestamptz := memory._timestamp(options -> 'created_before', 'search option created_before');
BEGIN
    IF after IS NULL AND before IS NULL THEN
        RETURN NULL;
    END IF;
    IF after > before THEN
        PERFORM memory._fail('MEMORY_INVALID', 'search option created_after must not be later than created_before');
    END IF;
    RETURN tstzrange(after, before, '[)');
END
$$;

-- The rows of `namespace_ids`, counted up to `most` + 1 at the most. Pending
-- rows count too: the count is then an index-only scan (an `embedding IS NOT
-- NULL` test read every row from the heap: 3.5 ms at 2,000 facts,
-- bench/search.py). One branch per table, each planned once per session (see
-- memory._nearest_exact).
CREATE OR REPLACE FUNCTION memory._rows_upto(kind text, org uuid, namespace_ids uuid[], exclude_chat text, most int)
RETURNS int
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$
BEGIN
    IF kind = 'fact' THEN
        RETURN (SELECT count(*) FROM (
                    SELECT FROM memory.facts f
                    WHERE f.organization_id = org AND f.namespace_id = ANY (namespace_ids) AND f.forgotten_at IS NULL
                    LIMIT most + 1) s);
    END IF;
    RETURN (SELECT count(*) FROM (
                SELECT FROM memory.messages m
                WHERE m.organization_id = org AND m.namespace_id = ANY (namespace_ids)
                  AND m.chat_id IS DISTINCT FROM exclude_chat
                LIMIT most + 1) s);
END
$$;

-- Few enough rows to rank exactly (setting exact_search_max_rows)?
CREATE OR REPLACE FUNCTION memory._small_set(kind text, org uuid, namespace_ids uuid[], exclude_chat text) RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT memory._rows_upto(kind, org, namespace_ids, exclude_chat, s.most) <= s.most
    FROM (SELECT memory._setting_int('exact_search_max_rows') AS most) s
$$;

-- The k rows nearest to `query` by cosine distance in `namespace_ids`. A
-- namespace with an index of its own (memory.maintain) is searched through
-- it alone: its partial index's predicate is proved only for a single
-- namespace, and its graph holds only that namespace's rows, so a walk as
-- deep as memory.maintain() measured it needs finds them (unless the caller
-- asks for another ef_search). The others are searched together, as
-- memory._nearest_in decides.
CREATE OR REPLACE FUNCTION memory._nearest(kind text, org uuid, namespace_ids uuid[], exclude_chat text,
                                query @extschema:vector@.vector, k int, exact boolean DEFAULT NULL,
                                created tstzrange DEFAULT NULL, ef_search int DEFAULT NULL)
RETURNS TABLE (id uuid, distance float8)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    own uuid[] := CASE WHEN query IS NOT NULL AND exact IS NOT TRUE
                       THEN memory._own_indexed(kind, org, namespace_ids) ELSE '{}' END;
    shared uuid[];
    caller_ef text := current_setting('hnsw.ef_search');
    one uuid;
    about jsonb;
    far float8;  -- a walk ending past it walks again (memory._nearest_own); not past a caller's ef_search
    ids uuid[] := '{}';
    distances float8[] := '{}';
BEGIN
    IF own = '{}' THEN
        RETURN QUERY SELECT n.id, n.distance
                     FROM memory._nearest_in(kind, org, namespace_ids, exclude_chat, query, k, exact, created) n;
        RETURN;
    END IF;
    shared := ARRAY(SELECT unnest(namespace_ids) EXCEPT SELECT unnest(own));
    FOREACH one IN ARRAY own LOOP
        about := memory._own_index_about(kind, org, one);
        far := CASE WHEN ef_search IS NULL THEN (about ->> 'far_distance')::float8 END;
        PERFORM set_config('hnsw.ef_search', coalesce(ef_search, memory._ef_search_of(about))::text, true);
        IF shared = '{}' AND cardinality(own) = 1 THEN
            RETURN QUERY SELECT n.id, n.distance
                         FROM memory._nearest_own(kind, org, one, exclude_chat, query, k, created, far) n;
            PERFORM set_config('hnsw.ef_search', caller_ef, true);
            RETURN;
        END IF;
        SELECT ids || array_agg(n.id), distances || array_agg(n.distance) INTO ids, distances
        FROM memory._nearest_own(kind, org, one, exclude_chat, query, k, created, far) n;
    END LOOP;
    PERFORM set_config('hnsw.ef_search', caller_ef, true);
    RETURN QUERY
    SELECT c.id, c.distance FROM (
        SELECT u.id, u.distance FROM unnest(ids, distances) u(id, distance)
        UNION ALL
        -- the rest counted on its own: `exact` was decided with the own-indexed namespaces in
        SELECT n.id, n.distance FROM memory._nearest_in(kind, org, shared, exclude_chat, query, k, NULL, created) n) c
    ORDER BY c.distance, c.id
    LIMIT k;
END
$$;

-- Plans of the searches over few rows (memory._rows_upto, memory._nearest_exact,
-- memory._text_candidates_few): planned once per session, since planning such
-- a call took 2 to 4 times as long as running it (bench/tenants.py: 0.16 ms
-- against 0.04 ms for a 20-row namespace's count). Their one right access path
-- is the (organization, namespace) btree whatever the rows; with seq scans off,
-- the generic plan takes it even where a namespace holds most of the table.

-- The k nearest rows of `namespace_ids` by an exact scan ("+ 0" keeps the
-- planner off the HNSW index, whose filtered scan could return fewer rows;
-- ORDER BY 2 sorts by the selected distance, so each is computed once, not
-- again for the sort key). For few rows (memory._small_set).
CREATE OR REPLACE FUNCTION memory._nearest_exact(kind text, org uuid, namespace_ids uuid[], exclude_chat text,
                                      query @extschema:vector@.vector, k int, created tstzrange)
RETURNS TABLE (id uuid, distance float8)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$
BEGIN
    IF kind = 'fact' THEN
        RETURN QUERY
        SELECT f.id, (f.embedding OPERATOR(@extschema:vector@.<=>) query) + 0 AS d FROM memory.facts f
        WHERE f.organization_id = org AND f.namespace_id = ANY (namespace_ids)
          AND f.forgotten_at IS NULL AND f.embedding IS NOT NULL
          AND (created IS NULL OR f.created_at <@ created)
        ORDER BY 2, f.id LIMIT k;
    ELSE
        RETURN QUERY
        SELECT m.id, (m.embedding OPERATOR(@extschema:vector@.<=>) query) + 0 AS d FROM memory.messages m
        WHERE m.organization_id = org AND m.namespace_id = ANY (namespace_ids)
          AND m.chat_id IS DISTINCT FROM exclude_chat AND m.embedding IS NOT NULL
          AND (created IS NULL OR m.created_at <@ created)
        ORDER BY 2, m.id LIMIT k;
    END IF;
END
$$;

-- The k nearest live facts of `namespace_ids` outside the shared index, by an
-- exact scan of facts_unshared_idx (as memory._nearest_exact): the facts of
-- namespaces that have not joined it, which a search through it adds.
CREATE OR REPLACE FUNCTION memory._nearest_unshared(org uuid, namespace_ids uuid[],
                                         query @extschema:vector@.vector, k int, created tstzrange)
RETURNS TABLE (id uuid, distance float8)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$
BEGIN
    RETURN QUERY
    SELECT f.id, (f.embedding OPERATOR(@extschema:vector@.<=>) query) + 0 AS d FROM memory.facts f
    WHERE f.organization_id = org AND f.namespace_id = ANY (namespace_ids)
      AND f.forgotten_at IS NULL AND NOT f.in_shared_index AND f.embedding IS NOT NULL
      AND (created IS NULL OR f.created_at <@ created)
    ORDER BY 2, f.id LIMIT k;
END
$$;

-- The k nearest rows of one namespace through its own index
-- (memory._create_namespace_index), which indexes COALESCE(embedding,
-- embedding): ordering by that expression is what only that index can serve.
CREATE OR REPLACE FUNCTION memory._nearest_own_scan(kind text, org uuid, namespace_id uuid, exclude_chat text,
                                    query @extschema:vector@.vector, k int, created tstzrange)
RETURNS TABLE (id uuid, distance float8)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_custom_plan  -- the predicate is proved on the call's constants
AS $$
BEGIN
    IF kind = 'fact' THEN
        RETURN QUERY
        SELECT c.id, c.d FROM (
            SELECT f.id, (f.embedding OPERATOR(@extschema:vector@.<=>) query)::float8 AS d FROM memory.facts f
            WHERE f.organization_id = org AND f.namespace_id = _nearest_own_scan.namespace_id AND f.forgotten_at IS NULL
              AND (created IS NULL OR f.created_at <@ created)
            ORDER BY COALESCE(f.embedding, f.embedding) OPERATOR(@extschema:vector@.<=>) query LIMIT k) c
        ORDER BY c.d, c.id;
    ELSE
        RETURN QUERY
        SELECT c.id, c.d FROM (
            SELECT m.id, (m.embedding OPERATOR(@extschema:vector@.<=>) query)::float8 AS d FROM memory.messages m
            WHERE m.organization_id = org AND m.namespace_id = _nearest_own_scan.namespace_id
              AND m.chat_id IS DISTINCT FROM exclude_chat
              AND (created IS NULL OR m.created_at <@ created)
            ORDER BY COALESCE(m.embedding, m.embedding) OPERATOR(@extschema:vector@.<=>) query LIMIT k) c
        ORDER BY c.d, c.id;
    END IF;
END
$$;

-- memory._nearest_own_scan with pgvector's iterative scan off first: the
-- graph holds only the namespace's rows, so the filter drops one only where
-- it is forgotten, outside `created` or in the excluded chat, and the plain
-- scan is 6-14% cheaper (docs/archival.md). A walk whose 10th row (k-th, for
-- fewer) lies past `far` walks again 4 times as deep: a query farther from
-- the namespace's rows than the calibration's were can be stranded among the
-- wrong ones at the calibrated depth (docs/archival.md). Short of k rows, it
-- scans again with the relaxed iterative scan, which walks on until k are found.
CREATE OR REPLACE FUNCTION memory._nearest_own(kind text, org uuid, namespace_id uuid, exclude_chat text,
                                    query @extschema:vector@.vector, k int, created tstzrange,
                                    far float8 DEFAULT NULL)
RETURNS TABLE (id uuid, distance float8)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET hnsw.iterative_scan = 'off'  -- the caller's value comes back on return
AS $$
DECLARE
    caller_ef text := current_setting('hnsw.ef_search');
    -- Without the iterative scan a scan returns at most ef_search rows: leave room
    -- for the rows a filter drops. Unfiltered, only rows forgotten since the last
    -- vacuum drop out (the index's predicate holds the rest), and a short scan is redone below.
    ef int := least(1000, greatest(caller_ef::int, CASE WHEN created IS NULL AND exclude_chat IS NULL THEN k ELSE 2 * k END));
    ids uuid[];
    distances float8[];
BEGIN
    -- The SET clause does not cover ef_search: restored by hand.
    PERFORM set_config('hnsw.ef_search', ef::text, true);
    SELECT array_agg(s.id ORDER BY s.distance, s.id), array_agg(s.distance ORDER BY s.distance, s.id)
    INTO ids, distances
    FROM memory._nearest_own_scan(kind, org, namespace_id, exclude_chat, query, k, created) s;
    IF cardinality(ids) >= k AND distances[least(k, 10)] > far AND ef < 1000 THEN
        PERFORM set_config('hnsw.ef_search', least(1000, 4 * ef)::text, true);
        SELECT array_agg(s.id ORDER BY s.distance, s.id), array_agg(s.distance ORDER BY s.distance, s.id)
        INTO ids, distances
        FROM memory._nearest_own_scan(kind, org, namespace_id, exclude_chat, query, k, created) s;
    END IF;
    PERFORM set_config('hnsw.ef_search', caller_ef, true);
    IF coalesce(cardinality(ids), 0) < k THEN
        PERFORM set_config('hnsw.iterative_scan', 'relaxed_order', true);  -- undone on return too
        RETURN QUERY SELECT s.id, s.distance
                     FROM memory._nearest_own_scan(kind, org, namespace_id, exclude_chat, query, k, created) s;
        RETURN;
    END IF;
    RETURN QUERY SELECT u.id, u.distance FROM unnest(ids, distances) u(id, distance);
END
$$;

-- The k rows nearest to `query` by cosine distance among namespaces that
-- share the table's index. A small set is scanned exactly
-- (memory._nearest_exact); a large one goes through the index with the
-- iterative scan the calling public function sets, then is sorted again
-- (relaxed order). One query per table: the planner does not carry an
-- index ordering through a UNION ALL. Static queries rather than one built
-- with format(): measured side by side, the dynamic query was 3-7% slower
-- per call (its parse and the table lookup), and this is the search path.
CREATE OR REPLACE FUNCTION memory._nearest_in(kind text, org uuid, namespace_ids uuid[], exclude_chat text,
                                   query @extschema:vector@.vector, k int, exact boolean DEFAULT NULL,
                                   created tstzrange DEFAULT NULL)
RETURNS TABLE (id uuid, distance float8)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
-- Planned per call: whether to walk the index or sort the namespace's btree
-- range depends on its size. A cached generic plan picked the sort for any
-- size (bench/search.py: 64 ms instead of 7 ms at 20,000 facts); one kept
-- on the walk with sorts off walked it where the sort was cheaper
-- (bench/plancost.py: search_facts in a 400-row namespace of 30,000 facts,
-- 1.1 -> 3.2 ms).
SET plan_cache_mode = force_custom_plan
AS $$
BEGIN
    IF query IS NULL THEN
        RETURN;
    END IF;
    IF coalesce(exact, memory._small_set(kind, org, namespace_ids, exclude_chat)) THEN
        RETURN QUERY SELECT n.id, n.distance
                     FROM memory._nearest_exact(kind, org, namespace_ids, exclude_chat, query, k, created) n;
    ELSIF kind = 'fact' THEN
        -- The shared index holds the facts of the namespaces that joined it; the
        -- others' (and any saved while theirs joined) are ranked exactly beside it.
        RETURN QUERY
        SELECT c.id, c.d FROM (
            SELECT g.id, g.d FROM (
                SELECT f.id, (f.embedding OPERATOR(@extschema:vector@.<=>) query)::float8 AS d FROM memory.facts f
                WHERE f.organization_id = org AND f.namespace_id = ANY (namespace_ids) AND f.forgotten_at IS NULL
                  AND f.in_shared_index AND (created IS NULL OR f.created_at <@ created)
                ORDER BY f.embedding OPERATOR(@extschema:vector@.<=>) query LIMIT k) g
            UNION ALL
            SELECT u.id, u.distance FROM memory._nearest_unshared(org, namespace_ids, query, k, created) u) c
        ORDER BY c.d, c.id
        LIMIT k;
    ELSE
        RETURN QUERY
        SELECT c.id, c.d FROM (
            SELECT m.id, (m.embedding OPERATOR(@extschema:vector@.<=>) query)::float8 AS d FROM memory.messages m
            WHERE m.organization_id = org AND m.namespace_id = ANY (namespace_ids)
              AND m.chat_id IS DISTINCT FROM exclude_chat
              AND (created IS NULL OR m.created_at <@ created)
            ORDER BY m.embedding OPERATOR(@extschema:vector@.<=>) query LIMIT k) c
        ORDER BY c.d, c.id;
    END IF;
END
$$;

-- The `depth` best rows sharing any of the query's `lexemes`, as ranks: by
-- ts_rank_cd, or with `idf` by the rarity of the lexemes each row
-- holds (memory._text_ranked_in). In a namespace with an index of its own only the
-- rows holding the query's rarer lexemes are ranked (memory._rare_lexemes):
-- thousands of rows there share a common word with any query, and ranking
-- them all was most of a hybrid search's time (bench/tenants.py).
CREATE OR REPLACE FUNCTION memory._text_ranked(kind text, org uuid, namespace_ids uuid[], exclude_chat text,
                                    lexemes text[], depth int, created tstzrange, idf boolean,
                                    few boolean DEFAULT NULL)
RETURNS TABLE (id uuid, rank bigint)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    terms tsquery := memory._or_lexemes(lexemes);
    idf_lexemes text[] := CASE WHEN idf THEN lexemes END;  -- null: ranked by ts_rank_cd
    own uuid[];
    rest uuid[];
BEGIN
    IF terms IS NULL THEN
        RETURN;
    END IF;
    own := CASE WHEN few THEN '{}' ELSE memory._own_indexed(kind, org, namespace_ids) END;
    IF own = '{}' THEN  -- the common case, without the merge
        RETURN QUERY
        SELECT r.id, row_number() OVER (ORDER BY r.score DESC, r.density DESC, r.id)
        FROM memory._text_ranked_in(kind, org, namespace_ids, exclude_chat, terms, terms, depth, created, idf_lexemes,
                                    CASE WHEN idf THEN jsonb_build_object('', memory._live_rows(kind, org, namespace_ids)) END,
                                    few) r;
        RETURN;
    END IF;
    rest := ARRAY(SELECT unnest(namespace_ids) EXCEPT SELECT unnest(own));
    RETURN QUERY
    SELECT t.id, row_number() OVER (ORDER BY t.score DESC, t.density DESC, t.id) FROM (
        SELECT r.id, r.score, r.density FROM unnest(own) o,
            LATERAL memory._text_ranked_in(kind, org, ARRAY[o], exclude_chat,
                                           memory._rare_lexemes(kind, org, o, lexemes, 10 * depth), terms, depth, created,
                                           idf_lexemes, CASE WHEN idf THEN coalesce(memory._lexeme_counts(kind, org, o, lexemes),
                                                     jsonb_build_object('', memory._live_rows(kind, org, ARRAY[o]))) END,
                                           false) r
        UNION ALL
        SELECT r.id, r.score, r.density
        FROM memory._text_ranked_in(kind, org, rest, exclude_chat, terms, terms, depth, created, idf_lexemes,
                                    CASE WHEN idf THEN jsonb_build_object('', memory._live_rows(kind, org, rest)) END) r
        WHERE rest <> '{}') t
    ORDER BY t.score DESC, t.density DESC, t.id
    LIMIT depth;
END
$$;

-- What memory.maintain() counted of a namespace: the rows holding each of
-- `lexemes` it found in 10 or more rows, and the live rows under the key '';
-- null when it counted nothing there.
CREATE OR REPLACE FUNCTION memory._lexeme_counts(kind text, org uuid, namespace_id uuid, lexemes text[]) RETURNS jsonb
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT coalesce(jsonb_object_agg(n.lexeme, n.rows) FILTER (WHERE n.lexeme = ANY (lexemes)), '{}')
           || jsonb_build_object('', max(n.total))
    FROM memory.namespace_lexemes n
    WHERE n.organization_id = org AND n.namespace_id = _lexeme_counts.namespace_id
      AND n.kind = _lexeme_counts.kind
    HAVING count(*) > 0
$$;

-- The rows of `namespace_ids` holding any lexeme of `filter`: of few rows
-- (`few`; null: counted, up to 500 and exact_search_max_rows) by reading them
-- all, of one namespace with a text index of its own through that, of more
-- through the shared text index.
CREATE OR REPLACE FUNCTION memory._text_candidates(kind text, org uuid, namespace_ids uuid[], exclude_chat text,
                                        filter tsquery, created tstzrange, few boolean DEFAULT NULL)
RETURNS TABLE (id uuid, search_text tsvector)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF coalesce(few, memory._rows_upto(kind, org, namespace_ids, exclude_chat, 500)
                     <= least(500, memory._setting_int('exact_search_max_rows'))) THEN
        RETURN QUERY SELECT c.id, c.search_text
                     FROM memory._text_candidates_few(kind, org, namespace_ids, exclude_chat, filter, created) c;
    ELSIF cardinality(namespace_ids) = 1
          AND to_regclass(format('memory.%I', memory._namespace_text_index(kind, org, namespace_ids[1]))) IS NOT NULL THEN
        RETURN QUERY SELECT c.id, c.search_text
                     FROM memory._text_candidates_own(kind, org, namespace_ids[1], exclude_chat, filter, created) c;
    ELSE
        RETURN QUERY SELECT c.id, c.search_text
                     FROM memory._text_candidates_many(kind, org, namespace_ids, exclude_chat, filter, created) c;
    END IF;
END
$$;

-- memory._text_candidates of few rows: the namespaces' rows read through the
-- btree, then matched. The text index reads each query lexeme's postings
-- across the whole table: in a table of 1,000,000 facts, 0.75 ms for a
-- namespace of 20 rows against 0.06 ms this way, 0.99 against 0.68 ms at 400
-- rows, even at 700, and 1.31 against 1.61 ms at 1,000 (warm, bench/tenants.py
-- tables): hence up to 500. Planned once (see memory._nearest_exact).
CREATE OR REPLACE FUNCTION memory._text_candidates_few(kind text, org uuid, namespace_ids uuid[], exclude_chat text,
                                            filter tsquery, created tstzrange)
RETURNS TABLE (id uuid, search_text tsvector)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$
BEGIN
    IF kind = 'fact' THEN
        RETURN QUERY
        WITH rows AS MATERIALIZED (  -- materialized: the match must not reach the text index
            SELECT f.id, f.search_text, f.created_at FROM memory.facts f
            WHERE f.organization_id = org AND f.namespace_id = ANY (namespace_ids) AND f.forgotten_at IS NULL)
        SELECT r.id, r.search_text FROM rows r
        WHERE r.search_text @@ filter AND (created IS NULL OR r.created_at <@ created);
    ELSE
        RETURN QUERY
        WITH rows AS MATERIALIZED (
            SELECT m.id, m.search_text, m.created_at FROM memory.messages m
            WHERE m.organization_id = org AND m.namespace_id = ANY (namespace_ids)
              AND m.chat_id IS DISTINCT FROM exclude_chat)
        SELECT r.id, r.search_text FROM rows r
        WHERE r.search_text @@ filter AND (created IS NULL OR r.created_at <@ created);
    END IF;
END
$$;

-- memory._text_candidates through the text index. Planned once per session
-- (a plan per call cost 0.3 ms, most of it weighing every namespace's own
-- text index: docs/archival.md); one query per table, so each plan holds only
-- its own table's scan, and with seq scans off the text index is the one way
-- to the rows of a few namespaces matching the query.
CREATE OR REPLACE FUNCTION memory._text_candidates_many(kind text, org uuid, namespace_ids uuid[], exclude_chat text,
                                             filter tsquery, created tstzrange)
RETURNS TABLE (id uuid, search_text tsvector)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$
BEGIN
    IF kind = 'fact' THEN
        RETURN QUERY
        SELECT f.id, f.search_text FROM memory.facts f
        WHERE f.organization_id = org
          AND ARRAY[f.namespace_id] && namespace_ids  -- the indexed form (facts_search_idx)
          AND f.forgotten_at IS NULL AND f.search_text @@ filter
          AND (created IS NULL OR f.created_at <@ created);
    ELSE
        RETURN QUERY
        SELECT m.id, m.search_text FROM memory.messages m
        WHERE m.organization_id = org AND ARRAY[m.namespace_id] && namespace_ids
          AND m.chat_id IS DISTINCT FROM exclude_chat AND m.search_text @@ filter
          AND (created IS NULL OR m.created_at <@ created);
    END IF;
END
$$;

-- memory._text_candidates through a namespace's own text index
-- (memory._namespace_text_index_sql): its predicate is proved on the call's
-- constants, and it holds only the namespace's postings. Measured by hand on a
-- 20,000-fact tenant of 100,000 facts: 0.20 ms against 0.35-0.41 ms through
-- the shared index for the same rows (docs/archival.md).
CREATE OR REPLACE FUNCTION memory._text_candidates_own(kind text, org uuid, namespace_id uuid, exclude_chat text,
                                            filter tsquery, created tstzrange)
RETURNS TABLE (id uuid, search_text tsvector)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_custom_plan
AS $$
    SELECT f.id, f.search_text FROM memory.facts f
    WHERE kind = 'fact' AND f.organization_id = org AND f.namespace_id = _text_candidates_own.namespace_id
      AND f.forgotten_at IS NULL AND f.search_text @@ filter
      AND (created IS NULL OR f.created_at <@ created)
    UNION ALL
    SELECT m.id, m.search_text FROM memory.messages m
    WHERE kind = 'message' AND m.organization_id = org AND m.namespace_id = _text_candidates_own.namespace_id
      AND m.chat_id IS DISTINCT FROM exclude_chat AND m.search_text @@ filter
      AND (created IS NULL OR m.created_at <@ created)
$$;

-- The `depth` rows of `namespace_ids` matching `filter` best ranked by `terms`
-- (ts_rank_cd: score and density), or, given the query's `lexemes`, by the
-- summed idf of those each holds: idf = ln(1 + (N - n + 0.5) / (n + 0.5)) for a lexeme
-- held by n of the N live rows, ties by ts_rank_cd. A rare word shared with
-- the question outweighs several common ones (+0.07 R@1 on LoCoMo,
-- bench/locomo.py). `counts` holds N under '' and the n maintain counted; any
-- other n is counted among the candidates, which hold every row holding it.
CREATE OR REPLACE FUNCTION memory._text_ranked_in(kind text, org uuid, namespace_ids uuid[], exclude_chat text,
                                       filter tsquery, terms tsquery, depth int, created tstzrange,
                                       lexemes text[], counts jsonb, few boolean DEFAULT NULL)
RETURNS TABLE (id uuid, score float8, density float4)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF filter IS NULL THEN
        RETURN;
    END IF;
    IF lexemes IS NULL THEN  -- one pass without the idf tables (they cost a 20-row namespace 0.2 ms)
        RETURN QUERY  -- materialized: a subquery would be flattened and ts_rank_cd computed per use
        WITH ranked AS MATERIALIZED (
            SELECT c.id, ts_rank_cd(c.search_text, terms) AS cd
            FROM memory._text_candidates(kind, org, namespace_ids, exclude_chat, filter, created, few) c
        )
        SELECT r.id, r.cd::float8, r.cd FROM ranked r
        ORDER BY r.cd DESC, r.id
        LIMIT depth;
        RETURN;
    END IF;
    RETURN QUERY
    WITH candidates AS MATERIALIZED (
        SELECT c.id, c.search_text, ts_rank_cd(c.search_text, terms) AS cd
        FROM memory._text_candidates(kind, org, namespace_ids, exclude_chat, filter, created, few) c
    ), words AS MATERIALIZED (
        SELECT l.lexeme, quote_literal(replace(l.lexeme, '\', ''))::tsquery AS term FROM unnest(lexemes) l(lexeme)
    ), held AS MATERIALIZED (
        SELECT c.id, w.lexeme FROM candidates c JOIN words w ON c.search_text @@ w.term
    ), weights AS (
        SELECT h.lexeme, coalesce((counts ->> h.lexeme)::float8, count(*)) AS n FROM held h GROUP BY h.lexeme
    ), scores AS (
        SELECT h.id, sum(ln(1 + (greatest((counts ->> '')::float8, w.n) - w.n + 0.5) / (w.n + 0.5))) AS idf
        FROM held h JOIN weights w USING (lexeme) GROUP BY h.id
    )
    SELECT c.id, coalesce(s.idf, c.cd), c.cd
    FROM candidates c LEFT JOIN scores s USING (id)
    ORDER BY 2 DESC, c.cd DESC, c.id
    LIMIT depth;
END
$$;

-- Reciprocal rank fusion of both lists:
-- score = w_v / (rrf_k + rank_v) + w_t / (rrf_k + rank_t); a missing rank adds 0.
-- ROWS: it returns k rows (10 by default). At the default estimate of 1,000 the
-- planner joined them to a small table by hashing the whole of it.
-- Its query joins two function results, which no plan made for the call's
-- values does better: planned per call it cost a tiny namespace's search
-- 0.25 ms, 40% of this function (bench/tenants.py profile). The functions it
-- calls that need a plan per call (memory._nearest_in, memory._nearest_own_scan,
-- memory._text_candidates_own) set that themselves.
CREATE OR REPLACE FUNCTION memory._rank(kind text, org uuid, namespace_ids uuid[], exclude_chat text, query text,
                             query_embedding @extschema:vector@.vector, k int, options jsonb)
RETURNS TABLE (id uuid, score float8)
LANGUAGE plpgsql STABLE
ROWS 10
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    opts jsonb := memory._search_options(options);
    created tstzrange := memory._created(opts);
    -- Parsed once here for the text list; none where its weight is 0.
    lexemes text[] := CASE WHEN (opts ->> 'text_weight')::float8 > 0 THEN memory._query_lexemes(query) END;
    -- Each list is ranked deeper than k before fusion; alone, the vector list's
    -- order is the fused order, and k deep is enough.
    depth int := greatest(4 * k, 40);
    vector_depth int := CASE WHEN cardinality(lexemes) > 0 THEN depth ELSE k END;
    most int := memory._setting_int('exact_search_max_rows');
    -- Counted once for both lists; not at all where a namespace has an index
    -- of its own (memory.maintain): searched through it whatever its size, it
    -- needs no count, and counting 2,001 of its rows cost 0.4-0.5 ms.
    live int := CASE WHEN memory._own_indexed(kind, org, namespace_ids) = '{}'
                     THEN memory._rows_upto(kind, org, namespace_ids, exclude_chat, most) ELSE most + 1 END;
BEGIN
    RETURN QUERY
    WITH by_vector AS (  -- a list with weight 0 is not computed at all
        SELECT n.id, row_number() OVER (ORDER BY n.distance, n.id) AS rank
        FROM memory._nearest(kind, org, namespace_ids, exclude_chat,
                             CASE WHEN (opts ->> 'vector_weight')::float8 > 0 THEN query_embedding END, vector_depth,
                             live <= most, created, (opts ->> 'ef_search')::int) n
    ), by_text AS (
        SELECT t.id, t.rank
        FROM memory._text_ranked(kind, org, namespace_ids, exclude_chat, lexemes, depth, created,
                                 coalesce(opts ->> 'text_ranking', '') = 'idf', live <= least(most, 500)) t
        WHERE cardinality(lexemes) > 0  -- a one-time filter: not called for none
    )
    SELECT coalesce(v.id, t.id),
           coalesce((opts ->> 'vector_weight')::float8 / ((opts ->> 'rrf_k')::float8 + v.rank), 0)
         + coalesce((opts ->> 'text_weight')::float8 / ((opts ->> 'rrf_k')::float8 + t.rank), 0) AS score
    FROM by_vector v FULL JOIN by_text t ON t.id = v.id
    ORDER BY score DESC, 1
    LIMIT k;
END
$$;

-- Search option min_similarity: a hit whose cosine similarity to the query is
-- known and below it is cut (a hit without an embedding yet is kept).
-- `similarity` is null without a query embedding or with a pending one.
CREATE OR REPLACE FUNCTION memory._similar_enough(similarity float8, least_similar float8) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT least_similar IS NULL OR similarity IS NULL OR similarity >= least_similar $$;

CREATE OR REPLACE FUNCTION memory.search_facts(org uuid, query text, query_embedding real[] DEFAULT NULL, ns jsonb DEFAULT '{}',
                                    k int DEFAULT 10, options jsonb DEFAULT '{}')
RETURNS SETOF memory.fact_hit
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- For this function only: PostgreSQL restores the caller's values on return and on error.
SET hnsw.iterative_scan = 'relaxed_order'
SET hnsw.ef_search = 800  -- recall@10 0.97 at 95,000 facts of 1,000,000 (bench/search.py)
SET hnsw.max_scan_tuples = 100000
AS $$
DECLARE
    namespace_ids uuid[] := memory._resolve_many(org, ns);
    vec @extschema:vector@.vector := memory._embedding(query_embedding);
    terms tsquery := memory._any_lexeme(query);
    opts jsonb := memory._search_options(options);
    least_similar float8 := (opts ->> 'min_similarity')::float8;
BEGIN
    PERFORM memory._check_between('k', k, 1, 1000);
    IF opts ? 'ef_search' THEN  -- a SET LOCAL under the SET clause above: undone on return
        PERFORM set_config('hnsw.ef_search', opts ->> 'ef_search', true);
    END IF;
    RETURN QUERY
    SELECT f.id, f.content, r.score,
           1 - (f.embedding OPERATOR(@extschema:vector@.<=>) vec)::float8,
           coalesce(ts_rank_cd(f.search_text, terms), 0)::float4,
           memory._ns_json(n), f.created_at
    FROM memory._rank('fact', org, namespace_ids, NULL, query, vec, k, options) r
    JOIN memory.facts f ON f.organization_id = org AND f.id = r.id
    JOIN memory.namespaces n ON n.organization_id = f.organization_id AND n.id = f.namespace_id
    WHERE memory._similar_enough(1 - (f.embedding OPERATOR(@extschema:vector@.<=>) vec)::float8, least_similar)
    ORDER BY r.score DESC, f.id;
END
$$;
