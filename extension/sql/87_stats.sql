-- What a namespace holds, counted without leasing or changing anything (the
-- pending counts are a look, unlike memory.pending_embeddings).

CREATE OR REPLACE FUNCTION memory.stats(org uuid, ns jsonb DEFAULT '{}') RETURNS jsonb
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    target memory.namespaces := memory._resolve(org, ns, 'read');
BEGIN
    RETURN (
        SELECT jsonb_build_object(
            'files', (SELECT count(*) FROM memory.files f
                      WHERE f.organization_id = org AND f.namespace_id = target.id),
            'facts', count(*) FILTER (WHERE f.forgotten_at IS NULL),
            'facts_pending', count(*) FILTER (WHERE f.forgotten_at IS NULL AND f.embedding IS NULL),
            'forgotten', count(*) FILTER (WHERE f.forgotten_at IS NOT NULL),
            'messages', (SELECT count(*) FROM memory.messages m
                         WHERE m.organization_id = org AND m.namespace_id = target.id),
            'messages_pending', (SELECT count(*) FROM memory.messages m
                                 WHERE m.organization_id = org AND m.namespace_id = target.id
                                   AND m.embedding IS NULL))
        FROM memory.facts f WHERE f.organization_id = org AND f.namespace_id = target.id);
END
$$;
