// Drives a hutch MCP server with the official TypeScript SDK, as a Node
// MCP client would: bash with onprogress sees notifications/progress with
// growing byte counts, and a call aborted with an AbortSignal (which the
// SDK turns into notifications/cancelled) kills the command's process
// group, which another bash call then checks.
//
// TestTSSDK (progress_ts_test.go) runs it, with one of
//   HUTCH_MCP_URL=<streamable HTTP endpoint, naming the conversation>
//   HUTCH_MCP_COMMAND=<hutch binary> HUTCH_MCP_ARGS=<JSON array of args>
// (for stdio, the child gets PATH and HUTCH_STATE_DIR from this process).
// It prints what it saw and exits 0, or prints why not and exits 1.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

function transport() {
  const { HUTCH_MCP_URL: url, HUTCH_MCP_COMMAND: command, HUTCH_MCP_ARGS: args } = process.env;
  if (url) {
    return new StreamableHTTPClientTransport(new URL(url));
  }
  if (command) {
    return new StdioClientTransport({
      command,
      args: JSON.parse(args ?? '[]'),
      env: { PATH: process.env.PATH, HUTCH_STATE_DIR: process.env.HUTCH_STATE_DIR ?? '' },
      stderr: 'inherit',
    });
  }
  throw new Error('set HUTCH_MCP_URL or HUTCH_MCP_COMMAND');
}

function check(ok, what) {
  if (!ok) {
    throw new Error(what);
  }
}

const textOf = (res) => res.content.map((c) => c.text ?? '').join('');

const client = new Client({ name: 'hutch-ts-sdk-test', version: '1.0.0' });
await client.connect(transport());
try {
  const { tools } = await client.listTools();
  check(tools.some((t) => t.name === 'bash'), `no bash tool among ${tools.map((t) => t.name)}`);

  // Progress: a command that writes a line every half second.
  const seen = [];
  const res = await client.callTool(
    { name: 'bash', arguments: { command: 'for i in 1 2 3 4 5 6; do echo "step $i of 6"; sleep 0.5; done' } },
    undefined,
    { onprogress: (p) => seen.push(p) },
  );
  check(!res.isError, `bash failed: ${textOf(res)}`);
  check(textOf(res).endsWith('step 6 of 6'), `bash returned ${JSON.stringify(textOf(res))}`);
  check(seen.length >= 2, `${seen.length} progress notifications in a 3 s command: ${JSON.stringify(seen)}`);
  for (let i = 0; i < seen.length; i++) {
    const p = seen[i];
    check(i === 0 || p.progress > seen[i - 1].progress, `progress did not grow: ${JSON.stringify(seen)}`);
    check(/^\d+(\.\d)? (B|KiB|MiB) of output; last line: step \d of 6$/.test(p.message), `message ${JSON.stringify(p.message)}`);
    check(p.total === undefined, `total ${p.total}, want none`);
  }
  console.log(`progress: ${seen.map((p) => `${p.progress} (${p.message})`).join(', ')}`);

  // Cancellation: a command with a background child; once progress shows
  // it started, abort the call.
  const controller = new AbortController();
  let aborted;
  const long = client
    .callTool(
      { name: 'bash', arguments: { command: 'echo $$ > leader.pid; sleep 600 & echo $! > child.pid; echo started; wait' } },
      undefined,
      {
        signal: controller.signal,
        timeout: 120000,
        onprogress: (p) => {
          if (p.message.endsWith('last line: started')) {
            controller.abort('the test gives up');
          }
        },
      },
    )
    .then(
      (r) => check(false, `the aborted call returned ${textOf(r)}`),
      (err) => {
        aborted = err;
      },
    );
  await long;
  check(aborted !== undefined, 'the aborted call did not fail');
  console.log(`aborted: ${aborted}`);

  // Both processes of the command's group are gone (a zombie awaiting its
  // reaper counts as gone). bash runs one command of a conversation at a
  // time, so this runs once the cancelled call has ended.
  const gone = await client.callTool({
    name: 'bash',
    arguments: {
      command: `state() { [ -r /proc/$1/stat ] && sed 's/.*) //' /proc/$1/stat | cut -d' ' -f1; }
leader=$(cat leader.pid); child=$(cat child.pid)
for i in $(seq 100); do
  l=$(state $leader); c=$(state $child)
  if { [ -z "$l" ] || [ "$l" = Z ]; } && { [ -z "$c" ] || [ "$c" = Z ]; }; then echo gone; exit 0; fi
  sleep 0.1
done
echo "still running: leader $leader ($l), child $child ($c)"`,
    },
  });
  check(!gone.isError && textOf(gone) === 'gone', `after the abort: ${textOf(gone)}`);
  console.log('process group: gone');
} finally {
  await client.close();
}
