-- Indexes of their own for large namespaces. One HNSW graph shared by every
-- tenant serves a filtered search badly once a tenant holds a large share of
-- the table: the walk has to visit everyone's rows to find enough of the
-- tenant's (ef_search 800 for recall 0.97 at 10% of 1,000,000 facts). A
-- namespace of at least `namespace_index_min_rows` live rows gets a partial
-- HNSW index whose predicate is that namespace, and beside it a partial text
-- index on the same predicate; memory.maintain() creates and drops them,
-- memory._nearest searches such a namespace through its own HNSW index and
-- memory._text_candidates_own finds its rows by lexeme through its own text
-- index (docs/archival.md, "Large namespaces").

-- The name of a namespace's own index on the `kind` table: the table's name
-- and a hash of the organization and namespace (a name holds 63 bytes).
CREATE OR REPLACE FUNCTION memory._namespace_index(kind text, org uuid, namespace_id uuid) RETURNS name
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT (t.table_name || '_ns_' || md5(org::text || '/' || namespace_id::text))::name
    FROM memory._memory_tables() t WHERE t.kind = _namespace_index.kind
$$;

-- The name of the text index beside a namespace's own HNSW index.
CREATE OR REPLACE FUNCTION memory._namespace_text_index(kind text, org uuid, namespace_id uuid) RETURNS name
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT (memory._namespace_index(kind, org, namespace_id) || '_text')::name $$;

-- Those of `namespace_ids` that have an index of their own, in order.
CREATE OR REPLACE FUNCTION memory._own_indexed(kind text, org uuid, namespace_ids uuid[]) RETURNS uuid[]
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT coalesce(array_agg(n ORDER BY n), '{}')
    FROM unnest(namespace_ids) n
    WHERE to_regclass(format('memory.%I', memory._namespace_index(kind, org, n))) IS NOT NULL
$$;

-- What memory.maintain() measured of a namespace's own index (in its comment):
-- {"organization_id", "namespace_id", "rows", "ef_search", "far_distance"}
-- (memory._calibrate); null without one.
CREATE OR REPLACE FUNCTION memory._own_index_about(kind text, org uuid, namespace_id uuid) RETURNS jsonb
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT obj_description(to_regclass(format('memory.%I', memory._namespace_index(kind, org, namespace_id))),
                           'pg_class')::jsonb
$$;

-- The ef_search an own index needs for recall@10 0.98, from what maintain()
-- measured of it (memory._own_index_about; 100 where it measured none).
CREATE OR REPLACE FUNCTION memory._ef_search_of(about jsonb) RETURNS int
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT coalesce((about ->> 'ef_search')::int, 100) $$;

-- The same for a namespace's own index.
CREATE OR REPLACE FUNCTION memory._own_ef_search(kind text, org uuid, namespace_id uuid) RETURNS int
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT memory._ef_search_of(memory._own_index_about(kind, org, namespace_id)) $$;

-- Live rows of the namespaces (an index-only count).
CREATE OR REPLACE FUNCTION memory._live_rows(kind text, org uuid, namespace_ids uuid[]) RETURNS bigint
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE kind
        WHEN 'fact' THEN (SELECT count(*) FROM memory.facts f
                          WHERE f.organization_id = org AND f.namespace_id = ANY (namespace_ids) AND f.forgotten_at IS NULL)
        ELSE (SELECT count(*) FROM memory.messages m
              WHERE m.organization_id = org AND m.namespace_id = ANY (namespace_ids)) END
$$;

-- `n` rows of a namespace with embeddings, the same ones each time (by a hash
-- of their ids): memory._calibrate's queries.
CREATE OR REPLACE FUNCTION memory._probes(kind text, org uuid, namespace_id uuid, n int,
                               OUT ids uuid[], OUT vectors @extschema:vector@.vector[])
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT array_agg(p.id ORDER BY p.h), array_agg(p.embedding ORDER BY p.h)
    FROM (SELECT f.id, f.embedding, md5(f.id::text) AS h FROM memory.facts f
          WHERE kind = 'fact' AND f.organization_id = org AND f.namespace_id = _probes.namespace_id
            AND f.forgotten_at IS NULL AND f.embedding IS NOT NULL
          UNION ALL
          SELECT m.id, m.embedding, md5(m.id::text) FROM memory.messages m
          WHERE kind = 'message' AND m.organization_id = org AND m.namespace_id = _probes.namespace_id
            AND m.embedding IS NOT NULL
          ORDER BY 3 LIMIT n) p
