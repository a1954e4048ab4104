-- Identity and access (SPEC §4). The only place that reads the caller's
-- claims, decides who is the service, resolves namespaces and checks
-- permissions; every public function starts with one of these helpers.

CREATE TYPE memory.caller AS (user_id uuid, service boolean);

-- Is the login role trusted as the service? Claims never decide this alone.
CREATE FUNCTION memory._service_login() RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT coalesce((SELECT r.rolsuper FROM pg_roles r WHERE r.rolname = session_user), false)
        OR coalesce((SELECT pg_has_role(session_user, r.oid, 'MEMBER')
                     FROM pg_roles r WHERE r.rolname = memory._setting_text('service_role')), false)
$$;

-- Who is calling: a user (claims with a uuid `sub`) or the service.
CREATE FUNCTION memory._caller() RETURNS memory.caller
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
        PERFORM memory._fail('MEMORY_FORBIDDEN', 'not authenticated: no request.jwt.claims');
    END IF;
    BEGIN
        claims := raw::jsonb;
    EXCEPTION WHEN invalid_text_representation THEN
        PERFORM memory._fail('MEMORY_FORBIDDEN', 'not authenticated: request.jwt.claims is not JSON');
    END;
    IF jsonb_typeof(claims) <> 'object' THEN
        PERFORM memory._fail('MEMORY_FORBIDDEN', 'not authenticated: request.jwt.claims is not a JSON object');
    END IF;
    IF claims ->> 'role' = memory._setting_text('service_claim') THEN
        IF memory._service_login() THEN
            RETURN ROW(NULL, true)::memory.caller;
        END IF;
        PERFORM memory._fail('MEMORY_FORBIDDEN', 'not permitted: this login may not act as the service');
    END IF;
    IF jsonb_typeof(claims -> 'sub') = 'string' AND memory._is_uuid(claims ->> 'sub') THEN
        RETURN ROW((claims ->> 'sub')::uuid, false)::memory.caller;
    END IF;
    PERFORM memory._fail('MEMORY_FORBIDDEN', 'not authenticated: claims carry no user id (sub)');
END
$$;

CREATE FUNCTION memory._is_uuid(value text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT value ~* '^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$' $$;

CREATE FUNCTION memory._require_service() RETURNS void
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
CREATE FUNCTION memory.has_permission(organization_id uuid, user_id uuid, permission text)
RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT EXISTS (
        SELECT FROM memory.permissions p
        WHERE p.organization_id = has_permission.organization_id
          AND p.user_id = has_permission.user_id
          AND p.permission = has_permission.permission)
$$;

-- Calls the configured permission_check (an application may plug in its own).
CREATE FUNCTION memory._permitted(org uuid, user_id uuid, permission text) RETURNS boolean
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    -- A function dropped after it was configured fails closed, not with 42883.
    fn regprocedure := to_regprocedure(memory._setting_text('permission_check'));
    fn_schema name;
    fn_name name;
    ok boolean;
BEGIN
    IF fn = 'memory.has_permission(uuid,uuid,text)'::regprocedure THEN
        RETURN memory.has_permission(org, user_id, permission);
    END IF;
    IF fn IS NULL THEN
        PERFORM memory._fail('MEMORY_FORBIDDEN', 'not permitted: the configured permission_check function does not exist');
    END IF;
    SELECT n.nspname, p.proname INTO fn_schema, fn_name
    FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE p.oid = fn;
    EXECUTE format('SELECT %I.%I($1, $2, $3)', fn_schema, fn_name)
        INTO ok USING org, user_id, permission;
    RETURN coalesce(ok, false);
END
$$;

CREATE FUNCTION memory._check_grant_args(organization_id uuid, user_id uuid, permission text) RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF organization_id IS NULL OR user_id IS NULL OR coalesce(permission, '') = '' OR octet_length(permission) > 256 THEN
        PERFORM memory._fail('MEMORY_INVALID',
            'a permission needs an organization, a user and a name of at most 256 bytes');
    END IF;
END
$$;

CREATE FUNCTION memory.grant(organization_id uuid, user_id uuid, permission text) RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM memory._require_service();
    PERFORM memory._check_grant_args(organization_id, user_id, permission);
    INSERT INTO memory.permissions AS p (organization_id, user_id, permission)
    VALUES ($1, $2, $3)  -- positional: GRANT is a reserved word
    ON CONFLICT ON CONSTRAINT permissions_pkey DO NOTHING;
END
$$;

CREATE FUNCTION memory.revoke(organization_id uuid, user_id uuid, permission text) RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM memory._require_service();
    PERFORM memory._check_grant_args(organization_id, user_id, permission);
    DELETE FROM memory.permissions p
    WHERE p.organization_id = $1 AND p.user_id = $2 AND p.permission = $3;
END
$$;

-- A user needs the read permission to use memory in an organization, and
-- the manage permission to change the organization's own namespace.
CREATE FUNCTION memory._check_permissions(org uuid, user_id uuid, scope text, need text) RETURNS void
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
CREATE FUNCTION memory._namespace_id(org uuid, scope text, owner_id uuid, scope_id text) RETURNS uuid
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT md5(jsonb_build_array(org, scope, owner_id, scope_id)::text)::uuid $$;

-- Parses `ns` jsonb into (scope, scope_id, owner_id given); raises MEMORY_INVALID.
CREATE FUNCTION memory._parse_ns(ns jsonb, OUT scope text, OUT scope_id text, OUT owner_id uuid)
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
    id_key := CASE scope WHEN 'agent' THEN 'agent_id' WHEN 'chat' THEN 'chat_id'
                         WHEN 'project' THEN 'project_id' END;
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
CREATE FUNCTION memory._resolve(org uuid, ns jsonb, need text) RETURNS memory.namespaces
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
CREATE FUNCTION memory._org_namespace_id(org uuid) RETURNS uuid
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT memory._namespace_id(org, 'organization', NULL, NULL) $$;

-- May the caller use an existing namespace row (a fact found by its id)?
-- Another user's namespace answers as if the row did not exist.
CREATE FUNCTION memory._authorize(target memory.namespaces, need text, missing text) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    who memory.caller := memory._caller();
BEGIN
    IF who.service THEN
        RETURN;
    END IF;
    IF target.id IS NULL OR (target.owner_id IS NOT NULL AND target.owner_id <> who.user_id) THEN
        PERFORM memory._fail('MEMORY_NOT_FOUND', missing);
    END IF;
    PERFORM memory._check_permissions(target.organization_id, who.user_id, target.scope, need);
END
$$;

-- `ns` as one namespace or an array of them (searches), resolved for reading.
CREATE FUNCTION memory._resolve_many(org uuid, ns jsonb) RETURNS uuid[]
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
CREATE FUNCTION memory._ns_json(target memory.namespaces) RETURNS jsonb
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT jsonb_strip_nulls(jsonb_build_object(
        'scope', target.scope,
        CASE target.scope WHEN 'agent' THEN 'agent_id' WHEN 'chat' THEN 'chat_id'
                          WHEN 'project' THEN 'project_id' ELSE 'none' END, target.scope_id,
        'owner_id', target.owner_id))
$$;
