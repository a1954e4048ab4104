// The slot files of examples/ compile against eve's real types (and this
// package's), and a broken one does not: the check has teeth. The generated
// tool definitions match the Python package's.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { dirname, join } from "node:path";
import { test } from "node:test";

import { PYTHON } from "./helpers.ts";

const root = join(dirname(import.meta.filename), "..");
const tsc = join(root, "node_modules", "typescript", "bin", "tsc");

function typecheck(project: string): { status: number | null; output: string } {
  const run = spawnSync(process.execPath, [tsc, "-p", project, "--pretty", "false"], { cwd: root, encoding: "utf8" });
  return { status: run.status, output: run.stdout + run.stderr };
}

test("the sample agent/memory slot files typecheck against eve's types", () => {
  const { status, output } = typecheck("examples/tsconfig.json");
  assert.equal(output, "");
  assert.equal(status, 0);
});

test("a slot file that breaks eve's contract or this package's options does not", () => {
  const { status, output } = typecheck("test/fixtures/tsconfig.json");
  assert.notEqual(status, 0);
  const errors = output.split("\n").filter((line) => line.startsWith("test/fixtures/"));
  assert.deepEqual(
    errors.map((line) => line.split(": error ")[0]),
    ["test/fixtures/broken-slot.ts(8,41)", "test/fixtures/broken-slot.ts(13,53)"],
  );
  assert.match(
    output,
    /Property 'content' is missing in type '\{ text: string; \}' but required in type 'MemoryRecallMessage'/,
  );
});

test("src/definitions.ts is what scripts/definitions.py writes from the Python package", () => {
  const run = spawnSync(PYTHON, [join(root, "scripts", "definitions.py"), "--check"], { encoding: "utf8" });
  assert.equal(run.stderr, "");
  assert.equal(run.status, 0);
});