$$;

-- The exact 10 nearest neighbours of each probe among the namespace's rows
-- (leaving the probe out): 10 per probe in probe order, null where it has
-- fewer. One pass over the rows: the 10th distance the own index finds deep
-- (ef_search 1000) bounds each probe's true 10th from above, so only rows
-- within it are ranked. A scan per probe read the whole table each time: 1.3 s
-- a probe at 200,000 of 1,000,000 facts, against 11 s for 100 probes this way.
CREATE OR REPLACE FUNCTION memory._exact_neighbours(kind text, org uuid, namespace_id uuid,
                                         probe_ids uuid[], probes @extschema:vector@.vector[])
RETURNS uuid[]
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET hnsw.iterative_scan = 'relaxed_order'
SET hnsw.max_scan_tuples = 100000
SET hnsw.ef_search = 1000
AS $$
DECLARE
    bounds float8[] := ARRAY(
        SELECT coalesce((SELECT max(n.distance) FROM (
                             SELECT o.distance FROM memory._nearest_own(kind, org, namespace_id, NULL, probes[i], 11, NULL) o
                             WHERE o.id <> probe_ids[i] ORDER BY o.distance LIMIT 10) n
                         HAVING count(*) = 10), 'Infinity')
        FROM generate_series(1, cardinality(probes)) i ORDER BY i);
    truth uuid[];
BEGIN
    WITH ranked AS (
        SELECT c.i, c.id, c.distance, row_number() OVER (PARTITION BY c.i ORDER BY c.distance, c.id) AS place
          FROM (SELECT p.i, f.id, (f.embedding OPERATOR(@extschema:vector@.<=>) p.v)::float8 AS distance
                FROM memory.facts f, unnest(probes, probe_ids, bounds) WITH ORDINALITY p(v, probe_id, bound, i)
                WHERE kind = 'fact' AND f.organization_id = org AND f.namespace_id = _exact_neighbours.namespace_id
                  AND f.forgotten_at IS NULL AND f.embedding IS NOT NULL AND f.id <> p.probe_id
                  AND (f.embedding OPERATOR(@extschema:vector@.<=>) p.v)::float8 <= p.bound
                UNION ALL
                SELECT p.i, m.id, (m.embedding OPERATOR(@extschema:vector@.<=>) p.v)::float8
                FROM memory.messages m, unnest(probes, probe_ids, bounds) WITH ORDINALITY p(v, probe_id, bound, i)
                WHERE kind = 'message' AND m.organization_id = org AND m.namespace_id = _exact_neighbours.namespace_id
                  AND m.embedding IS NOT NULL AND m.id <> p.probe_id
                  AND (m.embedding OPERATOR(@extschema:vector@.<=>) p.v)::float8 <= p.bound) c)
    SELECT array_agg(r.id ORDER BY p.i, s.place) INTO truth
    FROM generate_series(1, cardinality(probes)) p(i) CROSS JOIN generate_series(1, 10) s(place)
         LEFT JOIN ranked r ON r.i = p.i AND r.place = s.place;
    RETURN truth;
END
$$;

-- The largest distance from a probe to its 10th exact neighbour (`truth`: 10
-- per probe, in probe order): how far the calibration's queries saw their 10
-- nearest lie. Null where no probe has 10.
CREATE OR REPLACE FUNCTION memory._far_distance(kind text, org uuid, probes @extschema:vector@.vector[], truth uuid[])
RETURNS float8
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT max(d.distance) FROM (
        SELECT (f.embedding OPERATOR(@extschema:vector@.<=>) probes[i])::float8 AS distance
        FROM generate_series(1, cardinality(probes)) i
             JOIN memory.facts f ON f.organization_id = org AND f.id = truth[10 * i]
        WHERE kind = 'fact'
        UNION ALL
        SELECT (m.embedding OPERATOR(@extschema:vector@.<=>) probes[i])::float8
        FROM generate_series(1, cardinality(probes)) i
             JOIN memory.messages m ON m.organization_id = org AND m.id = truth[10 * i]
        WHERE kind = 'message') d
