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
