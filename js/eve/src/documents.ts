import { MemoryDocumentConflictError, type MemoryDocument, type MemoryDocumentBackend } from "eve/memory/file";
import type { Pool } from "pg";

import { call, PgMemoryError, SERVICE_CLAIMS } from "./sql.js";

export interface PgmemoryDocumentBackendOptions {
  /** Connections of a login trusted as the service (a member of `memory_service`): documents are service only. */
  readonly pool: Pool;
  /** The document's path under each scope key. Default `MEMORY.md`. */
  readonly path?: string;
  /** Lifetime of a document in seconds from its last write (`expires_in`); an expired one reads as absent. Default: none. */
  readonly expiresIn?: number;
}

const VERSION = /^[1-9][0-9]{0,18}$/;

/**
 * eve's `fileMemory` document backend on `memory.document_*`: one document per
 * eve scope key, with the database's versions as eve's optimistic versions.
 * `expectedVersion` null means the document must not exist yet; a stale
 * version raises eve's `MemoryDocumentConflictError`, on which eve re-reads
 * and retries.
 */
export function pgmemoryDocumentBackend(options: PgmemoryDocumentBackendOptions): MemoryDocumentBackend {
  const { pool } = options;
  const path = options.path ?? "MEMORY.md";
  const expiresIn = options.expiresIn ?? null;
  if (expiresIn !== null && (!Number.isSafeInteger(expiresIn) || expiresIn <= 0 || expiresIn > 2_147_483_647)) {
    throw new TypeError(
      `pgmemoryDocumentBackend: expiresIn must be a positive number of whole seconds, got ${expiresIn}`,
    );
  }

  return {
    async read({ key, signal }): Promise<MemoryDocument | null> {
      const rows = await call<{ content: string; version: string }>(
        pool,
        SERVICE_CLAIMS,
        `SELECT d ->> 'content' AS content, d ->> 'version' AS version
         FROM memory.document_read($1::text, $2::text) AS d WHERE d IS NOT NULL`,
        [key, path],
        signal,
      );
      const row = rows[0];
      return row === undefined ? null : { content: row.content, version: row.version };
    },

    async write({ key, content, expectedVersion, signal }): Promise<MemoryDocument> {
      // A version this backend never handed out cannot be the current one.
      if (expectedVersion !== null && !VERSION.test(expectedVersion)) throw new MemoryDocumentConflictError(key);
      try {
        const rows = await call<{ version: string }>(
          pool,
          SERVICE_CLAIMS,
          "SELECT memory.document_write($1::text, $2::text, $3::text, $4::bigint, $5::int) AS version",
          [key, path, content, expectedVersion, expiresIn],
          signal,
        );
        return { content, version: rows[0]!.version };
      } catch (error) {
        if (error instanceof PgMemoryError && error.code === "MEMORY_DOCUMENT_CONFLICT") {
          throw new MemoryDocumentConflictError(key);
        }
        throw error;
      }
    },
  };
}
