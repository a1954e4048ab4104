// `npm test`: starts pgmemory's embedded server (through the project's Python),
// gives each test file a database of its own with the extension, runs the
// test files with node's test runner, and stops the server whatever happened.
//
// PGMEMORY_PYTHON names the Python that has pgmemory installed (default: the
// repository's .venv, else python3). Run `npm run build` first: the tests
// import the compiled package from dist/.
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const venvPython = resolve(root, "../../.venv/bin/python");
const python = process.env.PGMEMORY_PYTHON || (existsSync(venvPython) ? venvPython : "python3");

const major = Number(process.versions.node.split(".")[0]);
if (major < 24) {
  console.error(`pgmemory-eve's tests need Node >= 24 (eve does), this is ${process.version}`);
  process.exit(1);
}

const files = readdirSync(join(root, "test"))
  .filter((name) => name.endsWith(".test.ts"))
  .sort();
const databases = files.map((name) => `eve_${name.replace(/\.test\.ts$/, "").replaceAll(/[^a-z0-9]/g, "_")}`);
// Short path: the server's unix socket lives in the data directory.
const dataDir = join(tmpdir(), "pgmemory", `eve-${process.pid}`);
const server = join(root, "scripts", "server.py");

const up = spawnSync(python, [server, "up", dataDir, ...databases], {
  cwd: root,
  encoding: "utf8",
  stdio: ["ignore", "pipe", "inherit"],
});
if (up.status !== 0) {
  console.error(`could not start the embedded server with ${python} (${up.error?.message ?? `exit ${up.status}`})`);
  spawnSync(python, [server, "down", dataDir], { stdio: "inherit" });
  process.exit(1);
}

let status = 1;
try {
  const connection = JSON.parse(up.stdout.trim().split("\n").at(-1));
  const run = spawnSync(
    process.execPath,
    ["--test", "--test-concurrency=2", ...files.map((name) => join("test", name))],
    {
      cwd: root,
      stdio: "inherit",
      env: {
        ...process.env,
        PGMEMORY_EVE_TEST: JSON.stringify({
          ...connection,
          databases: Object.fromEntries(files.map((f, i) => [f, databases[i]])),
        }),
        PGMEMORY_PYTHON: python,
      },
    },
  );
  status = run.status ?? 1;
} finally {
  spawnSync(python, [server, "down", dataDir], { stdio: "inherit" });
}
process.exit(status);
