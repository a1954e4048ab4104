// The rig of the tests: this file's database on the embedded server (started
// by scripts/test.mjs), pools for its logins, eve's own memory machinery, and
// handler contexts shaped as eve builds them.
import { execFileSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { basename } from "node:path";

import type {
  MemoryOperationContext,
  MemoryProvider,
  MemoryRecallResult,
  MemoryToolSet,
  MemoryToolsContext,
  MemoryTurnCompletedContext,
  MemoryTurnStartedContext,
} from "eve/memory";
import type { ToolContext } from "eve/tools";
import pg from "pg";

type ModelMessage = MemoryOperationContext["messages"][number];

interface Rig {
  host: string;
  port: number;
  databases: Record<string, string>;
}

function rig(): Rig {
  const raw = process.env["PGMEMORY_EVE_TEST"];
  if (raw === undefined) throw new Error("run the tests with `npm test` (scripts/test.mjs starts the server)");
  return JSON.parse(raw) as Rig;
}

export const PYTHON = process.env["PGMEMORY_PYTHON"] ?? "python3";

/** Runs Python code with the project's Python and returns what it printed. */
export function python(code: string, ...args: string[]): string {
  return execFileSync(PYTHON, ["-c", code, ...args], { encoding: "utf8" });
}

/** Pools on the test file's own database: `postgres` (superuser), `eve_service` (trusted), `eve_app` (never the service). */
export class Database {
  readonly name: string;
  readonly superuser: pg.Pool;
  readonly service: pg.Pool;
  readonly app: pg.Pool;
  private readonly pools: pg.Pool[] = [];

  constructor(testFile: string) {
    const { host, port, databases } = rig();
    const name = databases[basename(testFile)];
    if (name === undefined) throw new Error(`no database for ${testFile}`);
    this.name = name;
    this.superuser = this.pool("postgres");
    this.service = this.pool("eve_service");
    this.app = this.pool("eve_app");
    this.host = host;
    this.port = port;
  }

  readonly host: string;
  readonly port: number;

  /** A libpq connection string for `user` on this database (for Python). */
  dsn(user: string): string {
    return `postgresql://${user}@/${this.name}?host=${encodeURIComponent(this.host)}&port=${this.port}`;
  }

  pool(user: string, max = 4): pg.Pool {
    const { host, port } = rig();
    const pool = new pg.Pool({ host, port, user, database: this.name, max });
    this.pools.push(pool);
    return pool;
  }

  /** One statement as the service (no claims, trusted login): its rows. */
  async asService<R extends pg.QueryResultRow = pg.QueryResultRow>(text: string, values: unknown[] = []): Promise<R[]> {
    return (await this.service.query<R>(text, values)).rows;
  }

  /** One statement as `user` (claims set in a transaction of its own): its rows. */
  async asUser<R extends pg.QueryResultRow = pg.QueryResultRow>(
    user: string,
    text: string,
    values: unknown[] = [],
  ): Promise<R[]> {
    const client = await this.app.connect();
    try {
      await client.query("BEGIN");
      await client.query("SELECT set_config('request.jwt.claims', $1, true)", [
        JSON.stringify({ sub: user, role: "authenticated" }),
      ]);
      const rows = (await client.query<R>(text, values)).rows;
      await client.query("COMMIT");
      return rows;
    } catch (error) {
      await client.query("ROLLBACK");
      throw error;
    } finally {
      client.release();
    }
  }

  /** A new user of `org` with the given permissions (read by default). */
  async member(org: string, ...permissions: string[]): Promise<string> {
    const user = randomUUID();
    for (const permission of permissions.length === 0 ? ["memory.read"] : permissions) {
      await this.asService("SELECT memory.grant($1, $2, $3)", [org, user, permission]);
    }
    return user;
  }

  async close(): Promise<void> {
    await Promise.all(this.pools.map((pool) => pool.end()));
  }
}

// ------------------------------------------------------------------ eve's own machinery

// eve's internal memory state (not a public export): the real scope-key
// derivation, recall validation and supersession, so the tests run what eve
// runs. Pinned to the eve version in package.json.
interface MemoryLock {
  readonly scope: { readonly key: string; readonly namespace: string; readonly value: string | readonly string[] };
  readonly slot: string;
  readonly namespaceKey: string;
  readonly scopeKey: string;
}
interface MemoryState {
  createMemoryLock(input: {
    namespace: string;
    scope: string | readonly string[];
    slot: string;
    turn: { id: string; input: readonly ModelMessage[]; sequence: number };
    visibility: "scope" | "session";
  }): MemoryLock;
  validateMemoryRecallResult(result: MemoryRecallResult, slot: string): readonly unknown[];
  applyMemoryRecallBatches(input: {
    batches: { lock: MemoryLock; messages: readonly unknown[]; operationId: string }[];
    history: readonly ModelMessage[];
    state: Record<string, unknown> | undefined;
  }): { history: ModelMessage[]; recalledMessages: ModelMessage[]; state: Record<string, unknown> };
  projectMemoryHistory(input: { locks: Record<string, MemoryLock>; messages: readonly ModelMessage[] }): ModelMessage[];
}

export const eveMemoryState = (await import(
  new URL("../node_modules/eve/dist/src/shared/memory-state.js", import.meta.url).href
)) as MemoryState;

/** A session as eve would run it for one caller: a slot's lock and the contexts of its handlers. */
export class Session {
  readonly id: string;
  readonly slot: string;
  readonly lock: MemoryLock;
  history: ModelMessage[] = [];
  state: Record<string, unknown> | undefined = undefined;
  private sequence = 0;

  constructor(principal: string, options: { slot?: string; namespace?: string; id?: string } = {}) {
    this.id = options.id ?? `session_${randomUUID()}`;
    this.slot = options.slot ?? "pgmemory";
    this.lock = eveMemoryState.createMemoryLock({
      namespace: options.namespace ?? "memns-test",
      scope: ["tenant-1", principal],
      slot: this.slot,
      turn: { id: "turn_0", input: [], sequence: 0 },
      visibility: "scope",
    });
  }

  get scopeKey(): string {
    return this.lock.scope.key;
  }

  private session(turnId: string, sequence: number) {
    return {
      id: this.id,
      auth: { current: null, initiator: null },
      turn: { id: turnId, sequence },
    };
  }

  private base(turnId: string, sequence: number, phase: string) {
    return {
      session: this.session(turnId, sequence),
      getSandbox: (): never => {
        throw new Error("no sandbox in these tests");
      },
      abortSignal: new AbortController().signal,
      messages: eveMemoryState.projectMemoryHistory({ locks: { [this.slot]: this.lock }, messages: this.history }),
      operationId: `eve-memory-operation-v1:${this.id}:${sequence}:${turnId}:${phase}:${this.slot}`,
      memory: { scope: this.lock.scope, slot: this.slot },
    };
  }

  /** The context of `recall["turn.started"]` for a new turn whose person says `text`. */
  turnStarted(text: string): MemoryTurnStartedContext {
    this.sequence += 1;
    const turnId = `turn_${this.sequence}`;
    const input = [userMessage(text)];
    return {
      ...this.base(turnId, this.sequence, "turn.started"),
      turn: { id: turnId, input, sequence: this.sequence },
    };
  }

  /** Commits a recall's result to the history the way eve does (throws as eve throws on a bad or changed replay). */
  commitRecall(ctx: MemoryTurnStartedContext, result: MemoryRecallResult): void {
    const messages = eveMemoryState.validateMemoryRecallResult(result, this.slot);
    const applied = eveMemoryState.applyMemoryRecallBatches({
      batches: [{ lock: this.lock, messages, operationId: ctx.operationId }],
      history: this.history,
      state: this.state,
    });
    this.history = applied.history;
    this.state = applied.state;
  }

  /** Ends the turn of `started`: its input and `replies` join the history; the context of `capture["turn.completed"]`. */
  turnCompleted(started: MemoryTurnStartedContext, replies: ModelMessage[]): MemoryTurnCompletedContext {
    this.history = [...this.history, ...started.turn.input, ...replies];
    return { ...this.base(started.turn.id, started.turn.sequence, "turn.completed"), turn: started.turn };
  }

  /** The context of `tools()` for the turn of `started`. */
  toolsContext(started: MemoryTurnStartedContext): MemoryToolsContext {
    return {
      abortSignal: new AbortController().signal,
      model: { id: "test/model" },
      session: { id: this.id, auth: { current: null, initiator: null } },
      channel: {},
      memory: { scope: this.lock.scope, slot: this.slot },
      turn: started.turn,
    } as MemoryToolsContext;
  }

  /** What the model sees of the slot's recalled records now (eve's projection). */
  recalled(): string[] {
    return eveMemoryState
      .projectMemoryHistory({ locks: { [this.slot]: this.lock }, messages: this.history })
      .filter((m) => Reflect.get(m, "kind") === "memory.load")
      .map((m) => m.content as string);
  }
}

export function userMessage(text: string): ModelMessage {
  return { role: "user", content: text, kind: "user" } as ModelMessage;
}

export function assistantMessage(text: string): ModelMessage {
  return { role: "assistant", content: [{ type: "text", text }] };
}

/** Calls one of the provider's tools as eve would: the tool set of `ctx`, the tool's `execute`. */
export async function runTool(
  provider: MemoryProvider,
  ctx: MemoryToolsContext,
  name: string,
  input: Record<string, unknown>,
): Promise<unknown> {
  const tools: MemoryToolSet | null = await provider.tools!(ctx);
  if (tools === null) throw new Error("the provider offered no tools");
  const tool = tools[name];
  if (tool === undefined) throw new Error(`no tool ${name}`);
  const toolCtx = { abortSignal: new AbortController().signal } as ToolContext;
  return (tool.execute as (input: unknown, ctx: ToolContext) => Promise<unknown>)(input, toolCtx);
}

/** The error a promise rejects with (fails when it resolves). */
export async function rejection(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error("expected a rejection");
}
