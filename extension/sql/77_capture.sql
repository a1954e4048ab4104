-- Capture: the queue of chats whose new messages wait to be turned into
-- facts, built like the pending-embeddings pipeline. index_message marks a
-- chat pending; a worker leases it (pending_captures), asks a model and
-- either applies the answer or gives the lease back (fail_capture). All
-- service only.

-- A chat's messages after (after_at, after_id), all of them when that is
-- null, and up to (through_at, through_id) when that is given; oldest first,
-- at most up_to (null: all). Two branches rather than one OR, so that the
-- watermark bounds the scan of messages_chat_idx itself and a long chat's
-- captured history is never read again.
CREATE OR REPLACE FUNCTION memory._chat_messages(org uuid, namespace_id uuid, chat_id text,
                                                 after_at timestamptz, after_id uuid,
                                                 through_at timestamptz, through_id uuid, up_to int)
RETURNS TABLE (id uuid, message_id text, role text, content text, created_at timestamptz)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    (SELECT m.id, m.message_id, m.role, m.content, m.created_at FROM memory.messages m
     WHERE $4 IS NULL AND m.organization_id = $1 AND m.chat_id = $3 AND m.namespace_id = $2
       AND ($6 IS NULL OR (m.created_at, m.id) <= ($6, $7))
     ORDER BY m.created_at, m.id LIMIT $8)
    UNION ALL
    (SELECT m.id, m.message_id, m.role, m.content, m.created_at FROM memory.messages m
     WHERE m.organization_id = $1 AND m.chat_id = $3 AND m.namespace_id = $2
       AND (m.created_at, m.id) > ($4, $5)
       AND ($6 IS NULL OR (m.created_at, m.id) <= ($6, $7))
     ORDER BY m.created_at, m.id LIMIT $8)
$$;

-- A chat's messages as handed to a worker: [{id, role, content, created_at}], oldest first.
CREATE OR REPLACE FUNCTION memory._capture_messages(org uuid, namespace_id uuid, chat_id text,
                                                    after_at timestamptz, after_id uuid, up_to int)
RETURNS TABLE (messages jsonb, last_at timestamptz, last_id uuid)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    WITH batch AS (SELECT * FROM memory._chat_messages($1, $2, $3, $4, $5, NULL, NULL, $6))
    SELECT coalesce(jsonb_agg(jsonb_build_object('id', b.message_id, 'role', b.role, 'content', b.content,
                                                 'created_at', b.created_at) ORDER BY b.created_at, b.id), '[]'),
           (array_agg(b.created_at ORDER BY b.created_at DESC, b.id DESC))[1],
           (array_agg(b.id ORDER BY b.created_at DESC, b.id DESC))[1]
    FROM batch b
$$;

-- Up to 10 messages of the chat at or before the watermark, oldest first.
CREATE OR REPLACE FUNCTION memory._capture_context(org uuid, namespace_id uuid, chat_id text,
                                                   before_at timestamptz, before_id uuid)
RETURNS jsonb
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT coalesce(jsonb_agg(jsonb_build_object('id', b.message_id, 'role', b.role, 'content', b.content,
                                                 'created_at', b.created_at) ORDER BY b.created_at, b.id), '[]')
    FROM (SELECT m.message_id, m.role, m.content, m.created_at, m.id FROM memory.messages m
          WHERE $4 IS NOT NULL AND m.organization_id = $1 AND m.namespace_id = $2 AND m.chat_id = $3
            AND (m.created_at, m.id) <= ($4, $5)
          ORDER BY m.created_at DESC, m.id DESC
          LIMIT 10) b
$$;

-- How many messages of a chat are after its watermark.
CREATE OR REPLACE FUNCTION memory._capture_pending_count(c memory.captures) RETURNS int
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT count(*)::int
    FROM memory._chat_messages(c.organization_id, c.namespace_id, c.chat_id, c.watermark_at, c.watermark_id,
                               NULL, NULL, NULL)
$$;

-- Leases up to `max` chats that are pending capture and idle for setting
-- capture_idle_seconds, each for setting capture_lease_seconds, so that
-- concurrent workers never get the same chat (service only).
CREATE OR REPLACE FUNCTION memory.pending_captures(max int DEFAULT 10, max_messages int DEFAULT 50)
RETURNS TABLE (capture_id uuid, org uuid, owner_id uuid, chat_id text, messages jsonb, context jsonb)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    idle interval;
    lease interval;
    started timestamptz;
    idle_since timestamptz;
    c record;
    batch record;