$$;

-- The smallest ef_search at which a namespace's own index, walked as a search
-- walks it (memory._nearest_own: the probe and its 10 nearest; a deeper list
-- at the same ef_search has the same first 10), finds 98% of the exact 10 nearest
-- neighbours of 100 of the namespace's own rows (each leaving itself out): a
-- margin over the 0.97 searches are held to, since other queries are another
-- sample (the estimate's standard error is about 0.005 at 1,000 neighbours).
-- Each build of a graph differs, and a coarser estimate was a draw: at 99% of
-- 50 probes one 50,000-fact tenant got 800 in one build and 1000 in the next,
-- where its rows in a table of their own reach recall@10 0.98 at 600
-- (bench/tenants.py). Recall grows with ef_search, so the ladder is searched
-- by halves. Returns {"ef_search", "far_distance"} (memory._far_distance of
-- the same probes: past it a search walks again deeper, memory._nearest_own);
-- null for a namespace without embeddings.
CREATE OR REPLACE FUNCTION memory._calibrate(kind text, org uuid, namespace_id uuid) RETURNS jsonb
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET hnsw.iterative_scan = 'relaxed_order'
SET hnsw.max_scan_tuples = 100000
SET hnsw.ef_search = 40
AS $$
DECLARE
    probe_ids uuid[];
    probes @extschema:vector@.vector[];
    truth uuid[];  -- 10 per probe, in probe order
    ladder int[] := ARRAY[40, 60, 80, 100, 120, 150, 200, 250, 300, 400, 500, 600, 700, 800, 1000];
    low int := 1;
    high int := cardinality(ladder);
    middle int;
    found bigint;
BEGIN
    SELECT p.ids, p.vectors INTO probe_ids, probes FROM memory._probes(kind, org, namespace_id, 100) p;
    IF probes IS NULL THEN
        RETURN NULL;
    END IF;
    truth := memory._exact_neighbours(kind, org, namespace_id, probe_ids, probes);
    WHILE low < high LOOP
        middle := (low + high) / 2;
        PERFORM set_config('hnsw.ef_search', ladder[middle]::text, true);
        SELECT sum((SELECT count(*) FROM (
                        SELECT n.id FROM memory._nearest_own(kind, org, namespace_id, NULL, probes[i], 11, NULL) n
                        WHERE n.id <> probe_ids[i] ORDER BY n.distance, n.id LIMIT 10) h
                    WHERE h.id = ANY (truth[10 * i - 9 : 10 * i])))
        INTO found FROM generate_series(1, cardinality(probes)) i;
        IF found >= 0.98 * cardinality(array_remove(truth, NULL)) THEN
            high := middle;
        ELSE
            low := middle + 1;
        END IF;
    END LOOP;
    RETURN jsonb_build_object('ef_search', ladder[low],
                              'far_distance', memory._far_distance(kind, org, probes, truth));
END
$$;

-- The name a namespace's own index is built under by
-- memory.maintenance_statements(), until it is valid and renamed: no search
-- looks an index up by it, so none walks a graph still being built.
CREATE OR REPLACE FUNCTION memory._building_index(kind text, org uuid, namespace_id uuid) RETURNS name
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT (memory._namespace_index(kind, org, namespace_id) || '_building')::name $$;

-- The name its text index is built under, likewise.
CREATE OR REPLACE FUNCTION memory._building_text_index(kind text, org uuid, namespace_id uuid) RETURNS name
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT (memory._namespace_text_index(kind, org, namespace_id) || '_building')::name $$;

-- The predicate of a namespace's own indexes (HNSW and text): the filter every
-- search of one namespace writes, so the planner can prove it and use either;
-- the two must stay equal. Values through %L only.
CREATE OR REPLACE FUNCTION memory._namespace_predicate_sql(kind text, org uuid, namespace_id uuid) RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT format('organization_id = %L::uuid AND namespace_id = %L::uuid', org, namespace_id)
           || coalesce(' AND ' || t.live, '')
    FROM memory._memory_tables() t WHERE t.kind = _namespace_predicate_sql.kind
$$;

-- The statement that builds a namespace's own HNSW index as `index_name`,
-- under memory._namespace_predicate_sql. It indexes COALESCE(embedding, embedding):
-- the same values and dimensions, but an expression only
-- memory._nearest_own orders by, so the shared index cannot serve that query
-- and the planner cannot pick it instead by cost (their costs were within 8%
-- in a test, and a flip walked the shared graph at this index's ef_search,
-- missing rows).
CREATE OR REPLACE FUNCTION memory._namespace_index_sql(kind text, org uuid, namespace_id uuid, index_name name,
                                            nonblocking boolean) RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT format('CREATE INDEX %s%I ON memory.%I USING hnsw ((COALESCE(embedding, embedding)) %I.%I) WHERE %s',
                  CASE WHEN nonblocking THEN 'CONCURRENTLY IF NOT EXISTS ' ELSE '' END, index_name, t.table_name,
                  memory._vector_schema(), (memory._embedding_config()).type_name || '_cosine_ops',
                  memory._namespace_predicate_sql(kind, org, namespace_id))
    FROM memory._memory_tables() t WHERE t.kind = _namespace_index_sql.kind
$$;

-- The statement that builds a namespace's own text index as `index_name`: a
-- GIN index on search_text under the same predicate. The shared
-- text index (ARRAY[namespace_id], search_text) intersects a lexeme's postings
-- across the table with the namespace's; this one holds the namespace's alone.
CREATE OR REPLACE FUNCTION memory._namespace_text_index_sql(kind text, org uuid, namespace_id uuid, index_name name,
                                                 nonblocking boolean) RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT format('CREATE INDEX %s%I ON memory.%I USING gin (search_text) WHERE %s',
                  CASE WHEN nonblocking THEN 'CONCURRENTLY IF NOT EXISTS ' ELSE '' END, index_name, t.table_name,
                  memory._namespace_predicate_sql(kind, org, namespace_id))
    FROM memory._memory_tables() t WHERE t.kind = _namespace_text_index_sql.kind
$$;

-- The statement that gives a new own index the comment maintain() reads its
-- namespace from.
CREATE OR REPLACE FUNCTION memory._namespace_index_comment_sql(index_name name, org uuid, namespace_id uuid)
RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT format('COMMENT ON INDEX memory.%I IS %L', index_name,
                  jsonb_build_object('organization_id', org, 'namespace_id', namespace_id)::text)
$$;

-- Builds a namespace's own HNSW index and its text index with a plain CREATE
-- INDEX (CONCURRENTLY cannot run inside a function): writes to the table wait
-- until they are built, reads go on. memory.maintenance_statements() builds
-- them without the wait.
CREATE OR REPLACE FUNCTION memory._create_namespace_index(kind text, org uuid, namespace_id uuid) RETURNS name
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    index_name name := memory._namespace_index(kind, org, namespace_id);
BEGIN
    EXECUTE memory._namespace_index_sql(kind, org, namespace_id, index_name, false);
    EXECUTE memory._namespace_index_comment_sql(index_name, org, namespace_id);
    PERFORM memory._create_namespace_text_index(kind, org, namespace_id);
    RETURN index_name;
END
$$;

-- Builds a namespace's own text index unless it has one (as above); returns
-- its name, or null when it was there.
CREATE OR REPLACE FUNCTION memory._create_namespace_text_index(kind text, org uuid, namespace_id uuid) RETURNS name
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    index_name name := memory._namespace_text_index(kind, org, namespace_id);
BEGIN
    IF to_regclass(format('memory.%I', index_name)) IS NOT NULL THEN
        RETURN NULL;
    END IF;
    EXECUTE memory._namespace_text_index_sql(kind, org, namespace_id, index_name, false);
    RETURN index_name;
END
$$;

-- Every namespace's own HNSW index of the `kind` table, with the namespace it
-- serves (not those still being built under their building name, nor the
-- text indexes beside them).
CREATE OR REPLACE FUNCTION memory._namespace_indexes(kind text)
RETURNS TABLE (index_name name, organization_id uuid, namespace_id uuid)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT c.relname, (d.about ->> 'organization_id')::uuid, (d.about ->> 'namespace_id')::uuid
    FROM memory._memory_tables() t
    JOIN pg_index i ON i.indrelid = format('memory.%I', t.table_name)::regclass
    JOIN pg_class c ON c.oid = i.indexrelid
    CROSS JOIN LATERAL (SELECT obj_description(c.oid, 'pg_class')::jsonb AS about) d
    WHERE t.kind = _namespace_indexes.kind AND c.relname LIKE t.table_name || '\_ns\_%'
      AND c.relname NOT LIKE '%\_building' AND c.relname NOT LIKE '%\_text'
$$;

-- Indexes left under their building name on either table: a concurrent build
-- that failed or was cancelled leaves one behind, invalid.
CREATE OR REPLACE FUNCTION memory._building_indexes() RETURNS SETOF name
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT c.relname FROM memory._memory_tables() t
    JOIN pg_index i ON i.indrelid = format('memory.%I', t.table_name)::regclass
    JOIN pg_class c ON c.oid = i.indexrelid
    WHERE c.relname LIKE t.table_name || '\_ns\_%\_building'
    ORDER BY 1
$$;

-- What the own indexes of the `kind` table need, in the order maintain()
-- takes it: 'drop' for each index whose namespace has shrunk below half of
-- namespace_index_min_rows (every one at 0), then by namespace 'create' for one
-- at the line without an index and 'keep' for one that has its index.
CREATE OR REPLACE FUNCTION memory._index_plan(kind text)
RETURNS TABLE (step text, organization_id uuid, namespace_id uuid, live_rows bigint, index_name name)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    min_rows bigint := memory._setting_int('namespace_index_min_rows');
    t record;
    sizes jsonb;  -- {"<org>/<namespace>": live rows} of the namespaces at least half the line
    x record;
BEGIN
    SELECT * INTO t FROM memory._memory_tables() m WHERE m.kind = _index_plan.kind;
    EXECUTE format('SELECT coalesce(jsonb_object_agg(s.organization_id || ''/'' || s.namespace_id, s.n), ''{}'') '
                   'FROM (SELECT r.organization_id, r.namespace_id, count(*) AS n FROM memory.%I r %s '
                   'GROUP BY 1, 2 HAVING count(*) >= $1) s',
                   t.table_name, coalesce('WHERE ' || t.live, ''))
        INTO sizes USING greatest(1, (min_rows + 1) / 2);
    FOR x IN SELECT * FROM memory._namespace_indexes(t.kind) ORDER BY 1 LOOP
        CONTINUE WHEN min_rows > 0 AND sizes ? (x.organization_id || '/' || x.namespace_id);
        step := 'drop'; organization_id := x.organization_id; namespace_id := x.namespace_id;
        live_rows := memory._live_rows(t.kind, x.organization_id, ARRAY[x.namespace_id]);
        index_name := x.index_name;
        RETURN NEXT;
    END LOOP;
    FOR x IN SELECT k.org, k.ns, s.value::bigint AS n,
                    to_regclass(format('memory.%I', memory._namespace_index(t.kind, k.org, k.ns))) IS NOT NULL AS own
             FROM jsonb_each_text(sizes) s,
                  LATERAL (SELECT split_part(s.key, '/', 1)::uuid AS org, split_part(s.key, '/', 2)::uuid AS ns) k
             WHERE min_rows > 0 ORDER BY s.key LOOP
        CONTINUE WHEN NOT x.own AND x.n < min_rows;  -- under the line, and none to keep
        step := CASE WHEN x.own THEN 'keep' ELSE 'create' END;
        organization_id := x.org; namespace_id := x.ns; live_rows := x.n;
        index_name := memory._namespace_index(t.kind, x.org, x.ns);
        RETURN NEXT;
    END LOOP;
END
$$;

-- Drops every namespace's own index, and any left building (the embedding
-- column is about to change type).
CREATE OR REPLACE FUNCTION memory._drop_namespace_indexes() RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    index_name name;
BEGIN
    FOR index_name IN SELECT x.index_name FROM memory._memory_tables() t, memory._namespace_indexes(t.kind) x
                      UNION ALL SELECT (x.index_name || '_text')::name
                                FROM memory._memory_tables() t, memory._namespace_indexes(t.kind) x
                      UNION ALL SELECT b FROM memory._building_indexes() b LOOP
        EXECUTE format('DROP INDEX IF EXISTS memory.%I', index_name);
    END LOOP;
    DELETE FROM memory.namespace_lexemes;
