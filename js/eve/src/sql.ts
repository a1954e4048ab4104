// One call = one transaction on a client checked out of a pool, with the
// caller's claims set for that transaction only, as the Python client does.
import type { Pool, PoolClient, QueryResultRow } from "pg";

/** `request.jwt.claims` for a user: PostgREST/Supabase-shaped, as the Python client sends them. */
export function userClaims(userId: string): string {
  return JSON.stringify({ sub: userId, role: "authenticated" });
}

/** No claims: the service, when the login is trusted as the service (a member of `memory_service`). */
export const SERVICE_CLAIMS = "";

/**
 * An error the memory functions raised on purpose: `code` is the stable code
 * from the error's HINT (`MEMORY_NOT_FOUND`, `MEMORY_FORBIDDEN`, …), `sqlstate`
 * its SQLSTATE, `message` the database's message (for the model's tools, the
 * text the model should see).
 */
export class PgMemoryError extends Error {
  readonly code: string;
  readonly sqlstate: string;

  constructor(code: string, sqlstate: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "PgMemoryError";
    this.code = code;
    this.sqlstate = sqlstate;
  }
}

const CODE = /^[A-Z][A-Z_]+$/;

/** A pg error whose hint is one of the extension's codes becomes a PgMemoryError; anything else stays as it is. */
export function translate(error: unknown): unknown {
  if (typeof error !== "object" || error === null) return error;
  const { hint, code, message } = error as { hint?: unknown; code?: unknown; message?: unknown };
  if (typeof hint === "string" && CODE.test(hint) && typeof code === "string" && typeof message === "string") {
    return new PgMemoryError(hint, code, message, { cause: error });
  }
  return error;
}

const SET_CLAIMS = "SELECT set_config('request.jwt.claims', $1, true)";

/**
 * Runs `text` in a transaction of its own as `claims` and returns its rows.
 * The claims are local to the transaction, so they never reach the next user
 * of the pooled connection; a connection whose ROLLBACK failed is destroyed,
 * never given back to the pool.
 */
export async function call<R extends QueryResultRow>(
  pool: Pool,
  claims: string,
  text: string,
  values: readonly unknown[],
  signal?: AbortSignal,
): Promise<R[]> {
  return transaction(pool, claims, signal, async (client) => (await client.query<R>(text, [...values])).rows);
}

/** Several statements in one transaction as `claims` (see `call`). */
export async function transaction<T>(
  pool: Pool,
  claims: string,
  signal: AbortSignal | undefined,
  body: (client: PoolClient) => Promise<T>,
): Promise<T> {
  signal?.throwIfAborted();
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    await client.query("BEGIN");
    await client.query(SET_CLAIMS, [claims]);
    const result = await body(client);
    await client.query("COMMIT");
    return result;
  } catch (error) {
    try {
      await client.query("ROLLBACK");
    } catch (rollback) {
      broken = rollback instanceof Error ? rollback : new Error(String(rollback));
    }
    throw translate(error);
  } finally {
    client.release(broken);
  }
}