BEGIN
    PERFORM memory._require_service();
    PERFORM memory._check_between('max', max, 1, 1000);
    PERFORM memory._check_between('max_messages', max_messages, 1, 1000);
    idle := make_interval(secs => memory._setting_int('capture_idle_seconds'));
    lease := make_interval(secs => memory._setting_int('capture_lease_seconds'));
    -- In variables, not clock_timestamp() in the query: a volatile bound is no index condition.
    started := clock_timestamp();
    idle_since := started - idle;
    FOR c IN
        SELECT k.organization_id, k.namespace_id, k.chat_id, k.owner_id, k.watermark_at, k.watermark_id
        FROM memory.captures k
        WHERE k.status = 'pending'
          AND (k.lease_until IS NULL OR k.lease_until < started)
          AND k.indexed_at <= idle_since
          AND EXISTS (SELECT FROM memory._chat_messages(k.organization_id, k.namespace_id, k.chat_id,
                                                        k.watermark_at, k.watermark_id, NULL, NULL, 1))
        ORDER BY k.indexed_at, k.organization_id, k.namespace_id, k.chat_id
        LIMIT max
        FOR UPDATE OF k SKIP LOCKED
    LOOP
        SELECT * INTO batch FROM memory._capture_messages(c.organization_id, c.namespace_id, c.chat_id,
                                                          c.watermark_at, c.watermark_id, max_messages);
        capture_id := gen_random_uuid();
        UPDATE memory.captures k
        SET capture_id = pending_captures.capture_id, lease_until = clock_timestamp() + lease,
            lease_through_at = batch.last_at, lease_through_id = batch.last_id
        WHERE k.organization_id = c.organization_id AND k.namespace_id = c.namespace_id AND k.chat_id = c.chat_id;
        org := c.organization_id;
        owner_id := c.owner_id;
        chat_id := c.chat_id;
        messages := batch.messages;
        context := memory._capture_context(c.organization_id, c.namespace_id, c.chat_id,
                                           c.watermark_at, c.watermark_id);
        RETURN NEXT;
    END LOOP;
END
$$;

-- Gives a lease back after a failed attempt and counts it (service only);
-- after setting capture_max_attempts the chat is parked until
-- retry_captures. False when the lease is no longer held.
CREATE OR REPLACE FUNCTION memory.fail_capture(capture_id uuid, error text) RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    max_attempts int;
    released int;
BEGIN
    PERFORM memory._require_service();
    IF capture_id IS NULL THEN
        PERFORM memory._fail('MEMORY_INVALID', 'a capture id is required');
    END IF;
    max_attempts := memory._setting_int('capture_max_attempts');
    UPDATE memory.captures k
    SET attempts = k.attempts + 1, last_error = left(coalesce(error, ''), 4000),
        status = CASE WHEN k.attempts + 1 >= max_attempts THEN 'failed' ELSE 'pending' END,
        capture_id = NULL, lease_until = NULL, lease_through_at = NULL, lease_through_id = NULL
    WHERE k.capture_id = fail_capture.capture_id;
    GET DIAGNOSTICS released = ROW_COUNT;
    RETURN released > 0;
END
$$;

-- Puts parked (failed) chats of an organization back in the queue, with
-- their attempts reset (service only); returns how many.
CREATE OR REPLACE FUNCTION memory.retry_captures(org uuid, chat_id text DEFAULT NULL) RETURNS int
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    retried int;
BEGIN
    PERFORM memory._require_service();
    IF org IS NULL THEN
        PERFORM memory._fail('MEMORY_INVALID', 'an organization id is required');
    END IF;
    UPDATE memory.captures k
    SET status = 'pending', attempts = 0, last_error = NULL
    WHERE k.organization_id = org AND k.status = 'failed'
      AND (retry_captures.chat_id IS NULL OR k.chat_id = retry_captures.chat_id);
    GET DIAGNOSTICS retried = ROW_COUNT;
    RETURN retried;
END
$$;