END
$$;

-- Counts again how many live rows of a namespace hold each lexeme (those in
-- at least 10: a rarer one is rare enough for any query).
CREATE OR REPLACE FUNCTION memory._count_lexemes(kind text, org uuid, namespace_id uuid, total bigint) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t record;
BEGIN
    SELECT * INTO t FROM memory._memory_tables() m WHERE m.kind = _count_lexemes.kind;
    DELETE FROM memory.namespace_lexemes l
    WHERE l.organization_id = org AND l.namespace_id = _count_lexemes.namespace_id AND l.kind = _count_lexemes.kind;
    EXECUTE format('INSERT INTO memory.namespace_lexemes (organization_id, namespace_id, kind, lexeme, rows, total) '
                   'SELECT $1, $2, $3, s.word, s.ndoc, $4 FROM ts_stat(%L) s WHERE s.ndoc >= 10',
                   format('SELECT search_text FROM memory.%I WHERE organization_id = %L AND namespace_id = %L',
                          t.table_name, org, namespace_id) || coalesce(' AND ' || t.live, ''))
        USING org, namespace_id, kind, greatest(total, 1);
END
$$;

-- Measures a namespace's own index again: its lexeme counts and the
-- ef_search it needs, written with its size into the index's comment.
CREATE OR REPLACE FUNCTION memory._measure_namespace_index(kind text, org uuid, namespace_id uuid, live_rows bigint)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM memory._count_lexemes(kind, org, namespace_id, live_rows);
    EXECUTE format('COMMENT ON INDEX memory.%I IS %L', memory._namespace_index(kind, org, namespace_id),
                   (jsonb_build_object('organization_id', org, 'namespace_id', namespace_id, 'rows', live_rows)
                    || coalesce(memory._calibrate(kind, org, namespace_id), '{}'))::text);
