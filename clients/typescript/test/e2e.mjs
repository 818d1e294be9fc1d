// Drives a real hutch daemon with the generated client (run by
// TestTypeScriptClient in internal/api): HUTCH_URL is its TCP address,
// HUTCH_TOKEN its bearer token. Prints one line per check; exits non-zero
// on the first that fails.
import assert from "node:assert/strict";
import { createClient, HutchError } from "../index.js";

const baseUrl = process.env.HUTCH_URL;
const token = process.env.HUTCH_TOKEN;
assert.ok(baseUrl && token, "set HUTCH_URL and HUTCH_TOKEN");
const hutch = createClient({ baseUrl, token });
const conversation = { platform: "web", conversationId: "ts-client" };
const ok = (what) => console.log(`ok ${what}`);

const health = await hutch.health();
assert.equal(health.status, "ok");
assert.equal(health.mode, "host");
ok(`health: ${health.version} ${health.mode}`);

const version = await hutch.version();
assert.equal(typeof version.goVersion, "string");
assert.ok(version.goVersion.startsWith("go"));
ok(`version: ${version.version} ${version.goVersion}`);

const described = hutch.api.GET("/v1/openapi.json");
const { data: doc } = await described;
assert.equal(doc.openapi, "3.1.0");
ok("openapi.json");

// Host mode cannot isolate a conversation: trust this one first.
const { data: policy, error: doorErr } = await hutch.api.POST("/v1/door", { body: { conversation, policy: "shared" } });
assert.equal(doorErr, undefined);
assert.equal(policy.managedProjection, false);
ok(`door: ${policy.policy}`);

const run = await hutch.exec({ conversation, command: "echo hello; echo oops >&2; exit 3", timeoutSeconds: 30 });
assert.equal(new TextDecoder().decode(run.stdout), "hello\n");
assert.equal(new TextDecoder().decode(run.stderr), "oops\n");
assert.equal(run.result.exitCode, 3);
assert.equal(run.result.stdoutBytes, 6);
ok(`exec: exit ${run.result.exitCode}`);

const frames = [];
for await (const f of hutch.execFrames({ conversation, argv: ["cat"], stdin: "from stdin" })) frames.push(f);
assert.deepEqual(frames.at(-1).result.exitCode, 0);
assert.equal(Buffer.from(frames[0].data, "base64").toString(), "from stdin");
ok(`exec frames: ${frames.length}`);

const bytes = new Uint8Array([0, 1, 2, 255, 10, 104, 105]);
const written = await hutch.writeFile({ platform: "web", conversationId: "ts-client", path: "dir/blob.bin", mode: "0600" }, bytes);
assert.equal(written.bytes, bytes.length);
const back = await hutch.readFile({ conversation, path: "dir/blob.bin" });
assert.deepEqual(back, bytes);
ok(`files: wrote and read ${written.bytes} bytes at ${written.path}`);

const { data: entries } = await hutch.api.POST("/v1/files/list", { body: { conversation, path: "dir" } });
assert.deepEqual(entries.map((e) => e.name), ["blob.bin"]);
ok("files list");

// A bad request: a typed error with the API's code.
await assert.rejects(
  () => hutch.exec({ conversation, argv: ["", "-c", "true"] }),
  (e) => e instanceof HutchError && e.status === 400 && e.code === "invalid" && e.message === "argv[0] is empty: name the program to run",
);
const { error, response } = await hutch.api.POST("/v1/files/stat", { body: { conversation, path: "missing.txt" } });
assert.equal(response.status, 404);
assert.equal(error.code, "not_found");
ok("errors: 400 invalid, 404 not_found");

// Without the token: 401 unauthorized.
const anonymous = createClient({ baseUrl });
await assert.rejects(
  () => anonymous.health(),
  (e) => e instanceof HutchError && e.status === 401 && e.code === "unauthorized",
);
const wrong = createClient({ baseUrl, token: "wrong" });
await assert.rejects(() => wrong.version(), (e) => e instanceof HutchError && e.status === 401);
ok("401 without the token");
