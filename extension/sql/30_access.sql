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