END
$$;

-- The query's `lexemes` a search of a namespace with its own index looks for:
-- the rarest first, while the rows holding them add up to at most `budget`
-- (the rarest is always in). A lexeme not counted is in fewer than 10 rows.
CREATE OR REPLACE FUNCTION memory._rare_lexemes(kind text, org uuid, namespace_id uuid, lexemes text[], budget int)
RETURNS tsquery
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT memory._or_lexemes(array_agg(r.lexeme))
    FROM (SELECT q.lexeme, row_number() OVER w AS rarity, sum(coalesce(n.rows, 9)) OVER w AS rows_through
          FROM unnest(lexemes) q(lexeme)
          LEFT JOIN memory.namespace_lexemes n
            ON n.organization_id = org AND n.namespace_id = _rare_lexemes.namespace_id
           AND n.kind = _rare_lexemes.kind AND n.lexeme = q.lexeme
          WINDOW w AS (ORDER BY coalesce(n.rows, 9), q.lexeme)) r
    WHERE r.rarity = 1 OR r.rows_through <= budget
$$;

-- Puts a namespace's facts into the shared HNSW index for good: marks it, so
-- that its new facts go in as they are saved (memory._derive_in_shared_index),
-- and moves in its live facts still outside, a concurrent writer's too when
-- memory.maintain() calls it again. Returns how many it moved.
CREATE OR REPLACE FUNCTION memory._join_shared_index(org uuid, namespace_id uuid) RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    moved bigint;
BEGIN
    INSERT INTO memory.shared_index_namespaces (organization_id, namespace_id)
    VALUES (org, _join_shared_index.namespace_id) ON CONFLICT DO NOTHING;
    UPDATE memory.facts f SET in_shared_index = true
    WHERE f.organization_id = org AND f.namespace_id = _join_shared_index.namespace_id
      AND f.forgotten_at IS NULL AND NOT f.in_shared_index;
    GET DIAGNOSTICS moved = ROW_COUNT;
    RETURN moved;
