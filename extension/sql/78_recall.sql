-- Recall before a turn: what an assistant should see, in one call. Each part
-- comes from the public function that serves it alone (render, search_facts,
-- search_messages), so the access rules are theirs. Under an operation id the
-- answer is kept, and the same caller asking again gets exactly it: a
-- replayed turn sees what the first one saw.

-- A count option (facts, messages): an integer from 0 to `high`.
CREATE OR REPLACE FUNCTION memory._recall_count(options jsonb, key text, high int) RETURNS int
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM memory._check_between('option ' || key,
        memory._as_integer(options -> key, 0, high), 0, high);
    RETURN memory._as_integer(options -> key);  -- 5.0 is 5
END
$$;

-- The search options among recall_context's options.
CREATE OR REPLACE FUNCTION memory._recall_search_options(options jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT options - ARRAY['facts', 'messages', 'exclude_chat', 'operation_id'] $$;

-- recall_context's own options with their defaults; every other key is a
-- search option, checked as the searches check it and given to both.
CREATE OR REPLACE FUNCTION memory._recall_options(options jsonb) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    merged jsonb := jsonb_build_object('facts', 5, 'messages', 5) || coalesce(options, '{}');
BEGIN
    IF jsonb_typeof(coalesce(options, '{}')) <> 'object' THEN
        PERFORM memory._fail('MEMORY_INVALID', 'options must be a JSON object');
    END IF;
    PERFORM memory._search_options(memory._recall_search_options(merged));
    merged := merged || jsonb_build_object('facts', memory._recall_count(merged, 'facts', 1000),  -- k of search_facts
                                           'messages', memory._recall_count(merged, 'messages', 100));  -- k of search_messages
    IF jsonb_typeof(merged -> 'exclude_chat') NOT IN ('string', 'null') THEN
        PERFORM memory._fail('MEMORY_INVALID', 'option exclude_chat must be a string');
    END IF;
    IF jsonb_typeof(merged -> 'operation_id') NOT IN ('string', 'null')
       OR merged ->> 'operation_id' = '' OR octet_length(merged ->> 'operation_id') > 1024 THEN
        PERFORM memory._fail('MEMORY_INVALID', 'option operation_id must be a non-empty string of at most 1024 bytes');
    END IF;
    RETURN merged;
END
$$;

CREATE OR REPLACE FUNCTION memory.recall_context(org uuid, query text, query_embedding real[] DEFAULT NULL,
                                      ns jsonb DEFAULT '{}', options jsonb DEFAULT '{}')
RETURNS TABLE (id text, kind text, content text)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    who memory.caller := memory._caller();
    target memory.namespaces := memory._resolve(org, ns, 'read');
    opts jsonb := memory._recall_options(options);
    search jsonb := memory._recall_search_options(opts);
    fact_count int := (opts ->> 'facts')::int;
    message_count int := (opts ->> 'messages')::int;
    operation text := opts ->> 'operation_id';
    -- Whose memory the answer holds (the replay's namespace): the calling
    -- user's; for the service, the owner's of `ns`, or the organization's.
    owner uuid := CASE WHEN who.service THEN target.owner_id ELSE who.user_id END;
    subject uuid := CASE WHEN owner IS NULL THEN memory._org_namespace_id(org)
                         ELSE memory._namespace_id(org, 'user', owner, NULL) END;
    kept interval := make_interval(secs => memory._setting_int('recall_replay_seconds'));
    answer jsonb;
    stored jsonb;
    core text;
BEGIN
    IF operation IS NOT NULL THEN
        SELECT r.answer INTO answer FROM memory.recall_replays r
        WHERE r.organization_id = org AND r.namespace_id = subject AND r.service = who.service
          AND r.operation_id = operation AND r.created_at > now() - kept;
    END IF;
    IF answer IS NULL THEN
        IF message_count > 0 AND who.service THEN
            PERFORM memory._fail('MEMORY_INVALID',
                'the service has no messages of its own: call recall_context with the user''s claims, or pass option messages 0');
        END IF;
        core := memory.render(org, ns);
        answer := CASE WHEN core <> '' THEN jsonb_build_array(jsonb_build_object('id', 'core', 'kind', 'core', 'content', core))
                       ELSE '[]' END;
        IF fact_count > 0 THEN
            answer := answer || coalesce((
                SELECT jsonb_agg(jsonb_build_object('id', 'fact:' || f.id, 'kind', 'fact', 'content', f.content)
                                 ORDER BY f.ordinality)
                FROM memory.search_facts(org, query, query_embedding, ns, fact_count, search) WITH ORDINALITY f), '[]');
        END IF;
        IF message_count > 0 THEN
            -- A hit names its message by the ids it was indexed with; the row's uuid is the stable id,
            -- looked up hit by hit (a join was planned as a scan of the user's messages: 80 ms at
            -- 50,000, bench/tenants.py).
            answer := answer || coalesce((
                SELECT jsonb_agg(jsonb_build_object('id', 'message:' || (
                                     SELECT m.id FROM memory.messages m
                                     WHERE m.organization_id = org AND m.namespace_id = subject
                                       AND m.chat_id = h.chat_id AND m.message_id = h.id),
                                     'kind', 'message', 'content', h.content)
                                 ORDER BY h.ordinality)
                FROM memory.search_messages(org, query, query_embedding, opts ->> 'exclude_chat', message_count, search)
                     WITH ORDINALITY h), '[]');
        END IF;
        IF operation IS NOT NULL THEN
            -- The namespace row the replay hangs on (erasing its user erases the replay).
            PERFORM memory._resolve(org, CASE WHEN NOT who.service THEN '{}'
                                              WHEN owner IS NULL THEN '{"scope": "organization"}'
                                              ELSE jsonb_build_object('owner_id', owner) END, 'write');
            -- Expired replays are dropped where the next one is stored.
            DELETE FROM memory.recall_replays r
            WHERE r.organization_id = org AND r.namespace_id = subject AND r.created_at <= now() - kept;
            INSERT INTO memory.recall_replays AS r (organization_id, namespace_id, service, operation_id, answer)
            VALUES (org, subject, who.service, operation, answer)
            ON CONFLICT ON CONSTRAINT recall_replays_pkey DO NOTHING;
            IF NOT FOUND THEN  -- a concurrent call with this operation id stored its answer first
                SELECT r.answer INTO stored FROM memory.recall_replays r
                WHERE r.organization_id = org AND r.namespace_id = subject AND r.service = who.service
                  AND r.operation_id = operation;
                answer := coalesce(stored, answer);
            END IF;
        END IF;
    END IF;
    RETURN QUERY
    SELECT e.item ->> 'id', e.item ->> 'kind', e.item ->> 'content'
    FROM jsonb_array_elements(answer) WITH ORDINALITY e(item, n)
    ORDER BY e.n;
END
$$;