-- Where each chat of an organization stands in the queue (service only).
-- SQL, not PL/pgSQL: the argument chat_id and the result column chat_id share a name.
CREATE OR REPLACE FUNCTION memory.capture_status(org uuid, chat_id text DEFAULT NULL)
RETURNS TABLE (chat_id text, owner_id uuid, pending_messages int, attempts int, status text,
               last_error text, captured_at timestamptz)
LANGUAGE sql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT memory._require_service();
    SELECT memory._fail('MEMORY_INVALID', 'an organization id is required') WHERE $1 IS NULL;
    SELECT k.chat_id, k.owner_id, p.n, k.attempts,
           CASE WHEN k.status = 'failed' THEN 'failed'
                WHEN k.lease_until >= clock_timestamp() THEN 'leased'
                WHEN p.n > 0 THEN 'pending'
                ELSE 'captured' END,
           k.last_error, k.captured_at
    FROM memory.captures k
    CROSS JOIN LATERAL (SELECT memory._capture_pending_count(k) AS n) p
    WHERE k.organization_id = $1 AND ($2 IS NULL OR k.chat_id = $2)
    ORDER BY k.chat_id, k.owner_id;
$$;

-- Luhn's check of a string of digits (card numbers).
CREATE OR REPLACE FUNCTION memory._luhn(digits text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT sum(CASE WHEN x.i % 2 = 0 THEN (CASE WHEN x.d * 2 > 9 THEN x.d * 2 - 9 ELSE x.d * 2 END)
                    ELSE x.d END) % 10 = 0
    FROM (SELECT substr(reverse($1), i, 1)::int AS d, i FROM generate_series(1, length($1)) i) x
$$;

-- Whether a text looks like it holds a secret. docs/sql-reference.md lists
-- the patterns; tests/sql/test_capture_attacks.py holds the secrets and the
-- look-alikes they must tell apart. A few long alternations, not one regular
-- expression per provider: PostgreSQL caches only 32 compiled ones per
-- session. Each is guarded by a test that costs a few µs, as the alternation
-- itself costs ~50 µs a call and most facts hold no secret.
CREATE OR REPLACE FUNCTION memory._looks_secret(content text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    -- keys and tokens by their providers' prefixes: each holds a run of 15 key
    -- characters, but for PEM blocks and JWTs
    SELECT (($1 ~ '[A-Za-z0-9_-]{15}' OR strpos($1, '-----BEGIN') > 0 OR strpos($1, '.eyJ') > 0)
            AND $1 ~ ('-----BEGIN [A-Z0-9 ]*PRIVATE KEY'                          -- PEM, OpenSSH, PGP
                      '|eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}'  -- JWT
                      '|\msk-[A-Za-z0-9_-]{20,}'                                  -- OpenAI, Anthropic
                      '|\m(AKIA|ASIA)[0-9A-Z]{16}\M'                              -- AWS access key id
                      '|\mgh[pousr]_[A-Za-z0-9]{36,}|\mgithub_pat_[A-Za-z0-9_]{22,}'  -- GitHub
                      '|\mglpat-[A-Za-z0-9_-]{20,}'                               -- GitLab
                      '|\mxox[abeprs]-[A-Za-z0-9-]{10,}'                          -- Slack
                      '|\mAIza[0-9A-Za-z_-]{35}|\mya29\.[0-9A-Za-z_-]{20,}'       -- Google
                      '|\m[spr]k_(live|test)_[A-Za-z0-9]{16,}'                    -- Stripe
                      '|\m(AC|SK)[0-9a-f]{32}\M'                                  -- Twilio
                      '|\mSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}'             -- SendGrid
                      '|\mnpm_[A-Za-z0-9]{36}\M|\mpypi-[A-Za-z0-9_-]{50,}'        -- npm, PyPI
                      '|\mhf_[A-Za-z0-9]{30,}'                                    -- Hugging Face
                      '|\mdo[opr]_v1_[a-f0-9]{64}\M'))                            -- DigitalOcean
        -- a password, PIN or key written out; credentials in a URL; a bearer token
        OR ($1 ~* 'pass|pwd|pin|key|secret|token|://|bearer'
            AND $1 ~* ('\m(password|passwd|passphrase|pwd)\s*[:=]\s*\S'
                       -- "password is X", unless X says something about it ("is stored in …")
                       '|\m(password|passwd|passphrase|passcode)\s+(is|was)\s+(?!(the|a|an|too|very|not|still'
                       '|now|being|weak|strong|long|short|expired|saved|stored|kept|in|on|at|for|set|same'
                       '|different|changed|reset|required|wrong|incorrect|correct|secure|insecure|easy|hard'
                       '|hidden|managed|written|encrypted|hashed|unknown|forgotten|lost)\M)\S{4,}'
                       '|\mpin( code| number)?\s*(is|was|[:=])\s*[0-9]{4,8}\M'
                       '|\m(api[_ -]?key|apikey|secret[_ -]?key|client[_ -]?secret'
                       '|(access|auth|api|refresh)[_ -]?token)\s*(is|[:=])\s*["'']?[A-Za-z0-9_./+=-]{16,}'
                       '|\m[a-z][a-z0-9+.-]*://[^/\s:@]*:[^/\s@]+@'
                       '|\mbearer\s+[A-Za-z0-9._~+/-]{20,}'))
        -- an AWS secret access key: 40 characters of both cases and digits, said to be one
        OR ($1 ~* 'aws|secret'
            AND $1 ~ ('(?<![A-Za-z0-9/+])(?=[A-Za-z0-9/+]{0,39}[a-z])(?=[A-Za-z0-9/+]{0,39}[A-Z])'
                      '(?=[A-Za-z0-9/+]{0,39}[0-9])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])'))
        -- a card number: one run of digits, or groups (4-4-4-…, Amex 4-6-5) by spaces or
        -- by dashes that are not part of a longer grouped number; of a brand's prefix and
        -- length; passing Luhn's check
        OR ($1 ~ '[0-9]{13}|[0-9]{4}[ -][0-9]{4}' AND EXISTS (
            SELECT FROM regexp_matches($1, '((?<![0-9])[0-9]{13,19}(?![0-9])'
                                           '|(?<![0-9])(?<![0-9] )(?:[0-9]{4} [0-9]{4} [0-9]{4} [0-9]{1,7}'
                                           '|[0-9]{4} [0-9]{6} [0-9]{4,5})(?![0-9])(?! [0-9])'
                                           '|(?<![0-9])(?<![0-9]-)(?:[0-9]{4}-[0-9]{4}-[0-9]{4}-[0-9]{1,7}'
                                           '|[0-9]{4}-[0-9]{6}-[0-9]{4,5})(?![0-9])(?!-[0-9]))', 'g') m(found)
            CROSS JOIN LATERAL (SELECT translate(m.found[1], ' -', '') AS digits) d
            WHERE d.digits ~ ('^(4([0-9]{12}|[0-9]{15}|[0-9]{18})|(5[1-5]|2[2-7])[0-9]{14}|3[47][0-9]{13}'
                              '|3[0689][0-9]{12,17}|35[0-9]{14,17}|6[0-9]{15,18})$')
              AND memory._luhn(d.digits)))
$$;

-- Applies a model's decisions on a leased capture in one transaction and
-- moves the chat's watermark past the leased messages (service only).
CREATE OR REPLACE FUNCTION memory.capture_facts(capture_id uuid, operations jsonb, model text DEFAULT NULL,
                                      embeddings real[] DEFAULT NULL)
RETURNS TABLE (ord int, op text, id uuid, fact_id uuid, status text)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c memory.captures;
    target memory.namespaces;
    refuse boolean;
    item record;
    vecs @extschema:vector@.vector[] := '{}';  -- by ordinal: parsed once
    row_of int[] := '{}';                       -- by ordinal: an add's or supersede's row of `embeddings`
    new_facts int := 0;
    given @extschema:vector@.vector[];
    secret boolean[] := '{}';                   -- by ordinal: an add or supersede not to store
    kind text;
    source jsonb;
    old_id uuid;
    adds jsonb := '[]';        -- the run of adds to save, as save_facts takes them
    add_rows real[];           -- with `embeddings`: the run's rows of it
    run_ords int[] := '{}';    -- the run's operations, and where each is in adds (0: a secret)
    run_at int[] := '{}';
    saved_ids uuid[];
    duplicate_ids uuid[];
BEGIN
    PERFORM memory._require_service();
    IF capture_id IS NULL THEN
        PERFORM memory._fail('MEMORY_INVALID', 'a capture id is required');
    END IF;
    SELECT k.* INTO c FROM memory.captures k WHERE k.capture_id = capture_facts.capture_id FOR UPDATE;
    IF c.capture_id IS NULL OR c.lease_until < clock_timestamp() THEN
        PERFORM memory._fail('MEMORY_CONFLICT',
            format('capture %s holds no lease: it was lost or already applied', capture_id));
    END IF;
    IF jsonb_typeof(operations) IS DISTINCT FROM 'array' OR jsonb_array_length(operations) > 1000 THEN
        PERFORM memory._fail('MEMORY_INVALID', 'operations must be a JSON array of at most 1000 operations');
    END IF;
    refuse := (memory.setting('capture_refuse_secrets'))::boolean;
    -- Validate every operation before applying any.
    FOR item IN SELECT o.value AS o, o.n::int AS n FROM jsonb_array_elements(operations) WITH ORDINALITY o(value, n) LOOP
        IF jsonb_typeof(item.o) <> 'object' OR item.o ->> 'op' IS NULL
           OR item.o ->> 'op' NOT IN ('add', 'supersede', 'forget') THEN
            PERFORM memory._fail('MEMORY_INVALID',
                format('operation %s must be an object with "op" add, supersede or forget', item.n));
        END IF;
        IF item.o ->> 'op' IN ('add', 'supersede') THEN
            IF jsonb_typeof(item.o -> 'content') IS DISTINCT FROM 'string' THEN
                PERFORM memory._fail('MEMORY_INVALID', format('operation %s needs a "content" string', item.n));
            END IF;
            PERFORM memory._check_fact_text(item.o ->> 'content');
            secret[item.n] := refuse AND memory._looks_secret(item.o ->> 'content');
            new_facts := new_facts + 1;
            row_of[item.n] := new_facts;
            IF embeddings IS NOT NULL AND item.o ? 'embedding' THEN
                PERFORM memory._fail('MEMORY_INVALID',
                    format('operation %s must not carry an "embedding" when embeddings are given', item.n));
            END IF;
            -- save_facts parses (and checks) the embedding of an add it saves, once.
            IF item.o -> 'embedding' <> 'null'::jsonb AND (item.o ->> 'op' = 'supersede' OR secret[item.n]) THEN
                vecs[item.n] := memory._embedding_json(item.o -> 'embedding');
            END IF;
        END IF;
        IF item.o ->> 'op' IN ('supersede', 'forget')
           AND (jsonb_typeof(item.o -> 'fact_id') IS DISTINCT FROM 'string' OR NOT memory._is_uuid(item.o ->> 'fact_id')) THEN
            PERFORM memory._fail('MEMORY_INVALID', format('operation %s needs a "fact_id" uuid', item.n));
        END IF;
    END LOOP;
    IF embeddings IS NOT NULL THEN  -- checked whole; each row goes with its operation
        given := memory._embedding_rows(embeddings, new_facts, 'new fact', 'new facts');
        FOR i IN 1 .. jsonb_array_length(operations) LOOP
            IF row_of[i] IS NOT NULL THEN
                vecs[i] := given[row_of[i]];
            END IF;
        END LOOP;
    END IF;
    SELECT n.* INTO target FROM memory.namespaces n
    WHERE n.organization_id = c.organization_id AND n.id = c.namespace_id;
    source := jsonb_build_object(
        'chat_id', c.chat_id,
        'message_ids', CASE WHEN c.lease_through_at IS NULL THEN '[]'::jsonb ELSE coalesce((
                           SELECT jsonb_agg(m.message_id ORDER BY m.created_at, m.id)
                           FROM memory._chat_messages(c.organization_id, c.namespace_id, c.chat_id,
                                                      c.watermark_at, c.watermark_id,
                                                      c.lease_through_at, c.lease_through_id, NULL) m), '[]') END,
        'capture_id', c.capture_id,
        'model', model);
    PERFORM memory._check_source(source);
    PERFORM memory._lock_namespace(target, 'facts');
    -- A run of consecutive adds is saved by one save_facts call, as one batch
    -- (its dedupe check reads the namespace once, not once per fact); any
    -- other operation, and the null appended as the end, closes the run first,
    -- so every operation sees the ones before it applied.
    FOR item IN SELECT o.value AS o, o.n::int AS n
                FROM jsonb_array_elements(operations || 'null'::jsonb) WITH ORDINALITY o(value, n) LOOP
        kind := item.o ->> 'op';
        IF kind = 'add' THEN
            run_ords := run_ords || item.n;
            IF secret[item.n] THEN
                run_at := run_at || 0;  -- not saved
            ELSIF embeddings IS NOT NULL THEN
                adds := adds || jsonb_build_object('content', item.o ->> 'content', 'source', source);
                add_rows := add_rows || embeddings[row_of[item.n]:row_of[item.n]];
                run_at := run_at || jsonb_array_length(adds);
            ELSE
                adds := adds || jsonb_build_object('content', item.o ->> 'content', 'embedding', item.o -> 'embedding',
                                                   'source', source);
                run_at := run_at || jsonb_array_length(adds);
            END IF;
            CONTINUE;
        END IF;
        IF cardinality(run_ords) > 0 THEN
            IF jsonb_array_length(adds) > 0 THEN
                SELECT array_agg(s.id ORDER BY s.ord), array_agg(s.duplicate_of ORDER BY s.ord)
                INTO saved_ids, duplicate_ids
                FROM memory.save_facts(c.organization_id, adds, jsonb_build_object('owner_id', c.owner_id),
                                       embeddings => add_rows) s;
            END IF;
            FOR i IN 1 .. cardinality(run_ords) LOOP
                ord := run_ords[i];
                op := 'add';
                id := CASE WHEN run_at[i] > 0 THEN saved_ids[run_at[i]] END;
                fact_id := CASE WHEN run_at[i] > 0 THEN duplicate_ids[run_at[i]] END;
                status := CASE WHEN run_at[i] = 0 THEN 'secret' WHEN id IS NULL THEN 'duplicate' ELSE 'saved' END;
                RETURN NEXT;
            END LOOP;
            run_ords := '{}'; run_at := '{}'; adds := '[]'; add_rows := NULL;
        END IF;
        EXIT WHEN kind IS NULL;
        ord := item.n;
        op := kind;
        id := NULL;
        fact_id := (item.o ->> 'fact_id')::uuid;
        SELECT f.id INTO old_id FROM memory.facts f
        WHERE f.organization_id = c.organization_id AND f.id = capture_facts.fact_id
          AND f.namespace_id = c.namespace_id AND f.forgotten_at IS NULL
        FOR UPDATE;
        IF old_id IS NULL THEN
            status := 'unknown_fact';
        ELSIF kind = 'supersede' AND secret[item.n] THEN
            status := 'secret';
        ELSIF kind = 'supersede' THEN
            id := memory._insert_fact(target, item.o ->> 'content', vecs[item.n], source, NULL);
            UPDATE memory.facts f
            SET forgotten_at = now(), superseded_by = capture_facts.id, lease_until = NULL, updated_at = now()
            WHERE f.organization_id = c.organization_id AND f.id = old_id;
            status := 'superseded';
        ELSE
            UPDATE memory.facts f
            SET forgotten_at = now(), lease_until = NULL, updated_at = now()
            WHERE f.organization_id = c.organization_id AND f.id = old_id;
            status := 'forgotten';
        END IF;
        RETURN NEXT;
    END LOOP;
    -- A chat with nothing after its new watermark leaves pending_captures' scan
    -- (by indexed_at, up to now) until index_message sets indexed_at again:
    -- otherwise every poll would visit every chat ever captured. Messages
    -- indexed meanwhile are seen here, or wait on this row's lock to set it.
    UPDATE memory.captures k
    SET watermark_at = coalesce(c.lease_through_at, k.watermark_at),
        watermark_id = coalesce(c.lease_through_id, k.watermark_id),
        indexed_at = CASE WHEN c.lease_through_at IS NULL OR EXISTS (
                              SELECT FROM memory._chat_messages(c.organization_id, c.namespace_id, c.chat_id,
                                                                c.lease_through_at, c.lease_through_id, NULL, NULL, 1))
                          THEN k.indexed_at ELSE 'infinity' END,
        captured_at = now(), attempts = 0, last_error = NULL,
        capture_id = NULL, lease_until = NULL, lease_through_at = NULL, lease_through_id = NULL
    WHERE k.organization_id = c.organization_id AND k.namespace_id = c.namespace_id AND k.chat_id = c.chat_id;
END
$$;
