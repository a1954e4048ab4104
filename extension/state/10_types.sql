-- The row types the functions return or pass around. State, like the
-- tables: created once by a fresh install; an upgrade step changes them.

CREATE TYPE memory.caller AS (user_id uuid, service boolean);

-- A row type rather than RETURNS TABLE: its column `ns` may share the name
-- of the input argument `ns`.
CREATE TYPE memory.fact_hit AS (id uuid, content text, score float8, similarity float8, text_rank float4,
                                ns jsonb, created_at timestamptz);

CREATE TYPE memory.message_hit AS (id text, chat_id text, role text, content text, score float8,
                                   similarity float8, created_at timestamptz);