END
$$;

-- Moves the facts of namespaces past exact_search_max_rows into the shared
-- index, creates the own indexes namespaces have grown into and drops those
-- they have shrunk out of (service only; memory._index_plan). A namespace gets
-- one at namespace_index_min_rows live rows and keeps it down to half of that,
-- so one at the line is not rebuilt back and forth; 0 drops them all. Each
-- row names the HNSW index; its text index comes and goes with it (a row of
-- its own names one built alone, where it was missing). Idempotent, one
-- maintainer at a time; returns what it changed.
CREATE OR REPLACE FUNCTION memory.maintain()
RETURNS TABLE (action text, kind text, organization_id uuid, namespace_id uuid, live_rows bigint, index_name name)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t record;
    x record;
    measured bigint;
BEGIN
    PERFORM memory._require_service();
    PERFORM pg_advisory_xact_lock(hashtextextended('memory.maintain', 0));
    -- Facts outside the shared index that a search of their namespace walks it for.
    FOR x IN SELECT f.organization_id AS org, f.namespace_id AS ns, count(*) AS n FROM memory.facts f
             WHERE f.forgotten_at IS NULL
               AND NOT EXISTS (SELECT FROM memory.shared_index_namespaces s
                               WHERE s.organization_id = f.organization_id AND s.namespace_id = f.namespace_id)
             GROUP BY 1, 2 HAVING count(*) > memory._setting_int('exact_search_max_rows') ORDER BY 1, 2 LOOP
        PERFORM memory._join_shared_index(x.org, x.ns);
        action := 'joined'; kind := 'fact'; organization_id := x.org; namespace_id := x.ns; live_rows := x.n;
        index_name := 'facts_embedding_idx';
        RETURN NEXT;
    END LOOP;
    FOR x IN SELECT DISTINCT f.organization_id AS org, f.namespace_id AS ns
             FROM memory.facts f JOIN memory.shared_index_namespaces s
               ON s.organization_id = f.organization_id AND s.namespace_id = f.namespace_id
             WHERE f.forgotten_at IS NULL AND NOT f.in_shared_index LOOP
        PERFORM memory._join_shared_index(x.org, x.ns);  -- saved outside while the namespace joined
    END LOOP;
    FOR t IN SELECT * FROM memory._memory_tables() LOOP
        kind := t.kind;
        FOR x IN SELECT p.* FROM memory._index_plan(t.kind)
                      WITH ORDINALITY p(step, organization_id, namespace_id, live_rows, index_name, n)
                 ORDER BY p.n LOOP
            organization_id := x.organization_id; namespace_id := x.namespace_id; live_rows := x.live_rows;
            index_name := x.index_name;
            IF x.step = 'drop' THEN
                EXECUTE format('DROP INDEX IF EXISTS memory.%I',
                               memory._namespace_text_index(t.kind, x.organization_id, x.namespace_id));
                EXECUTE format('DROP INDEX memory.%I', x.index_name);
                action := 'dropped';
                RETURN NEXT;
                CONTINUE;
            END IF;
            IF x.step = 'create' THEN
                PERFORM memory._create_namespace_index(t.kind, x.organization_id, x.namespace_id);
                action := 'created';
                RETURN NEXT;
            ELSE  -- kept: its text index too (one built before text indexes were, or whose build failed)
                index_name := memory._create_namespace_text_index(t.kind, x.organization_id, x.namespace_id);
                IF index_name IS NOT NULL THEN
                    action := 'created';
                    RETURN NEXT;
                END IF;
            END IF;
            -- What was measured follows the namespace within a quarter of its size.
            measured := (memory._own_index_about(t.kind, x.organization_id, x.namespace_id) ->> 'rows')::bigint;
            IF measured IS NULL OR abs(x.live_rows - measured) * 4 > measured THEN
                PERFORM memory._measure_namespace_index(t.kind, x.organization_id, x.namespace_id, x.live_rows);
            END IF;
        END LOOP;
    END LOOP;
    -- Counts of namespaces without their own index any more: dropped above or
    -- by memory.maintenance_statements(), or erased with their user.
    DELETE FROM memory.namespace_lexemes l
    USING (SELECT n.* FROM (SELECT DISTINCT d.kind, d.organization_id, d.namespace_id
                            FROM memory.namespace_lexemes d OFFSET 0) n  -- looked up per namespace, not per lexeme
           WHERE to_regclass(format('memory.%I', memory._namespace_index(n.kind, n.organization_id, n.namespace_id)))
                 IS NULL) gone
    WHERE (l.kind, l.organization_id, l.namespace_id) = (gone.kind, gone.organization_id, gone.namespace_id);
