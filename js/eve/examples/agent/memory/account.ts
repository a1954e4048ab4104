// A multi-tenant slot: the tenant's organization and the application's own
// user id, both from eve's authenticated caller (never from the model), so the
// Python side and this agent share one user's memory.
import { defineMemory } from "eve/memory";
import { byPrincipal } from "eve/memory/scope";
import pg from "pg";
import { pgmemoryProvider } from "pgmemory-eve";

const pool = new pg.Pool({ connectionString: process.env["PGMEMORY_DSN"] });
const servicePool = new pg.Pool({ connectionString: process.env["PGMEMORY_SERVICE_DSN"] });

function attribute(value: string | readonly string[] | undefined): string | null {
  return typeof value === "string" ? value : null;
}

export default defineMemory({
  description: "What this account's user told the assistant to keep.",
  provider: pgmemoryProvider({
    pool,
    servicePool,
    organizationId: (ctx) => attribute(ctx.session.auth.current?.attributes["orgId"]) ?? "",
    user: (ctx) => attribute(ctx.session.auth.current?.attributes["userId"]),
    facts: 8,
    messages: 3,
  }),
  scope(ctx) {
    const caller = ctx.session.auth.current;
    const tenant = caller?.attributes["orgId"];
    const principal = byPrincipal(ctx);
    if (caller?.principalType !== "user" || typeof tenant !== "string" || principal === null) return null;
    return [tenant, principal];
  },
});
