-- Errors in one place: every failure carries a stable HINT code
-- and the SQLSTATE that goes with it; the message is for humans (and, for
-- memory.run, exactly the text the model sees).

CREATE FUNCTION memory._sqlstate(code text) RETURNS text
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

CREATE FUNCTION memory._fail(code text, message text) RETURNS void
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
