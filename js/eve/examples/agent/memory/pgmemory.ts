// A memory slot named `pgmemory`: per-caller memory in PostgreSQL. Before each
// turn eve recalls core memory, the best facts and earlier conversations; after
// it the turn is indexed and queued for fact extraction; the model gets
// pgmemory__save_memory, pgmemory__search_memory and pgmemory__forget_memory.
import { defineMemory } from "eve/memory";
import { byPrincipal } from "eve/memory/scope";
import pg from "pg";
import { pgmemoryProvider } from "pgmemory-eve";

// Users' calls: any login with USAGE on schema memory (claims are set per transaction).
const pool = new pg.Pool({ connectionString: process.env["PGMEMORY_DSN"] });
// Indexing the turns: a login that is a member of memory_service.
const servicePool = new pg.Pool({ connectionString: process.env["PGMEMORY_SERVICE_DSN"] });

export default defineMemory({
  description: "Durable facts and preferences of the caller, and their earlier conversations.",
  provider: pgmemoryProvider({
    pool,
    servicePool,
    organizationId: process.env["PGMEMORY_ORG"] ?? "00000000-0000-4000-8000-000000000000",
  }),
  scope: byPrincipal,
});
