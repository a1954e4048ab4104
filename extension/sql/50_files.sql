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
    RETURN ARRAY[memory._as_integer(range -> 0), memory._as_integer(range -> 1)];  -- 1.0 is 1
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
