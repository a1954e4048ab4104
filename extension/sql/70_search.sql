-- Hybrid search (SPEC §7): reciprocal rank fusion of a vector list (cosine,
-- exact or HNSW with iterative scan) and a full-text list (any shared lexeme,
-- ranked by ts_rank_cd).

-- The query's lexemes OR-ed: a question shares some words with its answer,
-- rarely all of them (an AND finds nearly nothing on LoCoMo).
CREATE FUNCTION memory._any_lexeme(query text) RETURNS tsquery
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT nullif(string_agg(quote_literal(replace(lexeme, '\', '')) , ' | '), '')::tsquery
    FROM unnest(tsvector_to_array(to_tsvector(memory._setting_text('text_search_config')::regconfig,
                                              coalesce(query, '')))) lexeme
$$;

-- Search options with their defaults; unknown keys and bad values refused.
CREATE FUNCTION memory._search_options(options jsonb) RETURNS jsonb
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
        IF key NOT IN ('rrf_k', 'vector_weight', 'text_weight') THEN
            PERFORM memory._fail('MEMORY_INVALID', format('unknown search option %L', key));
        END IF;
        IF jsonb_typeof(merged -> key) <> 'number' OR (merged ->> key)::numeric < 0 THEN
            PERFORM memory._fail('MEMORY_INVALID', format('search option %s must be a non-negative number', key));
        END IF;
    END LOOP;
    RETURN merged;
END
$$;

-- A row type rather than RETURNS TABLE: its column `ns` may share the name
-- of the input argument `ns`.
CREATE TYPE memory.fact_hit AS (id uuid, content text, score float8, similarity float8, text_rank float4,
                                ns jsonb, created_at timestamptz);

CREATE FUNCTION memory.search_facts(org uuid, query text, query_embedding real[] DEFAULT NULL, ns jsonb DEFAULT '{}',
                                    k int DEFAULT 10, options jsonb DEFAULT '{}')
RETURNS SETOF memory.fact_hit
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- For this function only: PostgreSQL restores the caller's values on return and on error.
SET hnsw.iterative_scan = 'relaxed_order'
SET hnsw.ef_search = 200
SET hnsw.max_scan_tuples = 100000
AS $$
DECLARE
    namespace_ids uuid[] := memory._resolve_many(org, ns);
    opts jsonb := memory._search_options(options);
    vec @extschema:vector@.vector := memory._embedding(query_embedding);
    terms tsquery := memory._any_lexeme(query);
    depth int;
BEGIN
    IF k IS NULL OR k < 1 OR k > 1000 THEN
        PERFORM memory._fail('MEMORY_INVALID', 'k must be between 1 and 1000');
    END IF;
    depth := greatest(4 * k, 40);  -- each list is ranked deeper than k before fusion
    RETURN QUERY
    WITH by_vector AS (
        SELECT n.id, row_number() OVER (ORDER BY n.distance, n.id) AS rank
        FROM memory._nearest_facts(org, namespace_ids, vec, depth) n
        WHERE vec IS NOT NULL
    ), by_text AS (
        SELECT t.id, row_number() OVER (ORDER BY t.r DESC, t.id) AS rank
        FROM (SELECT f.id, ts_rank_cd(f.search_text, terms) AS r
              FROM memory.facts f
              WHERE terms IS NOT NULL AND f.organization_id = org AND f.namespace_id = ANY (namespace_ids)
                AND f.forgotten_at IS NULL AND f.search_text @@ terms
              ORDER BY r DESC, f.id LIMIT depth) t
    ), fused AS (
        SELECT coalesce(v.id, t.id) AS id,
               coalesce((opts ->> 'vector_weight')::float8 / ((opts ->> 'rrf_k')::float8 + v.rank), 0)
             + coalesce((opts ->> 'text_weight')::float8 / ((opts ->> 'rrf_k')::float8 + t.rank), 0) AS score
        FROM by_vector v FULL JOIN by_text t ON t.id = v.id
    )
    SELECT f.id, f.content, fu.score,
           CASE WHEN vec IS NOT NULL AND f.embedding IS NOT NULL
                THEN 1 - (f.embedding OPERATOR(@extschema:vector@.<=>) vec)::float8 END,
           CASE WHEN terms IS NOT NULL THEN ts_rank_cd(f.search_text, terms) ELSE 0 END::float4,
           memory._ns_json(n), f.created_at
    FROM fused fu
    JOIN memory.facts f ON f.organization_id = org AND f.id = fu.id
    JOIN memory.namespaces n ON n.organization_id = f.organization_id AND n.id = f.namespace_id
    ORDER BY fu.score DESC, f.id
    LIMIT k;
END
$$;
