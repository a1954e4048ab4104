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

-- The integer a JSON whole number holds (1.0 is 1), or null when it holds none
-- within [low, high]: the cast goes through numeric, as the text "1.0" is no bigint.
CREATE OR REPLACE FUNCTION memory._as_integer(value jsonb, low numeric DEFAULT NULL, high numeric DEFAULT NULL)
RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT CASE WHEN memory._is_integer(value, low, high) THEN value::numeric::bigint END $$;

-- An integer argument within [low, high], else MEMORY_INVALID naming it.
CREATE OR REPLACE FUNCTION memory._check_between(what text, value bigint, low bigint, high bigint)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF value IS NULL OR value < low OR value > high THEN
        PERFORM memory._fail('MEMORY_INVALID', format('%s must be between %s and %s', what, low, high));
    END IF;
END
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
