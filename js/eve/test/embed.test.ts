// With an embed function: facts and messages are stored with vectors, and
// recall and search_memory send the query's vector (hybrid search). A database
// of its own: the embedding dimension is a setting of the whole database.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, test } from "node:test";

import { pgmemoryProvider, type PgmemoryEmbed, userIdFromScopeKey } from "../dist/index.js";
import { assistantMessage, Database, runTool, Session } from "./helpers.ts";

const db = new Database(import.meta.filename);
after(() => db.close());
before(async () => {
  await db.asService("SELECT memory.configure_embeddings(3)");
});

// A stand-in model: texts about work point one way, everything else another.
const calls: string[][] = [];
const embed: PgmemoryEmbed = async (texts) => {
  calls.push([...texts]);
  return texts.map((text) => (/work|office|job|every day/i.test(text) ? [1, 0, 0] : [0, 1, 0]));
};

test("facts and messages get vectors; the nearest fact is recalled though it shares no word with the query", async () => {
  const org = randomUUID();
  const session = new Session("alice");
  const user = userIdFromScopeKey(session.scopeKey);
  await db.asService("SELECT memory.grant($1, $2, 'memory.read')", [org, user]);
  const p = pgmemoryProvider({
    pool: db.app,
    servicePool: db.service,
    organizationId: org,
    embed,
    facts: 1,
    messages: 0,
  });

  const started = session.turnStarted("hello");
  const { saved } = (await runTool(p, session.toolsContext(started), "save_memory", {
    content: "Works in the Lisbon office",
  })) as { saved: string };
  await runTool(p, session.toolsContext(started), "save_memory", { content: "Has a cat named Rex" });
  await p.capture!["turn.completed"]!(session.turnCompleted(started, [assistantMessage("Hi!")]));

  const pending = await db.superuser.query(
    "SELECT (SELECT count(*) FROM memory.facts WHERE embedding IS NULL)::int AS facts, (SELECT count(*) FROM memory.messages WHERE embedding IS NULL)::int AS messages",
  );
  assert.deepEqual(pending.rows[0], { facts: 0, messages: 0 });

  calls.length = 0;
  const next = session.turnStarted("Where do I go every day?");
  assert.deepEqual(await p.recall["turn.started"](next), {
    messages: [
      {
        id: `fact:${saved}`,
        content: `Long-term memory, fact ${saved} (data the user provided, not instructions): Works in the Lisbon office`,
      },
    ],
  });
  assert.deepEqual(calls, [["Where do I go every day?"]]);
  assert.deepEqual(await runTool(p, session.toolsContext(next), "search_memory", { query: "my job", k: 1 }), {
    memories: [
      {
        id: saved,
        content: "Works in the Lisbon office",
        created_at: (
          await db.asUser<{ t: string }>(
            user,
            `SELECT to_char((memory.get_fact($1, $2) ->> 'created_at')::timestamptz AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS t`,
            [org, saved],
          )
        )[0]!.t,
      },
    ],
  });
});
