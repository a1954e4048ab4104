-- memory--0.1.0.sql: generated from extension/ (state/, sql/, upgrades/); edit the parts, not this file
\echo Use "CREATE EXTENSION memory" to load this file. \quit

-- ---- state/00_tables.sql
-- Tables. Every primary key and unique constraint contains its table's
-- distribution column (organization_id; documents: scope_hash) and no foreign
-- key crosses organizations, so the same schema distributes on Citus
-- (docs/scale-out.md; tests/sql/test_catalog.py checks it).
-- Users never touch tables: no grants, and row-level security with no
-- policy as a second wall (functions run as the table owner, who bypasses it).

-- A namespace: the user (default), an agent/chat/project of that user, or
-- the organization itself. Its id is derived from its key (see
-- memory._namespace_id), so readers never need to look it up or create it.
CREATE TABLE memory.namespaces (
    organization_id uuid NOT NULL,
    id uuid NOT NULL,
    scope text NOT NULL CHECK (scope IN ('user', 'agent', 'chat', 'project', 'organization')),
    owner_id uuid,
    scope_id text,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (organization_id, id),
    CHECK ((scope = 'organization') = (owner_id IS NULL)),
    CHECK ((scope IN ('agent', 'chat', 'project')) = (scope_id IS NOT NULL))
);
CREATE INDEX namespaces_owner_idx ON memory.namespaces (organization_id, owner_id);

-- Core memory: one row per file; directories exist while a file lies below.
CREATE TABLE memory.files (
    organization_id uuid NOT NULL,
    namespace_id uuid NOT NULL,
    path text COLLATE "C" NOT NULL,
    content text NOT NULL,
    version bigint NOT NULL DEFAULT 1 CHECK (version > 0),
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (organization_id, namespace_id, path),
    FOREIGN KEY (organization_id, namespace_id)
        REFERENCES memory.namespaces (organization_id, id) ON DELETE CASCADE
);

-- Permissions granted with memory.grant (the default permission_check).
CREATE TABLE memory.permissions (
    organization_id uuid NOT NULL,
    user_id uuid NOT NULL,
    permission text NOT NULL CHECK (permission <> '' AND octet_length(permission) <= 256),
    granted_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (organization_id, user_id, permission)
);

