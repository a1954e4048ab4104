// eve's own file memory (one bounded document per scope, save_memory and
// remove_memory tools) with its document kept in PostgreSQL.
import { defineMemory } from "eve/memory";
import { fileMemory } from "eve/memory/file";
import { byPrincipal } from "eve/memory/scope";
import pg from "pg";
import { pgmemoryDocumentBackend } from "pgmemory-eve";

// Documents are the service's: a login that is a member of memory_service.
const pool = new pg.Pool({ connectionString: process.env["PGMEMORY_SERVICE_DSN"] });

export default defineMemory({
  description: "Remember stable facts and preferences about the caller.",
  provider: fileMemory({ backend: pgmemoryDocumentBackend({ pool }) }),
  scope: byPrincipal,
});