END
$$;

-- The statements that bring the own indexes where memory.maintain() would,
-- without making writes wait (service only): CREATE INDEX CONCURRENTLY under
-- the building name (memory._building_index) then a rename, so no search walks
-- a graph before it is whole, the same for a text index (built or missing),
-- and DROP INDEX CONCURRENTLY; first, the drop of
-- any build left over by a failed run, and last, memory.maintain() for the
-- rest (joins, measuring the new indexes). Each is to be run alone, outside a
-- transaction block, by the tables' owner (psql's \gexec; `pgmemory maintain
-- --concurrently`). Names are built with %I and namespaces with %L only.
CREATE OR REPLACE FUNCTION memory.maintenance_statements() RETURNS SETOF text
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t record;
    x record;
    building name;
    text_index name;
BEGIN
    PERFORM memory._require_service();
    FOR building IN SELECT * FROM memory._building_indexes() LOOP
        RETURN NEXT format('DROP INDEX CONCURRENTLY IF EXISTS memory.%I', building);
    END LOOP;
    FOR t IN SELECT * FROM memory._memory_tables() LOOP
        FOR x IN SELECT p.* FROM memory._index_plan(t.kind)
                      WITH ORDINALITY p(step, organization_id, namespace_id, live_rows, index_name, n)
                 ORDER BY p.n LOOP
            text_index := memory._namespace_text_index(t.kind, x.organization_id, x.namespace_id);
            IF x.step = 'drop' THEN
                RETURN NEXT format('DROP INDEX CONCURRENTLY IF EXISTS memory.%I', text_index);
                RETURN NEXT format('DROP INDEX CONCURRENTLY IF EXISTS memory.%I', x.index_name);
                CONTINUE;
            END IF;
            IF x.step = 'create' THEN
                building := memory._building_index(t.kind, x.organization_id, x.namespace_id);
                RETURN NEXT memory._namespace_index_sql(t.kind, x.organization_id, x.namespace_id, building, true);
                RETURN NEXT memory._namespace_index_comment_sql(building, x.organization_id, x.namespace_id);
                RETURN NEXT format('ALTER INDEX memory.%I RENAME TO %I', building, x.index_name);
            END IF;
            CONTINUE WHEN to_regclass(format('memory.%I', text_index)) IS NOT NULL;
            building := memory._building_text_index(t.kind, x.organization_id, x.namespace_id);
            RETURN NEXT memory._namespace_text_index_sql(t.kind, x.organization_id, x.namespace_id, building, true);
            RETURN NEXT format('ALTER INDEX memory.%I RENAME TO %I', building, text_index);
        END LOOP;
    END LOOP;
    RETURN NEXT 'SELECT * FROM memory.maintain()';
END
$$;