-- Settings that differ from their defaults (memory._setting_defaults).
CREATE TABLE memory.settings (
    key text PRIMARY KEY,
    value jsonb NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

ALTER TABLE memory.namespaces ENABLE ROW LEVEL SECURITY;
ALTER TABLE memory.files ENABLE ROW LEVEL SECURITY;
ALTER TABLE memory.permissions ENABLE ROW LEVEL SECURITY;
ALTER TABLE memory.settings ENABLE ROW LEVEL SECURITY;

-- pg_dump keeps the rows of extension tables only when they are registered.
SELECT pg_catalog.pg_extension_config_dump('memory.namespaces', '');
SELECT pg_catalog.pg_extension_config_dump('memory.files', '');
SELECT pg_catalog.pg_extension_config_dump('memory.permissions', '');
SELECT pg_catalog.pg_extension_config_dump('memory.settings', '');

-- Values derived from a memory's content are computed in one place each, never
-- by its writers: the hash and the dedupe key are generated columns, the
-- tsvector is set by a trigger (it follows setting text_search_config, so it
-- cannot be a generated column); see memory._derive_search_text.

-- The dedupe key of a text: trimmed, whitespace collapsed, lower-cased, hashed.
CREATE FUNCTION memory._normalized_key(content text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT md5(lower(regexp_replace(btrim(content), '\s+', ' ', 'g'))) $$;

-- Archival memory: facts with an embedding (null = pending) and a tsvector.
-- The embedding column's type and dimension follow memory.configure_embeddings.
CREATE TABLE memory.facts (
    organization_id uuid NOT NULL,
    id uuid NOT NULL DEFAULT gen_random_uuid(),
    namespace_id uuid NOT NULL,
    content text NOT NULL CHECK (content <> ''),
    -- set_memory_embeddings writes a vector only while the hash still matches
    content_hash text NOT NULL GENERATED ALWAYS AS (md5(content)) STORED,
    -- dedupe without embeddings
    text_key text NOT NULL GENERATED ALWAYS AS (memory._normalized_key(content)) STORED,
    search_text tsvector NOT NULL,  -- memory._derive_search_text
    embedding @extschema:vector@.vector(1536),
    embedding_model text,
    lease_until timestamptz,      -- pending_embeddings hands a row to one worker at a time
    version bigint NOT NULL DEFAULT 1 CHECK (version > 0),
    source jsonb,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    forgotten_at timestamptz,
    superseded_by uuid,
    PRIMARY KEY (organization_id, id),
    FOREIGN KEY (organization_id, namespace_id)
        REFERENCES memory.namespaces (organization_id, id) ON DELETE CASCADE
);
CREATE INDEX facts_live_idx ON memory.facts (organization_id, namespace_id, text_key)
    WHERE forgotten_at IS NULL;
-- Not unique: ids are unique per organization (the primary key), so an export
-- imports into another organization as it is. This one serves the embedding
-- pipeline, which is handed ids across organizations.
CREATE INDEX facts_id_idx ON memory.facts (id);
CREATE INDEX facts_embedding_idx ON memory.facts
    USING hnsw (embedding @extschema:vector@.vector_cosine_ops) WHERE forgotten_at IS NULL;
-- The namespace is a key of the text index (an array, since GIN has no uuid opclass
-- without btree_gin): a search reads only its namespaces' postings (bench/search.py).
CREATE INDEX facts_search_idx ON memory.facts USING gin ((ARRAY[namespace_id]), search_text)
    WHERE forgotten_at IS NULL;
CREATE INDEX facts_pending_idx ON memory.facts (created_at)
    WHERE embedding IS NULL AND forgotten_at IS NULL;
ALTER TABLE memory.facts ENABLE ROW LEVEL SECURITY;
SELECT pg_catalog.pg_extension_config_dump('memory.facts', '');

-- Recall: one row per indexed chat message, in its owner's user namespace.
-- Same embedding and search columns as facts: one pending pipeline and one
-- ranking serve both.
CREATE TABLE memory.messages (
    organization_id uuid NOT NULL,
    id uuid NOT NULL DEFAULT gen_random_uuid(),
    namespace_id uuid NOT NULL,
    chat_id text NOT NULL CHECK (chat_id <> '' AND octet_length(chat_id) <= 1024),
    message_id text NOT NULL CHECK (message_id <> '' AND octet_length(message_id) <= 1024),
    role text NOT NULL CHECK (role <> '' AND octet_length(role) <= 64),
    content text NOT NULL,
    content_hash text NOT NULL GENERATED ALWAYS AS (md5(content)) STORED,
    search_text tsvector NOT NULL,  -- memory._derive_search_text
    embedding @extschema:vector@.vector(1536),
    embedding_model text,
    lease_until timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(),
    indexed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (organization_id, id),
    -- A message is its owner's: the same chat and message ids under another
    -- owner are another row, so no one's messages can block or shadow another's.
    CONSTRAINT messages_message_key UNIQUE (organization_id, namespace_id, chat_id, message_id),
    FOREIGN KEY (organization_id, namespace_id)
        REFERENCES memory.namespaces (organization_id, id) ON DELETE CASCADE
);
CREATE INDEX messages_chat_idx ON memory.messages (organization_id, chat_id);  -- the service's delete_chat
CREATE INDEX messages_id_idx ON memory.messages (id);  -- as facts_id_idx
CREATE INDEX messages_embedding_idx ON memory.messages
    USING hnsw (embedding @extschema:vector@.vector_cosine_ops);
CREATE INDEX messages_search_idx ON memory.messages USING gin ((ARRAY[namespace_id]), search_text);
CREATE INDEX messages_pending_idx ON memory.messages (created_at) WHERE embedding IS NULL;
ALTER TABLE memory.messages ENABLE ROW LEVEL SECURITY;
SELECT pg_catalog.pg_extension_config_dump('memory.messages', '');

-- Documents for agent runtimes (service only): opaque scope keys and paths,
-- keyed by their digests because a btree entry cannot hold 4 KB keys.
CREATE TABLE memory.documents (
    scope_hash bytea NOT NULL,
    path_hash bytea NOT NULL,
    scope_key text NOT NULL CHECK (scope_key <> '' AND octet_length(scope_key) <= 8192),
    path text NOT NULL CHECK (path <> '' AND octet_length(path) <= 4096),
    content text NOT NULL,
    version bigint NOT NULL DEFAULT 1 CHECK (version > 0),
    expires_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scope_hash, path_hash)
);
CREATE INDEX documents_expiry_idx ON memory.documents (expires_at) WHERE expires_at IS NOT NULL;
ALTER TABLE memory.documents ENABLE ROW LEVEL SECURITY;
SELECT pg_catalog.pg_extension_config_dump('memory.documents', '');

-- ---- state/10_types.sql
-- The row types the functions return or pass around. State, like the
-- tables: created once by a fresh install; an upgrade step changes them.

CREATE TYPE memory.caller AS (user_id uuid, service boolean);

-- A row type rather than RETURNS TABLE: its column `ns` may share the name
-- of the input argument `ns`.
CREATE TYPE memory.fact_hit AS (id uuid, content text, score float8, similarity float8, text_rank float4,
                                ns jsonb, created_at timestamptz);

CREATE TYPE memory.message_hit AS (id text, chat_id text, role text, content text, score float8,
                                   similarity float8, created_at timestamptz);

-- ---- sql/10_errors.sql
-- Errors in one place: every failure carries a stable HINT code
-- and the SQLSTATE that goes with it; the message is for humans (and, for
-- memory.run, exactly the text the model sees).

CREATE OR REPLACE FUNCTION memory._sqlstate(code text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE code
        WHEN 'MEMORY_NOT_FOUND' THEN 'P0002'
        WHEN 'MEMORY_NO_MATCH' THEN '22023'
        WHEN 'MEMORY_AMBIGUOUS' THEN '22023'
        WHEN 'MEMORY_EXISTS' THEN '23505'
        WHEN 'MEMORY_CONFLICT' THEN '40001'
        WHEN 'MEMORY_DOCUMENT_CONFLICT' THEN '40001'
        WHEN 'MEMORY_INVALID_PATH' THEN '22023'
        WHEN 'MEMORY_INVALID' THEN '22023'
        WHEN 'MEMORY_TOO_LARGE' THEN '54000'
        WHEN 'MEMORY_FORBIDDEN' THEN '42501'
        WHEN 'EMBEDDING_INVALID' THEN '22023'
    END
$$;

-- An ISO 8601 timestamp given by a caller (not 'yesterday', 'now' or
-- 'infinity', which timestamptz would take); null stays null.
CREATE OR REPLACE FUNCTION memory._timestamp(value jsonb, what text) RETURNS timestamptz
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF value IS NULL OR value = 'null'::jsonb THEN
        RETURN NULL;
    END IF;
    IF jsonb_typeof(value) <> 'string'
       OR value ->> 0 !~ '^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?(Z|[+-]\d{2}(:?\d{2})?)?$' THEN
        PERFORM memory._fail('MEMORY_INVALID', format('%s must be a timestamp', what));
    END IF;
    RETURN (value ->> 0)::timestamptz;
EXCEPTION WHEN invalid_datetime_format OR datetime_field_overflow THEN
    PERFORM memory._fail('MEMORY_INVALID', format('%s must be a timestamp', what));
END
$$;

-- A JSON number without a fraction (1.0 counts), within [low, high] when given.
CREATE OR REPLACE FUNCTION memory._is_integer(value jsonb, low numeric DEFAULT NULL, high numeric DEFAULT NULL)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE WHEN jsonb_typeof(value) = 'number' THEN
        value::numeric = trunc(value::numeric)
        AND value::numeric >= coalesce(low, value::numeric) AND value::numeric <= coalesce(high, value::numeric)
    ELSE false END
$$;

CREATE OR REPLACE FUNCTION memory._fail(code text, message text) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION USING
        MESSAGE = message,
        HINT = code,
        ERRCODE = coalesce(memory._sqlstate(code), 'XX000');
END
$$;

-- ---- sql/20_settings.sql
-- Settings: defaults live in code, changes in memory.settings.

CREATE OR REPLACE FUNCTION memory._setting_defaults() RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT jsonb_build_object(
        'max_content', 100000,
        'max_render', 8000,
        'view_max_chars', 16000,
        'dedupe_threshold', 0.92,
        'exact_search_max_rows', 2000,
        'text_search_config', 'english',
        'service_role', 'memory_service',
        'service_claim', 'service_role',
        'permissions.read', 'memory.read',
        'permissions.manage', 'memory.manage',
        'permission_check', 'memory.has_permission(uuid,uuid,text)'
    )
$$;

-- The current value of a setting; unknown keys are refused.
CREATE OR REPLACE FUNCTION memory.setting(key text) RETURNS jsonb
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    value jsonb;
BEGIN
    IF key IS NULL OR NOT memory._setting_defaults() ? key THEN
        PERFORM memory._fail('MEMORY_INVALID', format('unknown setting %L', key));
    END IF;
    SELECT s.value INTO value FROM memory.settings s WHERE s.key = setting.key;
    RETURN coalesce(value, memory._setting_defaults() -> key);
END
$$;

CREATE OR REPLACE FUNCTION memory._setting_int(key text) RETURNS integer
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT (memory.setting(key))::integer $$;

CREATE OR REPLACE FUNCTION memory._setting_text(key text) RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT memory.setting(key) ->> 0 $$;

CREATE OR REPLACE FUNCTION memory._is_regconfig(name text) RETURNS boolean
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM name::regconfig;
    RETURN true;
EXCEPTION WHEN undefined_object OR invalid_name OR invalid_schema_name OR syntax_error THEN
    RETURN false;
END
$$;

-- Checks one value against its key's rules; returns the value to store.
CREATE OR REPLACE FUNCTION memory._validate_setting(key text, value jsonb) RETURNS jsonb
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    fn regprocedure;
    problem text;
    config regconfig;
BEGIN
    CASE
    WHEN key IN ('max_content', 'max_render', 'view_max_chars') THEN
        IF NOT memory._is_integer(value, 100, 100000000) THEN
            PERFORM memory._fail('MEMORY_INVALID',
                format('setting %s must be an integer between 100 and 100000000', key));
        END IF;
    WHEN key = 'exact_search_max_rows' THEN
        IF NOT memory._is_integer(value, 0, 100000000) THEN
            PERFORM memory._fail('MEMORY_INVALID',
                'setting exact_search_max_rows must be an integer between 0 and 100000000');
        END IF;
    WHEN key = 'dedupe_threshold' THEN
        IF jsonb_typeof(value) <> 'number' OR value::numeric <= 0 OR value::numeric > 1 THEN
            PERFORM memory._fail('MEMORY_INVALID',
                'setting dedupe_threshold must be a number in (0, 1]');
        END IF;
    WHEN key = 'text_search_config' THEN
        IF jsonb_typeof(value) <> 'string' OR NOT memory._is_regconfig(value ->> 0) THEN
            PERFORM memory._fail('MEMORY_INVALID',
                format('setting text_search_config must name a text search configuration, got %s', value));
        END IF;
        config := (value ->> 0)::regconfig;
        -- A temporary schema's name would later resolve in every caller's own temporary schema.
        IF EXISTS (SELECT FROM pg_ts_config c
                   WHERE c.oid = config AND (c.cfgnamespace = pg_my_temp_schema() OR pg_is_other_temp_schema(c.cfgnamespace))) THEN
            PERFORM memory._fail('MEMORY_INVALID',
                'setting text_search_config may not name a configuration in a temporary schema');
        END IF;
        RETURN to_jsonb(config::text);  -- qualified unless it is pg_catalog's, so no other schema can shadow it
    WHEN key IN ('service_role', 'service_claim', 'permissions.read', 'permissions.manage') THEN
        IF jsonb_typeof(value) <> 'string' OR value ->> 0 = '' OR octet_length(value ->> 0) > 256 THEN
            PERFORM memory._fail('MEMORY_INVALID',
                format('setting %s must be a non-empty string', key));
        END IF;
    WHEN key = 'permission_check' THEN
        IF jsonb_typeof(value) = 'string' THEN
            -- Accept "schema.fn" or "schema.fn(uuid,uuid,text)"; store the canonical signature.
            fn := to_regprocedure(CASE WHEN value ->> 0 LIKE '%(%' THEN value ->> 0
                                       ELSE (value ->> 0) || '(uuid,uuid,text)' END);
        END IF;
        problem := memory._plugin_problem(fn);
        IF fn IS NULL OR problem = 'it is not a function (uuid, uuid, text) returning boolean' THEN
            PERFORM memory._fail('MEMORY_INVALID',
                format('setting permission_check must name a function (uuid, uuid, text) returning boolean, got %s', value));
        END IF;
        IF problem IS NOT NULL AND fn <> 'memory.has_permission(uuid,uuid,text)'::regprocedure THEN
            PERFORM memory._fail('MEMORY_INVALID', format('setting permission_check may not be %s: %s', fn, problem));
        END IF;
        RETURN to_jsonb(fn::text);
    ELSE
        PERFORM memory._fail('MEMORY_INVALID', format('unknown setting %L', key));
    END CASE;
    RETURN value;
END
$$;

-- Changes a setting (service only); a null value restores the default.
CREATE OR REPLACE FUNCTION memory.configure(key text, value jsonb) RETURNS jsonb
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM memory._require_service();
    IF key IS NULL OR NOT memory._setting_defaults() ? key THEN
        PERFORM memory._fail('MEMORY_INVALID', format('unknown setting %L', key));
    END IF;
    IF value IS NULL OR value = 'null'::jsonb THEN
        DELETE FROM memory.settings s WHERE s.key = configure.key;
        value := memory._setting_defaults() -> key;
    ELSE
        value := memory._validate_setting(key, value);
        INSERT INTO memory.settings AS s (key, value) VALUES (configure.key, configure.value)
        ON CONFLICT ON CONSTRAINT settings_pkey
        DO UPDATE SET value = excluded.value, updated_at = now();
    END IF;
    IF key = 'text_search_config' THEN
        PERFORM memory._rederive_search_text();
    ELSIF key = 'permission_check' THEN
        PERFORM memory._bind_permission_check((value ->> 0)::regprocedure);
    END IF;
    RETURN value;
END
$$;

-- ---- sql/30_access.sql
-- Identity and access. The only place that reads the caller's
-- claims, decides who is the service, resolves namespaces and checks
-- permissions; every public function starts with one of these helpers.

-- Is the login role trusted as the service? Claims never decide this alone.
CREATE OR REPLACE FUNCTION memory._service_login() RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT coalesce((SELECT r.rolsuper FROM pg_roles r WHERE r.rolname = session_user), false)
        OR coalesce((SELECT pg_has_role(session_user, r.oid, 'MEMBER')
                     FROM pg_roles r WHERE r.rolname = memory._setting_text('service_role')), false)
$$;

-- Why this login is not the service, and how to make it one (a login that
-- sends no claims is most often a misconfigured application).
CREATE OR REPLACE FUNCTION memory._not_the_service() RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT format('this login is not the service: not a superuser nor a member of role %s'
                  '%s (GRANT %s TO %s makes it one; a user''s call sets request.jwt.claims)',
                  role, CASE WHEN NOT EXISTS (SELECT FROM pg_roles r WHERE r.rolname = role)
                             THEN ', which does not exist yet' ELSE '' END,
                  quote_ident(role), quote_ident(session_user))
    FROM (SELECT memory._setting_text('service_role') AS role) s
$$;

-- The caller's claims as a JSON object; anything else is MEMORY_FORBIDDEN
-- with what is wrong, never a raw parse error.
CREATE OR REPLACE FUNCTION memory._claims(raw text) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    claims jsonb;
BEGIN
    BEGIN
        claims := raw::jsonb;
    EXCEPTION
        WHEN data_exception THEN  -- bad syntax, \u0000 and other escapes jsonb cannot hold
            PERFORM memory._fail('MEMORY_FORBIDDEN',
                format('not authenticated: request.jwt.claims is not valid JSON: %s', SQLERRM));
        WHEN statement_too_complex OR program_limit_exceeded THEN
            PERFORM memory._fail('MEMORY_FORBIDDEN',
                'not authenticated: request.jwt.claims is nested too deeply to be claims');
    END;
    IF jsonb_typeof(claims) <> 'object' THEN
        PERFORM memory._fail('MEMORY_FORBIDDEN', 'not authenticated: request.jwt.claims is not a JSON object');
    END IF;
    RETURN claims;
END
$$;

-- Who is calling: a user (claims with a uuid `sub`) or the service.
CREATE OR REPLACE FUNCTION memory._caller() RETURNS memory.caller
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    raw text := nullif(current_setting('request.jwt.claims', true), '');
    claims jsonb;
BEGIN
    IF raw IS NULL THEN
        IF memory._service_login() THEN
            RETURN ROW(NULL, true)::memory.caller;
        END IF;
        PERFORM memory._fail('MEMORY_FORBIDDEN', memory._not_the_service());
    END IF;
    claims := memory._claims(raw);
    IF claims ->> 'role' = memory._setting_text('service_claim') THEN
        IF memory._service_login() THEN
            RETURN ROW(NULL, true)::memory.caller;
        END IF;
        PERFORM memory._fail('MEMORY_FORBIDDEN', 'not permitted: this login may not act as the service');
    END IF;
    IF NOT claims ? 'sub' OR claims -> 'sub' = 'null'::jsonb THEN
        PERFORM memory._fail('MEMORY_FORBIDDEN', 'not authenticated: claims carry no user id (sub)');
    END IF;
    IF jsonb_typeof(claims -> 'sub') <> 'string' OR NOT memory._is_uuid(claims ->> 'sub') THEN
        PERFORM memory._fail('MEMORY_FORBIDDEN',
            format('not authenticated: the claims'' sub is not a uuid: %s', left((claims -> 'sub')::text, 100)));
    END IF;
    RETURN ROW((claims ->> 'sub')::uuid, false)::memory.caller;
END
$$;

CREATE OR REPLACE FUNCTION memory._is_uuid(value text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT value ~* '^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$' $$;

CREATE OR REPLACE FUNCTION memory._require_service() RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT (memory._caller()).service THEN
        PERFORM memory._fail('MEMORY_FORBIDDEN', 'not permitted: only the service may do this');
    END IF;
END
$$;

-- The default permission check, backed by memory.grant / memory.revoke.
-- Not SECURITY DEFINER and not executable by PUBLIC: who holds which
-- permission is not for callers to probe (the resolver calls it as owner).
CREATE OR REPLACE FUNCTION memory.has_permission(org uuid, user_id uuid, permission text)
RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT EXISTS (
        SELECT FROM memory.permissions p
        WHERE p.organization_id = has_permission.org
          AND p.user_id = has_permission.user_id
          AND p.permission = has_permission.permission)
$$;

-- Why `fn` may not serve as permission_check, or null when it may. The rule
-- that keeps the plug-in from becoming a way up: it runs either with its own
-- owner's rights (SECURITY DEFINER) or is owned by a superuser, so whoever
-- can replace it already holds every right it could use; never from a
-- temporary schema (any login can plant one there) nor from the extension.
CREATE OR REPLACE FUNCTION memory._plugin_problem(fn oid) RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE
        WHEN p.oid IS NULL THEN 'it does not exist'
        WHEN p.prokind <> 'f' OR p.proretset OR p.prorettype <> 'boolean'::regtype
             OR p.pronargs <> 3 OR p.proargtypes[0] <> 'uuid'::regtype
             OR p.proargtypes[1] <> 'uuid'::regtype OR p.proargtypes[2] <> 'text'::regtype
            THEN 'it is not a function (uuid, uuid, text) returning boolean'
        WHEN p.pronamespace = pg_my_temp_schema() OR pg_is_other_temp_schema(p.pronamespace)
            THEN 'it lives in a temporary schema, where any login can create a function of that name'
        WHEN p.pronamespace = 'memory'::regnamespace
            THEN 'it is one of the extension''s own functions (only memory.has_permission may be named)'
        WHEN NOT (p.prosecdef OR coalesce(r.rolsuper, false))
            THEN 'it is neither SECURITY DEFINER nor owned by a superuser, so it would run with '
                 'the extension owner''s rights for whoever can replace it'
    END
    FROM (SELECT fn) x
    LEFT JOIN pg_proc p ON p.oid = x.fn
    LEFT JOIN pg_roles r ON r.oid = p.proowner
$$;

-- The function memory._permission_check_call runs, by oid (null: none bound).
CREATE OR REPLACE FUNCTION memory._bound_permission_check() RETURNS oid
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT d.refobjid FROM pg_depend d
    WHERE d.classid = 'pg_proc'::regclass
      AND d.objid = to_regprocedure('memory._permission_check_call(uuid,uuid,text)')
      AND d.refclassid = 'pg_proc'::regclass AND d.deptype = 'n'
    LIMIT 1
$$;

-- Binds the configured permission_check: memory._permission_check_call is a
-- SQL function whose BEGIN ATOMIC body is resolved once, here, to the
-- validated function's oid, so a later overload or a same-named function
-- elsewhere cannot change which function runs. The default needs no binding.
CREATE OR REPLACE FUNCTION memory._bind_permission_check(fn regprocedure) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    fn_schema name;
    fn_name name;
BEGIN
    IF fn IS NULL OR fn = 'memory.has_permission(uuid,uuid,text)'::regprocedure THEN
        DROP FUNCTION IF EXISTS memory._permission_check_call(uuid, uuid, text);
        RETURN;
    END IF;
    SELECT n.nspname, p.proname INTO fn_schema, fn_name
    FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE p.oid = fn;
    BEGIN
        -- OR REPLACE keeps the oid: calls running meanwhile see the old or the new body.
        EXECUTE format('CREATE OR REPLACE FUNCTION memory._permission_check_call('
                       'org uuid, user_id uuid, permission text) RETURNS boolean '
                       'LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp '
                       'BEGIN ATOMIC SELECT %I.%I($1, $2, $3); END', fn_schema, fn_name);
    EXCEPTION WHEN ambiguous_function THEN
        PERFORM memory._fail('MEMORY_INVALID',
            format('setting permission_check may not be %s: an overload of it takes the same arguments, '
                   'so a call by name is ambiguous', fn));
    END;
    REVOKE ALL ON FUNCTION memory._permission_check_call(uuid, uuid, text) FROM PUBLIC;
    IF memory._bound_permission_check() IS DISTINCT FROM fn THEN
        PERFORM memory._fail('MEMORY_INVALID', format('setting permission_check could not be bound to %s', fn));
    END IF;
END
$$;

-- Asks the configured permission_check (an application may plug in its
-- own). Fails closed: a plug-in that vanished, is no longer safe to call,
-- errors or answers null permits nothing.
CREATE OR REPLACE FUNCTION memory._permitted(org uuid, user_id uuid, permission text) RETURNS boolean
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    target oid;
    problem text;
    ok boolean;
BEGIN
    IF memory._setting_text('permission_check') = 'memory.has_permission(uuid,uuid,text)' THEN
        RETURN memory.has_permission(org, user_id, permission);
    END IF;
    target := memory._bound_permission_check();
    IF target IS NULL THEN
        PERFORM memory._fail('MEMORY_FORBIDDEN', 'not permitted: the configured permission_check function does not exist');
    END IF;
    -- Checked on every call: its owner may have replaced or altered it since configure.
    problem := memory._plugin_problem(target);
    IF problem IS NOT NULL THEN
        PERFORM memory._fail('MEMORY_FORBIDDEN',
            format('not permitted: the configured permission_check function may not be used: %s', problem));
    END IF;
    BEGIN
        ok := memory._permission_check_call(org, user_id, permission);
    EXCEPTION WHEN OTHERS THEN
        -- The plug-in's own error text stays in the server log: it may describe the application.
        RAISE LOG 'pgmemory: permission_check % failed: % (%)', target::regprocedure, SQLERRM, SQLSTATE;
        PERFORM memory._fail('MEMORY_FORBIDDEN', 'not permitted: the configured permission_check function failed');
    END;
    RETURN coalesce(ok, false);
END
$$;

CREATE OR REPLACE FUNCTION memory._check_grant_args(org uuid, user_id uuid, permission text) RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF org IS NULL OR user_id IS NULL OR coalesce(permission, '') = '' OR octet_length(permission) > 256 THEN
        PERFORM memory._fail('MEMORY_INVALID',
            'a permission needs an organization, a user and a name of at most 256 bytes');
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION memory.grant(org uuid, user_id uuid, permission text) RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM memory._require_service();
    PERFORM memory._check_grant_args(org, user_id, permission);
    INSERT INTO memory.permissions AS p (organization_id, user_id, permission)
    VALUES ($1, $2, $3)  -- positional: GRANT is a reserved word
    ON CONFLICT ON CONSTRAINT permissions_pkey DO NOTHING;
END
$$;

CREATE OR REPLACE FUNCTION memory.revoke(org uuid, user_id uuid, permission text) RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM memory._require_service();
    PERFORM memory._check_grant_args(org, user_id, permission);
    DELETE FROM memory.permissions p
    WHERE p.organization_id = $1 AND p.user_id = $2 AND p.permission = $3;
END
$$;

-- A user needs the read permission to use memory in an organization, and
-- the manage permission to change the organization's own namespace.
CREATE OR REPLACE FUNCTION memory._check_permissions(org uuid, user_id uuid, scope text, need text) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT memory._permitted(org, user_id, memory._setting_text('permissions.read')) THEN
        PERFORM memory._fail('MEMORY_FORBIDDEN', 'not permitted: no read permission in this organization');
    END IF;
    IF scope = 'organization' AND need = 'write'
       AND NOT memory._permitted(org, user_id, memory._setting_text('permissions.manage')) THEN
        PERFORM memory._fail('MEMORY_FORBIDDEN', 'not permitted: changing organization memory needs the manage permission');
    END IF;
END
$$;

-- A namespace's id is a digest of its key: stable, collision-free in practice,
-- and computable by readers without a lookup or a write.
CREATE OR REPLACE FUNCTION memory._namespace_id(org uuid, scope text, owner_id uuid, scope_id text) RETURNS uuid
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT md5(jsonb_build_array(org, scope, owner_id, scope_id)::text)::uuid $$;

-- Parses `ns` jsonb into (scope, scope_id, owner_id given); raises MEMORY_INVALID.
-- The namespace key that names a scope's id (user and organization have none).
CREATE OR REPLACE FUNCTION memory._scope_id_key(scope text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT CASE scope WHEN 'agent' THEN 'agent_id' WHEN 'chat' THEN 'chat_id' WHEN 'project' THEN 'project_id' END $$;

CREATE OR REPLACE FUNCTION memory._parse_ns(ns jsonb, OUT scope text, OUT scope_id text, OUT owner_id uuid)
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    id_key text;
    extra text;
BEGIN
    ns := coalesce(ns, '{}');
    IF jsonb_typeof(ns) <> 'object' THEN
        PERFORM memory._fail('MEMORY_INVALID', format('namespace must be a JSON object, got %s', left(ns::text, 200)));
    END IF;
    SELECT k INTO extra FROM jsonb_object_keys(ns) k
    WHERE k NOT IN ('scope', 'agent_id', 'chat_id', 'project_id', 'owner_id') LIMIT 1;
    IF extra IS NOT NULL THEN
        PERFORM memory._fail('MEMORY_INVALID', format('unknown namespace key %L', extra));
    END IF;
    IF ns ? 'scope' AND jsonb_typeof(ns -> 'scope') <> 'string' THEN
        PERFORM memory._fail('MEMORY_INVALID', 'namespace scope must be a string');
    END IF;
    scope := coalesce(ns ->> 'scope', 'user');
    IF scope NOT IN ('user', 'agent', 'chat', 'project', 'organization') THEN
        PERFORM memory._fail('MEMORY_INVALID',
            format('unknown namespace scope %L (user, agent, chat, project or organization)', left(scope, 100)));
    END IF;
    id_key := memory._scope_id_key(scope);
    SELECT k INTO extra FROM jsonb_object_keys(ns) k
    WHERE k IN ('agent_id', 'chat_id', 'project_id') AND k IS DISTINCT FROM id_key LIMIT 1;
    IF extra IS NOT NULL THEN
        PERFORM memory._fail('MEMORY_INVALID', format('namespace key %s does not belong to scope %s', extra, scope));
    END IF;
    IF id_key IS NOT NULL THEN
        IF jsonb_typeof(ns -> id_key) IS DISTINCT FROM 'string' OR ns ->> id_key = ''
           OR octet_length(ns ->> id_key) > 1024 THEN
            PERFORM memory._fail('MEMORY_INVALID',
                format('scope %s needs %s: a non-empty string of at most 1024 bytes', scope, id_key));
        END IF;
        scope_id := ns ->> id_key;
    END IF;
    IF ns ? 'owner_id' THEN
        IF scope = 'organization' THEN
            PERFORM memory._fail('MEMORY_INVALID', 'the organization namespace has no owner_id');
        END IF;
        IF jsonb_typeof(ns -> 'owner_id') <> 'string' OR NOT memory._is_uuid(ns ->> 'owner_id') THEN
            PERFORM memory._fail('MEMORY_INVALID', 'owner_id must be a uuid');
        END IF;
        owner_id := (ns ->> 'owner_id')::uuid;
    END IF;
END
$$;

-- The resolver: turns (org, ns) and the caller into the namespace to use,
-- or raises. `need` is 'read' or 'write'; a write creates the namespace row.
CREATE OR REPLACE FUNCTION memory._resolve(org uuid, ns jsonb, need text) RETURNS memory.namespaces
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    who memory.caller := memory._caller();
    parsed record;
    owner uuid;
    result memory.namespaces;
BEGIN
    IF org IS NULL THEN
        PERFORM memory._fail('MEMORY_INVALID', 'an organization id is required');
    END IF;
    parsed := memory._parse_ns(ns);
    IF parsed.owner_id IS NOT NULL AND NOT who.service THEN
        PERFORM memory._fail('MEMORY_FORBIDDEN', 'not permitted: only the service may pass owner_id');
    END IF;
    owner := CASE WHEN parsed.scope = 'organization' THEN NULL
                  ELSE coalesce(parsed.owner_id, who.user_id) END;
    IF owner IS NULL AND parsed.scope <> 'organization' THEN
        PERFORM memory._fail('MEMORY_INVALID', format('the service must pass owner_id for a %s namespace', parsed.scope));
    END IF;
    IF NOT who.service THEN
        PERFORM memory._check_permissions(org, who.user_id, parsed.scope, need);
    END IF;
    result := ROW(org, memory._namespace_id(org, parsed.scope, owner, parsed.scope_id),
                  parsed.scope, owner, parsed.scope_id, now())::memory.namespaces;
    IF need = 'write' THEN
        INSERT INTO memory.namespaces (organization_id, id, scope, owner_id, scope_id)
        VALUES (result.organization_id, result.id, result.scope, result.owner_id, result.scope_id)
        ON CONFLICT ON CONSTRAINT namespaces_pkey DO NOTHING;
    END IF;
    RETURN result;
END
$$;

-- The organization's own namespace, for readers that add it (render).
CREATE OR REPLACE FUNCTION memory._org_namespace_id(org uuid) RETURNS uuid
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT memory._namespace_id(org, 'organization', NULL, NULL) $$;

-- May the caller use an existing namespace row (a fact found by its id)?
-- Another user's namespace answers as if the row did not exist.
CREATE OR REPLACE FUNCTION memory._authorize(target memory.namespaces, need text, missing text) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    who memory.caller := memory._caller();
BEGIN
    IF who.service THEN
        RETURN;
    END IF;
    -- Another user's row, and a row of an organization the caller may not read,
    -- answer exactly like a row that does not exist.
    IF target.id IS NULL OR (target.owner_id IS NOT NULL AND target.owner_id <> who.user_id)
       OR (target.owner_id IS NULL
           AND NOT memory._permitted(target.organization_id, who.user_id, memory._setting_text('permissions.read'))) THEN
        PERFORM memory._fail('MEMORY_NOT_FOUND', missing);
    END IF;
    PERFORM memory._check_permissions(target.organization_id, who.user_id, target.scope, need);
END
$$;

-- `ns` as one namespace or an array of them (searches), resolved for reading.
CREATE OR REPLACE FUNCTION memory._resolve_many(org uuid, ns jsonb) RETURNS uuid[]
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF jsonb_typeof(ns) IS DISTINCT FROM 'array' THEN
        RETURN ARRAY[(memory._resolve(org, ns, 'read')).id];
    END IF;
    IF jsonb_array_length(ns) NOT BETWEEN 1 AND 32 THEN
        PERFORM memory._fail('MEMORY_INVALID', 'ns must name between 1 and 32 namespaces');
    END IF;
    RETURN ARRAY(SELECT DISTINCT (memory._resolve(org, item, 'read')).id FROM jsonb_array_elements(ns) item);
END
$$;

-- A namespace row as the jsonb a caller would pass.
CREATE OR REPLACE FUNCTION memory._ns_json(target memory.namespaces) RETURNS jsonb
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT jsonb_strip_nulls(jsonb_build_object(
        'scope', target.scope,
        coalesce(memory._scope_id_key(target.scope), 'none'), target.scope_id,
        'owner_id', target.owner_id))
$$;

-- ---- sql/40_paths.sql
-- Paths and the memory tool's texts. A path is valid only as
-- '/memories' or '/memories/<segment>[/<segment>...]' with an optional single
-- trailing slash; traversal is refused in every spelling, not resolved.

CREATE OR REPLACE FUNCTION memory._root() RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT '/memories'::text $$;

-- Validates a path given by a caller; returns it normalized (no trailing slash).
CREATE OR REPLACE FUNCTION memory._path(raw text) RETURNS text
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    rest text;
BEGIN
    IF raw IS NULL THEN
        PERFORM memory._fail('MEMORY_INVALID', 'a path is required');
    END IF;
    rest := substr(raw, length(memory._root()) + 1);
    -- '/memoriesX' is not below /memories, whatever a string prefix says.
    IF NOT starts_with(raw, memory._root()) OR (rest <> '' AND left(rest, 1) <> '/') THEN
        PERFORM memory._fail('MEMORY_INVALID_PATH', format('Path must start with /memories, got: %s', raw));
    END IF;
    IF octet_length(raw) > 1024 THEN
        PERFORM memory._fail('MEMORY_INVALID_PATH', 'Path is longer than 1024 bytes');
    END IF;
    -- C0/C1 controls, DEL and line/paragraph separators would let a path forge tool output.
    IF raw ~ '[\x01-\x1f\x7f-\x9f\u2028\u2029]' THEN
        PERFORM memory._fail('MEMORY_INVALID_PATH', 'Path contains control characters, which are not allowed');
    END IF;
    -- Every spelling of traversal: dot segments, empty segments, backslashes,
    -- and percent-encoded dots, slashes, backslashes or percent signs.
    IF raw ~ '(^|/)\.\.?(/|$)' OR raw LIKE '%//%' OR strpos(raw, '\') > 0 OR raw ~* '%(2e|2f|5c|25)' THEN
        PERFORM memory._fail('MEMORY_INVALID_PATH', format('Path %s would escape /memories directory', raw));
    END IF;
    IF rest LIKE '%/' THEN
        RETURN left(raw, -1);
    END IF;
    RETURN raw;
END
$$;

-- Every ancestor directory of a normalized path, nearest first, root excluded.
CREATE OR REPLACE FUNCTION memory._ancestors(path text) RETURNS SETOF text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT array_to_string((string_to_array(path, '/'))[1:n], '/')
    FROM generate_series(array_length(string_to_array(path, '/'), 1) - 1, 3, -1) n
$$;

-- Human file size as the reference prints it: 1024-based B/K/M/G, an integer
-- when exact, else one decimal rounded half to even (Python's format).
CREATE OR REPLACE FUNCTION memory._format_size(bytes bigint) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    unit int := CASE WHEN bytes < 1024 THEN 0 WHEN bytes < 1048576 THEN 1
                     WHEN bytes < 1073741824 THEN 2 ELSE 3 END;
    divisor numeric := 1024::numeric ^ unit;
    tenths numeric := floor(bytes * 10 / divisor);
    remainder numeric := bytes * 10 - tenths * divisor;
BEGIN
    IF bytes = 0 THEN
        RETURN '0B';
    END IF;
    IF bytes % divisor = 0 THEN
        RETURN (bytes / divisor)::bigint || substr('BKMG', unit + 1, 1);
    END IF;
    IF remainder * 2 > divisor OR (remainder * 2 = divisor AND tenths % 2 = 1) THEN
        tenths := tenths + 1;
    END IF;
    RETURN to_char(tenths / 10, 'FM999999990.0') || substr('BKMG', unit + 1, 1);
END
$$;

-- Lines of a text split on '\n' only (a trailing newline leaves an empty last line).
CREATE OR REPLACE FUNCTION memory._lines(content text) RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT CASE WHEN content = '' THEN ARRAY[''] ELSE string_to_array(content, E'\n') END $$;

-- Lines numbered as the reference does: the number right-aligned in 6, a tab.
-- unnest walks the array once; subscripting it (lines[i]) would walk it from
-- the start for every line, quadratic in a long file.
CREATE OR REPLACE FUNCTION memory._numbered(lines text[], first_number int) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT coalesce(string_agg(lpad((first_number + t.i - 1)::text, 6) || E'\t' || t.line, E'\n' ORDER BY t.i), '')
    FROM unnest(lines) WITH ORDINALITY AS t(line, i)
$$;

-- ---- sql/50_files.sql
-- Core memory: files under /memories, the six memory-tool commands behind
-- memory.run, and read / write / list_files / render.
-- Structural changes (create, delete, rename, write) serialize per namespace
-- on an advisory lock; edits of one file serialize on its row lock.

-- `topic` keeps unrelated work apart: saving facts does not wait for files.
CREATE OR REPLACE FUNCTION memory._lock_namespace(ns memory.namespaces, topic text DEFAULT 'files') RETURNS void
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$ SELECT pg_advisory_xact_lock(hashtextextended(topic || ':' || ns.organization_id::text || ns.id::text, 0)) $$;

CREATE OR REPLACE FUNCTION memory._file(ns memory.namespaces, path text) RETURNS memory.files
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT f.* FROM memory.files f
    WHERE f.organization_id = ns.organization_id AND f.namespace_id = ns.id AND f.path = _file.path
$$;

-- The file row, locked for an edit (null when there is no such file).
CREATE OR REPLACE FUNCTION memory._file_for_update(ns memory.namespaces, path text) RETURNS memory.files
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT f.* FROM memory.files f
    WHERE f.organization_id = ns.organization_id AND f.namespace_id = ns.id
      AND f.path = _file_for_update.path
    FOR UPDATE
$$;

-- A directory exists while a file lies below it; the root always exists.
CREATE OR REPLACE FUNCTION memory._is_dir(ns memory.namespaces, path text) RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT _is_dir.path = memory._root() OR EXISTS (
        SELECT FROM memory.files f
        WHERE f.organization_id = ns.organization_id AND f.namespace_id = ns.id
          AND starts_with(f.path, _is_dir.path || '/'))
$$;

-- The nearest ancestor of `path` that is a file (a file cannot hold files).
CREATE OR REPLACE FUNCTION memory._file_ancestor(ns memory.namespaces, path text) RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT a FROM memory._ancestors(_file_ancestor.path) a
    WHERE EXISTS (SELECT FROM memory.files f
                  WHERE f.organization_id = ns.organization_id AND f.namespace_id = ns.id AND f.path = a)
    LIMIT 1
$$;

CREATE OR REPLACE FUNCTION memory._check_size(content text, what text DEFAULT 'File') RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    limit_chars int := memory._setting_int('max_content');
BEGIN
    IF length(content) > limit_chars THEN
        PERFORM memory._fail('MEMORY_TOO_LARGE',
            format('%s content is %s characters long, over the limit of %s characters', what, length(content), limit_chars));
    END IF;
END
$$;

-- Writes a file's content, creating it at version 1 or bumping its version.
CREATE OR REPLACE FUNCTION memory._put(ns memory.namespaces, path text, content text) RETURNS bigint
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
    INSERT INTO memory.files AS f (organization_id, namespace_id, path, content)
    VALUES (ns.organization_id, ns.id, _put.path, _put.content)
    ON CONFLICT ON CONSTRAINT files_pkey
    DO UPDATE SET content = excluded.content, version = f.version + 1, updated_at = now()
    RETURNING f.version
$$;

-- Refuses to place a file where a directory is, or below a file.
CREATE OR REPLACE FUNCTION memory._check_file_slot(ns memory.namespaces, path text, raw text) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    blocker text := memory._file_ancestor(ns, path);
BEGIN
    IF memory._is_dir(ns, path) THEN
        PERFORM memory._fail('MEMORY_EXISTS', format('File %s already exists', raw));
    END IF;
    IF blocker IS NOT NULL THEN
        PERFORM memory._fail('MEMORY_INVALID_PATH', format('Cannot create %s: %s is a file', raw, blocker));
    END IF;
END
$$;

-- The error for a path that names no file (a directory or nothing at all).
CREATE OR REPLACE FUNCTION memory._not_a_file(ns memory.namespaces, path text, raw text) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF memory._is_dir(ns, path) THEN
        PERFORM memory._fail('MEMORY_INVALID_PATH', format('The path %s is not a file.', raw));
    END IF;
    PERFORM memory._fail('MEMORY_NOT_FOUND', format('The path %s does not exist. Please provide a valid path.', raw));
END
$$;

---------------------------------------------------------------- command arguments

-- A required argument of a memory-tool command, checked for its JSON type.
CREATE OR REPLACE FUNCTION memory._arg(command jsonb, key text, json_type text) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT command ? key OR command -> key = 'null'::jsonb THEN
        PERFORM memory._fail('MEMORY_INVALID',
            format('Missing required parameter `%s` for command `%s`', key, command ->> 'command'));
    END IF;
    IF jsonb_typeof(command -> key) <> json_type
       OR (json_type = 'number' AND NOT memory._is_integer(command -> key)) THEN
        PERFORM memory._fail('MEMORY_INVALID',
            format('Parameter `%s` for command `%s` must be %s', key, command ->> 'command',
                   CASE json_type WHEN 'number' THEN 'an integer' ELSE 'a ' || json_type END));
    END IF;
    RETURN command -> key;
END
$$;

CREATE OR REPLACE FUNCTION memory._arg_int(command jsonb, key text) RETURNS int
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    value numeric := memory._arg(command, key, 'number')::numeric;
BEGIN
    IF abs(value) > 1000000000 THEN
        PERFORM memory._fail('MEMORY_INVALID',
            format('Parameter `%s` for command `%s` is out of range', key, command ->> 'command'));
    END IF;
    RETURN value::int;
END
$$;

-- view_range: absent/null, or [start, end] integers (end -1 = to the end).
CREATE OR REPLACE FUNCTION memory._view_range(command jsonb) RETURNS int[]
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    range jsonb := command -> 'view_range';
BEGIN
    IF range IS NULL OR range = 'null'::jsonb THEN
        RETURN NULL;
    END IF;
    IF jsonb_typeof(range) <> 'array' OR jsonb_array_length(range) <> 2
       OR NOT memory._is_integer(range -> 0, -1000000000, 1000000000)
       OR NOT memory._is_integer(range -> 1, -1000000000, 1000000000) THEN
        PERFORM memory._fail('MEMORY_INVALID',
            'Parameter `view_range` for command `view` must be [start_line, end_line], two integers');
    END IF;
    RETURN ARRAY[(range ->> 0)::numeric::int, (range ->> 1)::numeric::int];  -- via numeric: 1.0 is an integer too
END
$$;

---------------------------------------------------------------- view

CREATE OR REPLACE FUNCTION memory._view_file(file memory.files, raw text, view_range int[]) RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    lines text[] := memory._lines(file.content);
    total int := cardinality(lines);
    first int := 0;
    last int := total;
    header text := format(E'Here''s the content of %s with line numbers:\n', raw);
    budget int := memory._setting_int('view_max_chars');
    shown int;
BEGIN
    IF total > 999999 THEN
        PERFORM memory._fail('MEMORY_TOO_LARGE', format('File %s exceeds maximum line limit of 999,999 lines.', raw));
    END IF;
    IF view_range IS NOT NULL THEN
        -- Python slice semantics of the reference: lines[max(1, start) - 1 : end].
        first := least(greatest(1, view_range[1]) - 1, total);
        last := CASE WHEN view_range[2] = -1 THEN total
                     WHEN view_range[2] < 0 THEN greatest(0, total + view_range[2])
                     ELSE least(view_range[2], total) END;
    END IF;
    lines := lines[first + 1 : last];
    -- Measured before numbering, so only the lines shown get numbered: each
    -- numbered line is its text and 7 more characters (the number in 6, a tab).
    IF length(header) + length(array_to_string(lines, E'\n')) + 7 * cardinality(lines) <= budget THEN
        RETURN header || memory._numbered(lines, first + 1);
    END IF;
    -- Too long for one view: whole lines up to the budget (8 more characters
    -- each, with its newline), then a note pointing to view_range.
    SELECT count(*) INTO shown
    FROM (SELECT sum(length(t.line) + 8) OVER (ORDER BY t.i) AS used
          FROM unnest(lines) WITH ORDINALITY AS t(line, i)) u
    WHERE u.used <= budget - length(header) - 200;
    RETURN header || memory._numbered(lines[1 : shown], first + 1)
        || format(E'\n[Output truncated at %s characters: showing lines %s-%s of %s. '
                  'Use view_range to see the other lines.]',
                  budget, first + 1, first + shown, total);
END
$$;

-- A directory, 2 levels deep, hidden items left out; sizes are the total
-- bytes of the files below (directories have no size of their own here).
CREATE OR REPLACE FUNCTION memory._view_dir(ns memory.namespaces, dir text, raw text) RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    WITH below AS (
        SELECT string_to_array(substr(f.path, length(dir) + 2), '/') AS seg, octet_length(f.content) AS bytes
        FROM memory.files f
        WHERE f.organization_id = ns.organization_id AND f.namespace_id = ns.id
          AND starts_with(f.path, dir || '/')
    ), entries AS (
        SELECT seg[1] AS name1, NULL::text AS name2, cardinality(seg) > 1 AS is_dir, bytes
        FROM below WHERE left(seg[1], 1) <> '.'
        UNION ALL
        SELECT seg[1], seg[2], cardinality(seg) > 2, bytes
        FROM below WHERE cardinality(seg) > 1 AND left(seg[1], 1) <> '.' AND left(seg[2], 1) <> '.'
    ), listed AS (
        SELECT name1, name2, is_dir, sum(bytes) AS bytes FROM entries GROUP BY name1, name2, is_dir
    )
    SELECT format('Here''re the files and directories up to 2 levels deep in %s, excluding hidden items:', raw)
        || E'\n' || memory._format_size(coalesce((SELECT sum(bytes) FROM below), 0)::bigint) || E'\t' || raw
        || coalesce((
            SELECT string_agg(
                E'\n' || memory._format_size(l.bytes::bigint) || E'\t' || raw || '/' || l.name1
                    || coalesce('/' || l.name2, '') || CASE WHEN l.is_dir THEN '/' ELSE '' END,
                '' ORDER BY l.name1 COLLATE "C", l.name2 IS NOT NULL, l.name2 COLLATE "C")
            FROM listed l), '')
$$;

CREATE OR REPLACE FUNCTION memory._cmd_view(ns memory.namespaces, command jsonb) RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    raw text := memory._arg(command, 'path', 'string') ->> 0;
    norm text := memory._path(raw);
    view_range int[] := memory._view_range(command);
    file memory.files := memory._file(ns, norm);
BEGIN
    IF file.path IS NOT NULL THEN
        RETURN memory._view_file(file, raw, view_range);
    END IF;
    IF memory._is_dir(ns, norm) THEN
        RETURN memory._view_dir(ns, norm, raw);
    END IF;
    PERFORM memory._fail('MEMORY_NOT_FOUND', format('The path %s does not exist. Please provide a valid path.', raw));
END
$$;

---------------------------------------------------------------- create / str_replace / insert

CREATE OR REPLACE FUNCTION memory._cmd_create(ns memory.namespaces, command jsonb) RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    raw text := memory._arg(command, 'path', 'string') ->> 0;
    norm text := memory._path(raw);
    file_text text := memory._arg(command, 'file_text', 'string') ->> 0;
BEGIN
    PERFORM memory._lock_namespace(ns);
    IF memory._file_for_update(ns, norm) IS NULL THEN
        PERFORM memory._check_file_slot(ns, norm, raw);
    END IF;
    PERFORM memory._check_size(file_text);
    PERFORM memory._put(ns, norm, file_text);
    RETURN format('File created successfully at: %s', raw);
END
$$;

-- Line numbers (1-based) of every occurrence, overlapping ones included, as
-- the reference lists them when old_str is not unique. Past 1,000 the list
-- ends with "…": each step copies the text, so an unbounded list would cost
-- quadratic time (an empty or one-letter old_str in a long file).
CREATE OR REPLACE FUNCTION memory._occurrence_lines(content text, needle text) RETURNS text
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    lines int[] := '{}';
    pos int := 0;  -- 0-based offset where the next search starts
    hit int;
BEGIN
    WHILE pos <= length(content) LOOP
        IF cardinality(lines) = 1000 THEN
            RETURN array_to_string(lines, ', ') || ', …';
        END IF;
        hit := strpos(substr(content, pos + 1), needle);
        EXIT WHEN hit = 0;
        pos := pos + hit - 1;
        lines := lines || (length(left(content, pos)) - length(replace(left(content, pos), E'\n', '')) + 1);
        pos := pos + 1;
    END LOOP;
    RETURN array_to_string(lines, ', ');
END
$$;

CREATE OR REPLACE FUNCTION memory._cmd_str_replace(ns memory.namespaces, command jsonb) RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    raw text := memory._arg(command, 'path', 'string') ->> 0;
    norm text := memory._path(raw);
    old_str text := memory._arg(command, 'old_str', 'string') ->> 0;
    new_str text := memory._arg(command, 'new_str', 'string') ->> 0;
    file memory.files := memory._file_for_update(ns, norm);
    occurrences bigint;
    changed_line int;
    new_content text;
    new_lines text[];
BEGIN
    IF file.path IS NULL THEN
        PERFORM memory._not_a_file(ns, norm, raw);
    END IF;
    -- Non-overlapping count, as Python's str.count; '' occurs len + 1 times.
    occurrences := CASE WHEN old_str = '' THEN length(file.content) + 1
                        ELSE (length(file.content) - length(replace(file.content, old_str, ''))) / length(old_str) END;
    IF occurrences = 0 THEN
        PERFORM memory._fail('MEMORY_NO_MATCH',
            format('No replacement was performed, old_str `%s` did not appear verbatim in %s.', old_str, raw));
    ELSIF occurrences > 1 THEN
        PERFORM memory._fail('MEMORY_AMBIGUOUS',
            format('No replacement was performed. Multiple occurrences of old_str `%s` in lines: %s. Please ensure it is unique',
                   old_str, memory._occurrence_lines(file.content, old_str)));
    END IF;
    changed_line := length(left(file.content, strpos(file.content, old_str) - 1))
        - length(replace(left(file.content, strpos(file.content, old_str) - 1), E'\n', ''));
    new_content := CASE WHEN old_str = '' THEN new_str ELSE replace(file.content, old_str, new_str) END;
    PERFORM memory._check_size(new_content);
    PERFORM memory._put(ns, norm, new_content);
    new_lines := memory._lines(new_content);
    RETURN E'The memory file has been edited. Here is the snippet showing the change (with line numbers):\n'
        || memory._numbered(new_lines[greatest(0, changed_line - 2) + 1 : least(cardinality(new_lines), changed_line + 3)],
                            greatest(0, changed_line - 2) + 1);
END
$$;

CREATE OR REPLACE FUNCTION memory._cmd_insert(ns memory.namespaces, command jsonb) RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    raw text := memory._arg(command, 'path', 'string') ->> 0;
    norm text := memory._path(raw);
    insert_line int := memory._arg_int(command, 'insert_line');
    insert_text text := memory._arg(command, 'insert_text', 'string') ->> 0;
    file memory.files := memory._file_for_update(ns, norm);
    lines text[];
    new_content text;
BEGIN
    IF file.path IS NULL THEN
        PERFORM memory._not_a_file(ns, norm, raw);
    END IF;
    lines := memory._lines(file.content);
    IF lines[cardinality(lines)] = '' THEN
        lines := lines[1 : cardinality(lines) - 1];  -- a trailing newline is not a line
    END IF;
    IF insert_line < 0 OR insert_line > cardinality(lines) THEN
        PERFORM memory._fail('MEMORY_INVALID',
            format('Invalid `insert_line` parameter: %s. It should be within the range [0, %s].',
                   insert_line, cardinality(lines)));
    END IF;
    new_content := array_to_string(
        lines[1 : insert_line] || rtrim(insert_text, E'\n') || lines[insert_line + 1 : cardinality(lines)], E'\n');
    IF right(new_content, 1) <> E'\n' THEN
        new_content := new_content || E'\n';
    END IF;
    PERFORM memory._check_size(new_content);
    PERFORM memory._put(ns, norm, new_content);
    RETURN format('The file %s has been edited.', raw);
END
$$;

---------------------------------------------------------------- delete / rename

CREATE OR REPLACE FUNCTION memory._cmd_delete(ns memory.namespaces, command jsonb) RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    raw text := memory._arg(command, 'path', 'string') ->> 0;
    norm text := memory._path(raw);
    deleted int;
BEGIN
    IF norm = memory._root() THEN
        PERFORM memory._fail('MEMORY_INVALID_PATH', 'Cannot delete the /memories directory itself');
    END IF;
    PERFORM memory._lock_namespace(ns);
    DELETE FROM memory.files f
    WHERE f.organization_id = ns.organization_id AND f.namespace_id = ns.id
      AND (f.path = norm OR starts_with(f.path, norm || '/'));
    GET DIAGNOSTICS deleted = ROW_COUNT;
    IF deleted = 0 THEN
        PERFORM memory._fail('MEMORY_NOT_FOUND', format('The path %s does not exist', raw));
    END IF;
    RETURN format('Successfully deleted %s', raw);
END
$$;

CREATE OR REPLACE FUNCTION memory._cmd_rename(ns memory.namespaces, command jsonb) RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    old_raw text := memory._arg(command, 'old_path', 'string') ->> 0;
    new_raw text := memory._arg(command, 'new_path', 'string') ->> 0;
    old_path text := memory._path(old_raw);
    new_path text := memory._path(new_raw);
    blocker text;
    moved int;
BEGIN
    IF old_path = memory._root() THEN
        PERFORM memory._fail('MEMORY_INVALID_PATH', 'Cannot rename the /memories directory itself');
    END IF;
    PERFORM memory._lock_namespace(ns);
    IF memory._file(ns, new_path) IS NOT NULL OR memory._is_dir(ns, new_path) THEN
        PERFORM memory._fail('MEMORY_EXISTS', format('The destination %s already exists', new_raw));
    END IF;
    IF memory._file(ns, old_path) IS NULL AND NOT memory._is_dir(ns, old_path) THEN
        PERFORM memory._fail('MEMORY_NOT_FOUND', format('The path %s does not exist', old_raw));
    END IF;
    IF starts_with(new_path, old_path || '/') THEN
        PERFORM memory._fail('MEMORY_INVALID_PATH', format('Cannot move %s into itself (%s)', old_raw, new_raw));
    END IF;
    blocker := memory._file_ancestor(ns, new_path);
    IF blocker IS NOT NULL THEN
        PERFORM memory._fail('MEMORY_INVALID_PATH', format('Cannot create %s: %s is a file', new_raw, blocker));
    END IF;
    UPDATE memory.files f
    SET path = new_path || substr(f.path, length(old_path) + 1), version = f.version + 1, updated_at = now()
    WHERE f.organization_id = ns.organization_id AND f.namespace_id = ns.id
      AND (f.path = old_path OR starts_with(f.path, old_path || '/'));
    GET DIAGNOSTICS moved = ROW_COUNT;
    IF EXISTS (SELECT FROM memory.files f
               WHERE f.organization_id = ns.organization_id AND f.namespace_id = ns.id
                 AND starts_with(f.path, new_path) AND octet_length(f.path) > 1024) THEN
        PERFORM memory._fail('MEMORY_INVALID_PATH', 'Path is longer than 1024 bytes');
    END IF;
    RETURN format('Successfully renamed %s to %s', old_raw, new_raw);
END
$$;

---------------------------------------------------------------- public functions

-- One command of Anthropic's memory tool (memory_20250818); returns the text
-- the model should see, or raises with that text as the message.
CREATE OR REPLACE FUNCTION memory.run(org uuid, command jsonb, ns jsonb DEFAULT '{}') RETURNS text
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    name text := CASE WHEN jsonb_typeof(command) = 'object' THEN command ->> 'command' END;
    target memory.namespaces;
BEGIN
    target := memory._resolve(org, ns, CASE WHEN name = 'view' THEN 'read' ELSE 'write' END);
    IF jsonb_typeof(command) IS DISTINCT FROM 'object' OR jsonb_typeof(command -> 'command') IS DISTINCT FROM 'string' THEN
        PERFORM memory._fail('MEMORY_INVALID', 'A command must be a JSON object with a "command" string');
    END IF;
    RETURN CASE name
        WHEN 'view' THEN memory._cmd_view(target, command)
        WHEN 'create' THEN memory._cmd_create(target, command)
        WHEN 'str_replace' THEN memory._cmd_str_replace(target, command)
        WHEN 'insert' THEN memory._cmd_insert(target, command)
        WHEN 'delete' THEN memory._cmd_delete(target, command)
        WHEN 'rename' THEN memory._cmd_rename(target, command)
        ELSE memory._unknown_command(name)
    END;
END
$$;

CREATE OR REPLACE FUNCTION memory._unknown_command(name text) RETURNS text
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM memory._fail('MEMORY_INVALID', format('Unknown command: %s', left(name, 100)));
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION memory.read(org uuid, path text, ns jsonb DEFAULT '{}') RETURNS jsonb
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    target memory.namespaces := memory._resolve(org, ns, 'read');
    file memory.files := memory._file(target, memory._path(path));
BEGIN
    IF file.path IS NULL THEN
        RETURN NULL;
    END IF;
    RETURN jsonb_build_object('path', file.path, 'content', file.content,
                              'version', file.version, 'updated_at', file.updated_at);
END
$$;

-- Optimistic write: expected_version null = unconditional, 0 = must not
-- exist yet, n = must still be version n; otherwise MEMORY_CONFLICT.
CREATE OR REPLACE FUNCTION memory.write(org uuid, path text, content text, expected_version bigint DEFAULT NULL,
                             ns jsonb DEFAULT '{}') RETURNS jsonb
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    target memory.namespaces := memory._resolve(org, ns, 'write');
    normalized text := memory._path(path);
    existing memory.files;
    version bigint;
BEGIN
    IF normalized = memory._root() THEN
        PERFORM memory._fail('MEMORY_INVALID_PATH', 'Cannot write the /memories directory itself');
    END IF;
    IF content IS NULL THEN
        PERFORM memory._fail('MEMORY_INVALID', 'content is required');
    END IF;
    IF expected_version < 0 THEN
        PERFORM memory._fail('MEMORY_INVALID', 'expected_version must be null, 0 or a version number');
    END IF;
    PERFORM memory._lock_namespace(target);
    existing := memory._file_for_update(target, normalized);
    IF existing.path IS NULL THEN
        IF expected_version > 0 THEN
            PERFORM memory._fail('MEMORY_CONFLICT',
                format('%s was expected at version %s but does not exist', path, expected_version));
        END IF;
        PERFORM memory._check_file_slot(target, normalized, path);
    ELSIF expected_version IS NOT NULL AND expected_version <> existing.version THEN
        PERFORM memory._fail('MEMORY_CONFLICT',
            format('%s was expected at version %s but is at version %s', path, expected_version, existing.version));
    END IF;
    PERFORM memory._check_size(content);
    version := memory._put(target, normalized, content);
    RETURN jsonb_build_object('path', normalized, 'version', version);
END
$$;

CREATE OR REPLACE FUNCTION memory.list_files(org uuid, ns jsonb DEFAULT '{}')
RETURNS TABLE (path text, bytes bigint, version bigint, updated_at timestamptz)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    target memory.namespaces := memory._resolve(org, ns, 'read');
BEGIN
    RETURN QUERY
    SELECT f.path::text, octet_length(f.content)::bigint, f.version, f.updated_at
    FROM memory.files f
    WHERE f.organization_id = target.organization_id AND f.namespace_id = target.id
    ORDER BY f.path;
END
$$;

-- Text safe inside the render delimiters: it cannot close or forge a tag.
CREATE OR REPLACE FUNCTION memory._escape(value text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT replace(replace(replace(replace(value, '&', '&amp;'), '<', '&lt;'), '>', '&gt;'), '"', '&quot;') $$;

-- Core memory as delimited text for a system prompt: the organization's files,
-- then the namespace's, each ordered by path. When all of it does not fit in
-- max_chars (default setting max_render), whole files are kept in order while
-- they fit and a visible note says how many were left out; the result is
-- never longer than the limit.
CREATE OR REPLACE FUNCTION memory.render(org uuid, ns jsonb DEFAULT '{}', max_chars int DEFAULT NULL) RETURNS text
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    target memory.namespaces := memory._resolve(org, ns, 'read');
    budget int := coalesce(max_chars, memory._setting_int('max_render'));
    blocks text[];
    block text;
    kept text := '';
    omitted int := 0;
    note_format constant text :=
        '[core memory cut at %s characters: %s of %s files not shown; view /memories with the memory tool to read them]';
BEGIN
    IF budget < 1 THEN
        PERFORM memory._fail('MEMORY_INVALID', 'max_chars must be a positive number of characters');
    END IF;
    SELECT coalesce(array_agg(memory._render_block(f.path, n.scope, f.content)
                              ORDER BY n.scope <> 'organization', f.path), '{}')
    INTO blocks
    FROM memory.files f
    JOIN memory.namespaces n ON n.organization_id = f.organization_id AND n.id = f.namespace_id
    WHERE f.organization_id = org AND f.namespace_id IN (memory._org_namespace_id(org), target.id);
    IF length(array_to_string(blocks, E'\n')) <= budget THEN
        RETURN array_to_string(blocks, E'\n');
    END IF;
    FOREACH block IN ARRAY blocks LOOP
        -- Room is kept for the note at its longest (every file omitted).
        IF length(kept) + length(block) + 1
           <= budget - length(format(note_format, budget, cardinality(blocks), cardinality(blocks))) - 1 THEN
            kept := kept || CASE WHEN kept = '' THEN '' ELSE E'\n' END || block;
        ELSE
            omitted := omitted + 1;
        END IF;
    END LOOP;
    RETURN left(kept || CASE WHEN kept = '' THEN '' ELSE E'\n' END
                || format(note_format, budget, omitted, cardinality(blocks)), budget);
END
$$;

-- One file inside its delimiters; content and path are escaped so that
-- neither can close the block or forge another one.
CREATE OR REPLACE FUNCTION memory._render_block(path text, scope text, content text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT format(E'<memory_file path="%s" scope="%s">\n%s%s</memory_file>',
                  memory._escape(path), scope, memory._escape(content),
                  CASE WHEN content = '' OR right(content, 1) = E'\n' THEN '' ELSE E'\n' END)
$$;

-- Deletes every core memory file of a namespace (the memory tool's
-- clear_all_memory); returns how many.
CREATE OR REPLACE FUNCTION memory.clear_files(org uuid, ns jsonb DEFAULT '{}') RETURNS int
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    target memory.namespaces := memory._resolve(org, ns, 'write');
    deleted int;
BEGIN
    PERFORM memory._lock_namespace(target);
    DELETE FROM memory.files f WHERE f.organization_id = target.organization_id AND f.namespace_id = target.id;
    GET DIAGNOSTICS deleted = ROW_COUNT;
    RETURN deleted;
END
$$;

-- ---- sql/55_embeddings.sql
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
    IF EXISTS (SELECT FROM unnest(value) x WHERE x IS NULL OR x = 'NaN' OR x IN ('Infinity', '-Infinity')) THEN
        PERFORM memory._fail('EMBEDDING_INVALID', 'embedding elements must be finite float4 numbers');
    END IF;
    RETURN value::@extschema:vector@.vector;
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
    vector_schema name := (SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
                           WHERE e.extname = 'vector');
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
    FOR t IN SELECT * FROM memory._memory_tables() LOOP
        EXECUTE format('DROP INDEX memory.%I', t.table_name || '_embedding_idx');
        EXECUTE format('ALTER TABLE memory.%I ALTER COLUMN embedding TYPE %I.%I(%s) USING NULL',
                       t.table_name, vector_schema, kind, dimensions);
        -- Leases go too: vectors computed for the old dimension would be refused anyway.
        EXECUTE format('UPDATE memory.%I SET embedding_model = NULL, lease_until = NULL '
                       'WHERE embedding_model IS NOT NULL OR lease_until IS NOT NULL', t.table_name);
        EXECUTE format('CREATE INDEX %I ON memory.%I USING hnsw (embedding %I.%I)',
                       t.table_name || '_embedding_idx', t.table_name, vector_schema, kind || '_cosine_ops')
             || coalesce(' WHERE ' || t.live, '');
    END LOOP;
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
    IF max IS NULL OR max < 1 OR max > 10000 THEN
        PERFORM memory._fail('MEMORY_INVALID', 'max must be between 1 and 10000');
    END IF;
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

-- Writes a batch of vectors in one call (service only). Every vector is
-- checked before anything is written; a row whose text changed since its
-- hash was handed out keeps waiting. Returns the number of rows written.
CREATE OR REPLACE FUNCTION memory.set_memory_embeddings(ids uuid[], content_hashes text[], vectors jsonb, model text DEFAULT NULL)
RETURNS int
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    written int := 0;
    table_written int;
    t record;
    embeddings @extschema:vector@.vector[];
BEGIN
    PERFORM memory._require_service();
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
    embeddings := ARRAY(SELECT memory._embedding_json(v) FROM jsonb_array_elements(vectors) WITH ORDINALITY x(v, n)
                        ORDER BY n);
    FOR t IN SELECT * FROM memory._memory_tables() LOOP
        EXECUTE format('UPDATE memory.%I r SET embedding = b.embedding, embedding_model = $4, lease_until = NULL'
                       ' FROM unnest($1, $2, $3) AS b(id, hash, embedding)'
                       ' WHERE r.id = b.id AND r.content_hash = b.hash', t.table_name)
        USING ids, content_hashes, embeddings, model;
        GET DIAGNOSTICS table_written = ROW_COUNT;
        written := written + table_written;
    END LOOP;
    RETURN written;
END
$$;

-- ---- sql/60_facts.sql
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
    IF max IS NULL OR max < 1 OR max > 1000 THEN
        PERFORM memory._fail('MEMORY_INVALID', 'max must be between 1 and 1000');
    END IF;
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

-- ---- sql/70_search.sql
-- Hybrid ranking, one implementation for facts and messages:
-- reciprocal rank fusion of a vector list (cosine; exact for a small set,
-- HNSW with iterative scan for a large one) and a full-text list (any shared
-- lexeme, ranked by ts_rank_cd). `kind` is 'fact' or 'message'; each query
-- reads both tables under a constant filter, so only one of them is scanned.

-- The query's lexemes OR-ed: a question shares some words with its answer,
-- rarely all of them (an AND finds nearly nothing on LoCoMo).
CREATE OR REPLACE FUNCTION memory._any_lexeme(query text) RETURNS tsquery
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF length(query) > 10000 THEN
        PERFORM memory._fail('MEMORY_TOO_LARGE', 'a search query is at most 10000 characters long');
    END IF;
    RETURN (SELECT nullif(string_agg(quote_literal(replace(lexeme, '\', '')), ' | '), '')::tsquery
            FROM unnest(tsvector_to_array(to_tsvector(memory._setting_text('text_search_config')::regconfig,
                                                      coalesce(query, '')))) lexeme);
END
$$;

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
        IF key NOT IN ('rrf_k', 'vector_weight', 'text_weight', 'min_similarity', 'created_after', 'created_before') THEN
            PERFORM memory._fail('MEMORY_INVALID', format('unknown search option %L', key));
        END IF;
        CONTINUE WHEN key IN ('created_after', 'created_before');  -- checked below
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

-- Few enough rows to rank exactly? Counting stops at the limit. Pending rows
-- count too: the count is then an index-only scan (an `embedding IS NOT NULL`
-- test read every row from the heap: 3.5 ms at 2,000 facts, bench/search.py).
CREATE OR REPLACE FUNCTION memory._small_set(kind text, org uuid, namespace_ids uuid[], exclude_chat text) RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT count(*) <= memory._setting_int('exact_search_max_rows') FROM (
        SELECT FROM memory.facts f
        WHERE kind = 'fact' AND f.organization_id = org AND f.namespace_id = ANY (namespace_ids)
          AND f.forgotten_at IS NULL
        UNION ALL
        SELECT FROM memory.messages m
        WHERE kind = 'message' AND m.organization_id = org AND m.namespace_id = ANY (namespace_ids)
          AND m.chat_id IS DISTINCT FROM exclude_chat
        LIMIT memory._setting_int('exact_search_max_rows') + 1) s
$$;

-- The k rows nearest to `query` by cosine distance. A small set is scanned
-- exactly ("+ 0" keeps the planner off the HNSW index, whose filtered scan
-- could return fewer rows); a large one goes through the index with the
-- iterative scan the calling public function sets, then is sorted again
-- (relaxed order). One query per table: the planner does not carry an
-- index ordering through a UNION ALL. Static queries rather than one built
-- with format(): measured side by side, the dynamic query was 3-7% slower
-- per call (its parse and the table lookup), and this is the search path.
CREATE OR REPLACE FUNCTION memory._nearest(kind text, org uuid, namespace_ids uuid[], exclude_chat text,
                                query @extschema:vector@.vector, k int, exact boolean DEFAULT NULL,
                                created tstzrange DEFAULT NULL)
RETURNS TABLE (id uuid, distance float8)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
-- A cached generic plan would pick the btree + sort for any namespace size
-- (bench/search.py: 64 ms instead of 7 ms at 20,000 facts); plan per call.
SET plan_cache_mode = force_custom_plan
AS $$
BEGIN
    IF query IS NULL THEN
        RETURN;
    END IF;
    exact := coalesce(exact, memory._small_set(kind, org, namespace_ids, exclude_chat));
    IF kind = 'fact' AND exact THEN
        RETURN QUERY
        SELECT f.id, (f.embedding OPERATOR(@extschema:vector@.<=>) query)::float8 AS d FROM memory.facts f
        WHERE f.organization_id = org AND f.namespace_id = ANY (namespace_ids)
          AND f.forgotten_at IS NULL AND f.embedding IS NOT NULL
          AND (created IS NULL OR f.created_at <@ created)
        ORDER BY (f.embedding OPERATOR(@extschema:vector@.<=>) query) + 0, f.id LIMIT k;
    ELSIF kind = 'fact' THEN
        RETURN QUERY
        SELECT c.id, c.d FROM (
            SELECT f.id, (f.embedding OPERATOR(@extschema:vector@.<=>) query)::float8 AS d FROM memory.facts f
            WHERE f.organization_id = org AND f.namespace_id = ANY (namespace_ids) AND f.forgotten_at IS NULL
              AND (created IS NULL OR f.created_at <@ created)
            ORDER BY f.embedding OPERATOR(@extschema:vector@.<=>) query LIMIT k) c
        ORDER BY c.d, c.id;
    ELSIF exact THEN
        RETURN QUERY
        SELECT m.id, (m.embedding OPERATOR(@extschema:vector@.<=>) query)::float8 AS d FROM memory.messages m
        WHERE m.organization_id = org AND m.namespace_id = ANY (namespace_ids)
          AND m.chat_id IS DISTINCT FROM exclude_chat AND m.embedding IS NOT NULL
          AND (created IS NULL OR m.created_at <@ created)
        ORDER BY (m.embedding OPERATOR(@extschema:vector@.<=>) query) + 0, m.id LIMIT k;
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

-- The `depth` best rows sharing any lexeme with the query, by ts_rank_cd.
CREATE OR REPLACE FUNCTION memory._text_ranked(kind text, org uuid, namespace_ids uuid[], exclude_chat text,
                                    terms tsquery, depth int, created tstzrange DEFAULT NULL)
RETURNS TABLE (id uuid, text_rank float4)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_custom_plan
AS $$
    SELECT e.id, ts_rank_cd(e.search_text, terms) AS r
    FROM (SELECT f.id, f.search_text FROM memory.facts f
          WHERE kind = 'fact' AND f.organization_id = org
            AND ARRAY[f.namespace_id] && namespace_ids  -- the indexed form (facts_search_idx)
            AND f.forgotten_at IS NULL AND f.search_text @@ terms
            AND (created IS NULL OR f.created_at <@ created)
          UNION ALL
          SELECT m.id, m.search_text FROM memory.messages m
          WHERE kind = 'message' AND m.organization_id = org AND ARRAY[m.namespace_id] && namespace_ids
            AND m.chat_id IS DISTINCT FROM exclude_chat AND m.search_text @@ terms
            AND (created IS NULL OR m.created_at <@ created)) e
    WHERE terms IS NOT NULL
    ORDER BY r DESC, e.id
    LIMIT depth
$$;

-- Reciprocal rank fusion of both lists:
-- score = w_v / (rrf_k + rank_v) + w_t / (rrf_k + rank_t); a missing rank adds 0.
CREATE OR REPLACE FUNCTION memory._rank(kind text, org uuid, namespace_ids uuid[], exclude_chat text, query text,
                             query_embedding @extschema:vector@.vector, k int, options jsonb)
RETURNS TABLE (id uuid, score float8)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    opts jsonb := memory._search_options(options);
    created tstzrange := memory._created(opts);
    depth int := greatest(4 * k, 40);  -- each list is ranked deeper than k before fusion
BEGIN
    RETURN QUERY
    WITH by_vector AS (
        SELECT n.id, row_number() OVER (ORDER BY n.distance, n.id) AS rank
        FROM memory._nearest(kind, org, namespace_ids, exclude_chat,
                             CASE WHEN (opts ->> 'vector_weight')::float8 > 0 THEN query_embedding END, depth,
                             NULL, created) n
    ), by_text AS (  -- a list with weight 0 is not computed at all
        SELECT t.id, row_number() OVER (ORDER BY t.text_rank DESC, t.id) AS rank
        FROM memory._text_ranked(kind, org, namespace_ids, exclude_chat,
                                 CASE WHEN (opts ->> 'text_weight')::float8 > 0 THEN memory._any_lexeme(query) END,
                                 depth, created) t
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
    least_similar float8 := (memory._search_options(options) ->> 'min_similarity')::float8;
BEGIN
    IF k IS NULL OR k < 1 OR k > 1000 THEN
        PERFORM memory._fail('MEMORY_INVALID', 'k must be between 1 and 1000');
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

-- ---- sql/75_messages.sql
-- Recall: earlier chat messages, embedded and searched across a
-- user's chats. Messages live in their owner's user namespace and share the
-- facts' embedding columns, pending pipeline and ranking.

CREATE OR REPLACE FUNCTION memory._message_text(message jsonb, key text, max_bytes int) RETURNS text
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF jsonb_typeof(message -> key) IS DISTINCT FROM 'string' OR message ->> key = ''
       OR octet_length(message ->> key) > max_bytes THEN
        PERFORM memory._fail('MEMORY_INVALID',
            format('message %s must be a non-empty string of at most %s bytes', key, max_bytes));
    END IF;
    RETURN message ->> key;
END
$$;

-- Indexes one message {id, chat_id, owner_id, role, content, temporary?,
-- created_at? (ISO 8601), embedding_model?} (service only); idempotent per
-- (org, owner, chat_id, id).
-- A temporary chat stores nothing and answers false. Changed content makes
-- the embedding pending again (unless a new one comes with it).
CREATE OR REPLACE FUNCTION memory.index_message(org uuid, message jsonb, embedding real[] DEFAULT NULL) RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    owner memory.namespaces;
    content text;
    vec @extschema:vector@.vector;
    created timestamptz;
BEGIN
    PERFORM memory._require_service();
    vec := memory._embedding(embedding);
    IF jsonb_typeof(message) IS DISTINCT FROM 'object' THEN
        PERFORM memory._fail('MEMORY_INVALID', 'message must be a JSON object');
    END IF;
    IF message ? 'temporary' AND jsonb_typeof(message -> 'temporary') NOT IN ('boolean', 'null') THEN
        PERFORM memory._fail('MEMORY_INVALID', 'message temporary must be a boolean');
    END IF;
    IF (message ->> 'temporary')::boolean THEN
        RETURN false;
    END IF;
    IF jsonb_typeof(message -> 'owner_id') IS DISTINCT FROM 'string' OR NOT memory._is_uuid(message ->> 'owner_id') THEN
        PERFORM memory._fail('MEMORY_INVALID', 'message owner_id must be a uuid');
    END IF;
    IF jsonb_typeof(message -> 'content') IS DISTINCT FROM 'string' THEN
        PERFORM memory._fail('MEMORY_INVALID', 'message content must be a string');
    END IF;
    content := message ->> 'content';
    PERFORM memory._check_size(content, 'Message');
    created := coalesce(memory._timestamp(message -> 'created_at', 'message created_at'), now());
    owner := memory._resolve(org, jsonb_build_object('owner_id', message ->> 'owner_id'), 'write');
    INSERT INTO memory.messages AS m (organization_id, namespace_id, chat_id, message_id, role, content,
                                      embedding, embedding_model, created_at)
    VALUES (org, owner.id, memory._message_text(message, 'chat_id', 1024), memory._message_text(message, 'id', 1024),
            memory._message_text(message, 'role', 64), content,
            vec, CASE WHEN vec IS NOT NULL THEN message ->> 'embedding_model' END, created)
    ON CONFLICT ON CONSTRAINT messages_message_key DO UPDATE
    SET role = excluded.role, content = excluded.content, created_at = excluded.created_at, indexed_at = now(),
        embedding = CASE WHEN excluded.embedding IS NOT NULL THEN excluded.embedding
                         WHEN m.content_hash = excluded.content_hash THEN m.embedding END,
        embedding_model = CASE WHEN excluded.embedding IS NOT NULL THEN excluded.embedding_model
                               WHEN m.content_hash = excluded.content_hash THEN m.embedding_model END,
        lease_until = NULL;
    RETURN true;
END
$$;

-- The caller's own closest earlier messages, across chats; `exclude_chat`
-- leaves out the chat the conversation is in.
CREATE OR REPLACE FUNCTION memory.search_messages(org uuid, query text, query_embedding real[] DEFAULT NULL,
                                       exclude_chat text DEFAULT NULL, k int DEFAULT 5, options jsonb DEFAULT '{}')
RETURNS SETOF memory.message_hit
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- For this function only: PostgreSQL restores the caller's values on return and on error.
SET hnsw.iterative_scan = 'relaxed_order'
SET hnsw.ef_search = 800  -- as search_facts
SET hnsw.max_scan_tuples = 100000
AS $$
DECLARE
    own uuid := (memory._resolve(org, '{}', 'read')).id;
    vec @extschema:vector@.vector := memory._embedding(query_embedding);
    least_similar float8 := (memory._search_options(options) ->> 'min_similarity')::float8;
BEGIN
    IF k IS NULL OR k < 1 OR k > 100 THEN
        PERFORM memory._fail('MEMORY_INVALID', 'k must be between 1 and 100');
    END IF;
    RETURN QUERY
    SELECT m.message_id, m.chat_id, m.role, m.content, r.score,
           1 - (m.embedding OPERATOR(@extschema:vector@.<=>) vec)::float8, m.created_at
    FROM memory._rank('message', org, ARRAY[own], exclude_chat, query, vec, k, options) r
    JOIN memory.messages m ON m.organization_id = org AND m.id = r.id
    WHERE memory._similar_enough(1 - (m.embedding OPERATOR(@extschema:vector@.<=>) vec)::float8, least_similar)
    ORDER BY r.score DESC, m.id;
END
$$;

-- Deletes a chat's messages: a user's own, or (the service) everyone's.
CREATE OR REPLACE FUNCTION memory.delete_chat(org uuid, chat_id text) RETURNS int
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    who memory.caller := memory._caller();
    own uuid;
    deleted int;
BEGIN
    IF org IS NULL THEN
        PERFORM memory._fail('MEMORY_INVALID', 'an organization id is required');
    END IF;
    IF NOT who.service THEN
        own := (memory._resolve(org, '{}', 'read')).id;
    END IF;
    DELETE FROM memory.messages m
    WHERE m.organization_id = org AND m.chat_id = delete_chat.chat_id
      AND (who.service OR m.namespace_id = own);
    GET DIAGNOSTICS deleted = ROW_COUNT;
    RETURN deleted;
END
$$;

-- ---- sql/80_documents.sql
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

-- ---- sql/85_portability.sql
-- Erasure and portability: erase everything of a user in an
-- organization; export a namespace as JSON that import loads back unchanged
-- (ids, versions, timestamps and embeddings included).

CREATE OR REPLACE FUNCTION memory.erase_user(org uuid, user_id uuid) RETURNS jsonb
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    counts jsonb;
    permissions int;
BEGIN
    PERFORM memory._require_service();
    IF org IS NULL OR user_id IS NULL THEN
        PERFORM memory._fail('MEMORY_INVALID', 'erase_user needs an organization and a user');
    END IF;
    -- Count first: the namespaces' rows go with them (ON DELETE CASCADE).
    SELECT jsonb_build_object(
        'files', (SELECT count(*) FROM memory.files f WHERE f.organization_id = org AND f.namespace_id = ANY (ids)),
        'facts', (SELECT count(*) FROM memory.facts f WHERE f.organization_id = org AND f.namespace_id = ANY (ids)),
        'messages', (SELECT count(*) FROM memory.messages m WHERE m.organization_id = org AND m.namespace_id = ANY (ids)),
        'namespaces', cardinality(ids))
    INTO counts
    FROM (SELECT coalesce(array_agg(n.id), '{}') AS ids FROM memory.namespaces n
          WHERE n.organization_id = org AND n.owner_id = erase_user.user_id) owned;
    DELETE FROM memory.namespaces n WHERE n.organization_id = org AND n.owner_id = erase_user.user_id;
    DELETE FROM memory.permissions p WHERE p.organization_id = org AND p.user_id = erase_user.user_id;
    GET DIAGNOSTICS permissions = ROW_COUNT;
    RETURN counts || jsonb_build_object('permissions', permissions);
END
$$;

CREATE OR REPLACE FUNCTION memory.export(org uuid, ns jsonb DEFAULT '{}') RETURNS jsonb
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    target memory.namespaces := memory._resolve(org, ns, 'read');
BEGIN
    RETURN jsonb_build_object(
        'format', 'pgmemory', 'version', 1,
        'namespace', memory._ns_json(target) - 'owner_id',
        'files', coalesce((
            SELECT jsonb_agg(jsonb_build_object(
                'path', f.path, 'content', f.content, 'version', f.version,
                'created_at', f.created_at, 'updated_at', f.updated_at) ORDER BY f.path)
            FROM memory.files f WHERE f.organization_id = org AND f.namespace_id = target.id), '[]'),
        'facts', coalesce((
            SELECT jsonb_agg(jsonb_build_object(
                'id', f.id, 'content', f.content, 'version', f.version, 'source', f.source,
                'embedding', to_jsonb(f.embedding::real[]), 'embedding_model', f.embedding_model,
                'created_at', f.created_at, 'updated_at', f.updated_at,
                'forgotten_at', f.forgotten_at, 'superseded_by', f.superseded_by) ORDER BY f.created_at, f.id)
            FROM memory.facts f WHERE f.organization_id = org AND f.namespace_id = target.id), '[]'),
        'messages', coalesce((
            SELECT jsonb_agg(jsonb_build_object(
                'id', m.message_id, 'chat_id', m.chat_id, 'role', m.role, 'content', m.content,
                'embedding', to_jsonb(m.embedding::real[]), 'embedding_model', m.embedding_model,
                'created_at', m.created_at, 'indexed_at', m.indexed_at) ORDER BY m.chat_id, m.created_at, m.message_id)
            FROM memory.messages m WHERE m.organization_id = org AND m.namespace_id = target.id), '[]'));
END
$$;

CREATE OR REPLACE FUNCTION memory._export_array(data jsonb, key text) RETURNS SETOF jsonb
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF jsonb_typeof(data -> key) IS DISTINCT FROM 'array'
       OR EXISTS (SELECT FROM jsonb_array_elements(data -> key) e WHERE jsonb_typeof(e) <> 'object') THEN
        PERFORM memory._fail('MEMORY_INVALID', format('export data needs "%s": an array of objects', key));
    END IF;
    RETURN QUERY SELECT e FROM jsonb_array_elements(data -> key) e;
END
$$;

-- A version from an export: one that a real history could have reached. A
-- larger one (up to bigint's end) would make the next edit overflow; 2^53 - 1
-- is also the largest integer a JSON reader in JavaScript keeps exact.
CREATE OR REPLACE FUNCTION memory._import_version(item jsonb, what text) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT memory._is_integer(item -> 'version', 1, 9007199254740991) THEN
        PERFORM memory._fail('MEMORY_INVALID',
            format('%s version must be an integer from 1 to 9007199254740991, got %s', what, left((item -> 'version')::text, 40)));
    END IF;
    RETURN (item ->> 'version')::bigint;
END
$$;

-- The ids imported facts get. The service keeps the export's ids. A user's
-- facts get new ones (their history links follow): whether an id is taken is
-- knowledge about other users' rows, which an import must not answer.
CREATE OR REPLACE FUNCTION memory._import_fact_ids(data jsonb, keep boolean) RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    ids jsonb := '{}';
    fact jsonb;
BEGIN
    FOR fact IN SELECT * FROM memory._export_array(data, 'facts') LOOP
        IF jsonb_typeof(fact -> 'id') IS DISTINCT FROM 'string' OR NOT memory._is_uuid(fact ->> 'id') THEN
            PERFORM memory._fail('MEMORY_INVALID', 'each fact of an export needs an "id": a uuid');
        END IF;
        ids := ids || jsonb_build_object((fact ->> 'id')::uuid::text,
                                         CASE WHEN keep THEN (fact ->> 'id')::uuid ELSE gen_random_uuid() END);
    END LOOP;
    RETURN ids;
END
$$;

-- Loads an export into a namespace (which must not already hold the same
-- paths, fact ids or messages: MEMORY_EXISTS). Returns counts per kind.
-- Messages are indexed by the service only, so only the service imports them.
CREATE OR REPLACE FUNCTION memory.import(org uuid, data jsonb, ns jsonb DEFAULT '{}') RETURNS jsonb
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    target memory.namespaces := memory._resolve(org, ns, 'write');
    service boolean := (memory._caller()).service;
    item jsonb;
    fact_ids jsonb;
    files int := 0;
    facts int := 0;
    messages int := 0;
    code text;
BEGIN
    IF jsonb_typeof(data) IS DISTINCT FROM 'object' OR data ->> 'format' IS DISTINCT FROM 'pgmemory'
       OR data -> 'version' IS DISTINCT FROM '1'::jsonb THEN
        PERFORM memory._fail('MEMORY_INVALID', 'not a pgmemory export (format "pgmemory", version 1)');
    END IF;
    IF NOT service AND jsonb_typeof(data -> 'messages') = 'array' AND jsonb_array_length(data -> 'messages') > 0 THEN
        PERFORM memory._fail('MEMORY_FORBIDDEN',
            'not permitted: only the service may import messages (import as the service with owner_id, or leave "messages" empty)');
    END IF;
    PERFORM memory._lock_namespace(target);
    PERFORM memory._lock_namespace(target, 'facts');
    BEGIN
        FOR item IN SELECT * FROM memory._export_array(data, 'files') LOOP
            PERFORM memory._check_size(item ->> 'content');
            PERFORM memory._check_file_slot(target, memory._path(item ->> 'path'), item ->> 'path');
            INSERT INTO memory.files (organization_id, namespace_id, path, content, version, created_at, updated_at)
            VALUES (org, target.id, memory._path(item ->> 'path'), item ->> 'content', memory._import_version(item, 'file'),
                    (item ->> 'created_at')::timestamptz, (item ->> 'updated_at')::timestamptz);
            files := files + 1;
        END LOOP;
        fact_ids := memory._import_fact_ids(data, service);
        FOR item IN SELECT * FROM memory._export_array(data, 'facts') LOOP
            PERFORM memory._check_fact_text(item ->> 'content');
            PERFORM memory._check_source(item -> 'source');
            INSERT INTO memory.facts (organization_id, id, namespace_id, content,
                                      embedding, embedding_model, version, source, created_at, updated_at,
                                      forgotten_at, superseded_by)
            VALUES (org, (fact_ids ->> ((item ->> 'id')::uuid::text))::uuid, target.id, item ->> 'content',
                    CASE WHEN item -> 'embedding' <> 'null' THEN memory._embedding_json(item -> 'embedding') END,
                    item ->> 'embedding_model', memory._import_version(item, 'fact'),
                    nullif(item -> 'source', 'null'), (item ->> 'created_at')::timestamptz,
                    (item ->> 'updated_at')::timestamptz, (item ->> 'forgotten_at')::timestamptz,
                    -- a successor outside the export keeps its id: the check below refuses it
                    coalesce((fact_ids ->> ((item ->> 'superseded_by')::uuid::text))::uuid,
                             (item ->> 'superseded_by')::uuid));
            facts := facts + 1;
        END LOOP;
        FOR item IN SELECT * FROM memory._export_array(data, 'messages') LOOP
            IF target.scope <> 'user' THEN
                PERFORM memory._fail('MEMORY_INVALID', 'messages can only be imported into a user namespace');
            END IF;
            PERFORM memory._check_size(item ->> 'content');
            INSERT INTO memory.messages (organization_id, namespace_id, chat_id, message_id, role, content,
                                         embedding, embedding_model, created_at, indexed_at)
            VALUES (org, target.id, item ->> 'chat_id', item ->> 'id', item ->> 'role', item ->> 'content',
                    CASE WHEN item -> 'embedding' <> 'null' THEN memory._embedding_json(item -> 'embedding') END,
                    item ->> 'embedding_model', (item ->> 'created_at')::timestamptz,
                    (item ->> 'indexed_at')::timestamptz);
            messages := messages + 1;
        END LOOP;
    EXCEPTION
        WHEN unique_violation THEN
            PERFORM memory._fail('MEMORY_EXISTS', format('an item of this export already exists: %s', SQLERRM));
        WHEN not_null_violation OR check_violation OR data_exception THEN
            GET STACKED DIAGNOSTICS code = PG_EXCEPTION_HINT;
            IF code LIKE 'MEMORY\_%' OR code LIKE 'EMBEDDING\_%' THEN
                RAISE;  -- already one of ours (an invalid path, embedding, size)
            END IF;
            PERFORM memory._fail('MEMORY_INVALID', format('malformed export item: %s', SQLERRM));
    END;
    IF EXISTS (SELECT FROM memory.facts f
               WHERE f.organization_id = org AND f.namespace_id = target.id AND f.superseded_by IS NOT NULL
                 AND NOT EXISTS (SELECT FROM memory.facts s
                                 WHERE s.organization_id = org AND s.namespace_id = target.id
                                   AND s.id = f.superseded_by)) THEN
        PERFORM memory._fail('MEMORY_INVALID', 'a fact of this export is superseded by a fact that is not in it');
    END IF;
    RETURN jsonb_build_object('files', files, 'facts', facts, 'messages', messages);
END
$$;

-- ---- sql/87_stats.sql
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

-- ---- sql/90_grants.sql
-- Privileges: users reach memory only through the public functions, which
-- check their caller themselves. Tables are granted to nobody; internal
-- helpers (memory._*) and the default permission check are not executable
-- by PUBLIC.

REVOKE ALL ON ALL TABLES IN SCHEMA memory FROM PUBLIC;

DO $$
DECLARE
    fn regprocedure;
BEGIN
    FOR fn IN
        SELECT p.oid::regprocedure FROM pg_proc p
        WHERE p.pronamespace = 'memory'::regnamespace AND p.proname LIKE '\_%'
    LOOP
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', fn);
    END LOOP;
END
$$;

REVOKE ALL ON FUNCTION memory.has_permission(uuid, uuid, text) FROM PUBLIC;

-- ---- sql/95_comments.sql
-- The public API in one screen: what psql's \df+ and IDEs show for each
-- function. The full reference is docs/sql-reference.md.

COMMENT ON FUNCTION memory.setting(text) IS
    'The current value of a setting (its default unless configured).';
COMMENT ON FUNCTION memory.configure(text, jsonb) IS
    'Service only: change a setting; a null value restores its default.';
COMMENT ON FUNCTION memory.has_permission(uuid, uuid, text) IS
    'The default permission_check: whether memory.grant gave this user this permission in org.';
COMMENT ON FUNCTION memory.grant(uuid, uuid, text) IS
    'Service only: give a user a permission (memory.read, memory.manage) in org.';
COMMENT ON FUNCTION memory.revoke(uuid, uuid, text) IS
    'Service only: take a permission back.';

COMMENT ON FUNCTION memory.run(uuid, jsonb, jsonb) IS
    'One command of Anthropic''s memory tool (view, create, str_replace, insert, delete, rename) on core memory; returns the text for the model.';
COMMENT ON FUNCTION memory.read(uuid, text, jsonb) IS
    'A core memory file with its version, or null.';
COMMENT ON FUNCTION memory.write(uuid, text, text, bigint, jsonb) IS
    'Write a core memory file; expected_version null = unconditional, 0 = must not exist, n = must be at n.';
COMMENT ON FUNCTION memory.list_files(uuid, jsonb) IS
    'The core memory files of a namespace, by path.';
COMMENT ON FUNCTION memory.render(uuid, jsonb, integer) IS
    'Core memory (the organization''s files, then the namespace''s) as delimited text for a system prompt.';
COMMENT ON FUNCTION memory.clear_files(uuid, jsonb) IS
    'Delete every core memory file of a namespace; returns how many.';

COMMENT ON FUNCTION memory.configure_embeddings(integer, text) IS
    'Service only: the dimension and type (vector, halfvec) of every embedding; existing ones turn pending.';
COMMENT ON FUNCTION memory.embedding_status() IS
    'Service only: the configured embedding, and how many memories have one or wait for one.';
COMMENT ON FUNCTION memory.pending_embeddings(integer) IS
    'Service only: lease up to max memories that wait for an embedding.';
COMMENT ON FUNCTION memory.set_memory_embeddings(uuid[], text[], jsonb, text) IS
    'Service only: write a batch of embeddings, each only while its row still has the text it was computed from.';

COMMENT ON FUNCTION memory.save_facts(uuid, jsonb, jsonb, double precision) IS
    'Save facts, refusing near-duplicates (cosine similarity >= threshold) of live facts and of earlier facts of the batch.';
COMMENT ON FUNCTION memory.save_fact(uuid, text, real[], jsonb, jsonb) IS
    'Save one fact; returns its id, or the id of the live fact it duplicates.';
COMMENT ON FUNCTION memory.forget(uuid, uuid, uuid) IS
    'Hide a fact of org from search and dedupe (it is kept), optionally superseded by another.';
COMMENT ON FUNCTION memory.edit_fact(uuid, uuid, text) IS
    'Replace a fact''s content; returns its new version. Its embedding becomes pending.';
COMMENT ON FUNCTION memory.get_fact(uuid, uuid) IS
    'A fact of org, forgotten ones too.';
COMMENT ON FUNCTION memory.search_facts(uuid, text, real[], jsonb, integer, jsonb) IS
    'Hybrid search of facts: reciprocal rank fusion of vector similarity and full-text rank.';

COMMENT ON FUNCTION memory.index_message(uuid, jsonb, real[]) IS
    'Service only: store one chat message in its owner''s namespace for recall (idempotent).';
COMMENT ON FUNCTION memory.search_messages(uuid, text, real[], text, integer, jsonb) IS
    'The caller''s own closest earlier messages, across chats.';
COMMENT ON FUNCTION memory.delete_chat(uuid, text) IS
    'Delete a chat''s indexed messages: the caller''s own, or (the service) everyone''s.';

COMMENT ON FUNCTION memory.document_read(text, text) IS
    'Service only: a versioned document, or null when missing or expired.';
COMMENT ON FUNCTION memory.document_write(text, text, text, bigint, integer) IS
    'Service only: write a document at its expected version (null = must not exist); returns the new version.';
COMMENT ON FUNCTION memory.document_delete(text, text, bigint) IS
    'Service only: delete a document, at its expected version when given.';
COMMENT ON FUNCTION memory.document_list(text, text) IS
    'Service only: the documents of a scope under a path prefix.';
COMMENT ON FUNCTION memory.purge_documents() IS
    'Service only: delete expired documents; returns how many.';

COMMENT ON FUNCTION memory.erase_user(uuid, uuid) IS
    'Service only: delete every file, fact, message and permission of a user in org; returns counts.';
COMMENT ON FUNCTION memory.export(uuid, jsonb) IS
    'Every memory of a namespace as JSON that memory.import loads back.';
COMMENT ON FUNCTION memory.import(uuid, jsonb, jsonb) IS
    'Load an export into a namespace, all or nothing; returns counts.';
COMMENT ON FUNCTION memory.list_facts(uuid, jsonb, integer, uuid, boolean) IS
    'A namespace''s facts a page at a time, oldest first; after_id continues a listing.';
COMMENT ON FUNCTION memory.stats(uuid, jsonb) IS
    'Counts of what a namespace holds (files, facts, pending, forgotten, messages); leases nothing.';
