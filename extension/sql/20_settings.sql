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
        'namespace_index_min_rows', 5000,
        'text_search_config', 'english',
        'service_role', 'memory_service',
        'service_claim', 'service_role',
        'permissions.read', 'memory.read',
        'permissions.manage', 'memory.manage',
        'permission_check', 'memory.has_permission(uuid,uuid,text)',
        'capture_idle_seconds', 0,
        'capture_lease_seconds', 300,
        'capture_max_attempts', 3,
        'capture_refuse_secrets', true,
        'recall_replay_seconds', 604800
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
    low int;  -- an integer setting's range
    high int;
BEGIN
    CASE
    WHEN key IN ('max_content', 'max_render', 'view_max_chars', 'exact_search_max_rows', 'namespace_index_min_rows',
                 'capture_idle_seconds', 'capture_lease_seconds', 'capture_max_attempts',
                 'recall_replay_seconds') THEN
        SELECT r.low, r.high INTO low, high
        FROM (VALUES ('exact_search_max_rows', 0, 100000000), ('namespace_index_min_rows', 0, 100000000),
                     ('capture_idle_seconds', 0, 31536000),
                     ('capture_lease_seconds', 1, 86400), ('capture_max_attempts', 1, 1000),
                     ('recall_replay_seconds', 1, 31536000)) r(name, low, high)
        WHERE r.name = key;
        low := coalesce(low, 100);  -- the size limits
        high := coalesce(high, 100000000);
        IF NOT memory._is_integer(value, low, high) THEN
            PERFORM memory._fail('MEMORY_INVALID',
                format('setting %s must be an integer between %s and %s', key, low, high));
        END IF;
        RETURN to_jsonb(memory._as_integer(value));  -- 2000.0 is stored as 2000, which an integer cast reads
    WHEN key = 'capture_refuse_secrets' THEN
        IF jsonb_typeof(value) <> 'boolean' THEN
            PERFORM memory._fail('MEMORY_INVALID', 'setting capture_refuse_secrets must be a boolean');
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
