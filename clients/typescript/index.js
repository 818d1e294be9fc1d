// A small wrapper over openapi-fetch for hutch's HTTP API. The types come
// from schema.d.ts, generated from internal/api/openapi.json; index.d.ts
// types this file. Any route can be called through client.api (typed
// paths, bodies and answers); the helpers below cover what JSON alone
// does not: the error shape as an exception, exec's stream of frames, and
// files' bytes.
import createFetchClient from "openapi-fetch";

/** An error answer of the API: its HTTP status, class code and text. */
export class HutchError extends Error {
  constructor(status, body) {
    super(body && typeof body.error === "string" ? body.error : `HTTP ${status}`);
    this.name = "HutchError";
    this.status = status;
    this.code = body && typeof body.code === "string" ? body.code : "internal";
  }
}

/** A client of the daemon at baseUrl (e.g. http://127.0.0.1:7878), with its bearer token. */
export function createClient({ baseUrl, token, fetch } = {}) {
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  const api = createFetchClient({ baseUrl, headers, ...(fetch ? { fetch } : {}) });
  return {
    api,
    health: async () => unwrap(await api.GET("/v1/health")),
    version: async () => unwrap(await api.GET("/v1/version")),
    execFrames: (body) => execFrames(api, body),
    exec: (body) => exec(api, body),
    readFile: async (body) => new Uint8Array(unwrap(await api.POST("/v1/files/read", { body, parseAs: "arrayBuffer" }))),
    writeFile: async (query, bytes) =>
      unwrap(
        await api.POST("/v1/files/write", {
          params: { query },
          body: bytes,
          bodySerializer: (b) => b,
          headers: { "Content-Type": "application/octet-stream" },
        }),
      ),
  };
}

/** The data of an openapi-fetch result, or its error as a HutchError. */
export function unwrap({ data, error, response }) {
  if (!response.ok) {
    throw new HutchError(response.status, error);
  }
  return data;
}

/** POST /v1/exec's frames, one at a time, as the command runs. */
export async function* execFrames(api, body) {
  const res = await api.POST("/v1/exec", { body, parseAs: "stream" });
  const stream = unwrap(res);
  const reader = stream.getReader();
  const decoder = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (value) buf += decoder.decode(value, { stream: true });
    let nl;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      if (line.trim() !== "") yield JSON.parse(line);
    }
    if (done) break;
  }
  if (buf.trim() !== "") yield JSON.parse(buf);
}

/** Runs a command to its end: its output (bytes) and result; an error answer or frame throws a HutchError. */
export async function exec(api, body) {
  const out = { stdout: [], stderr: [] };
  let result;
  for await (const f of execFrames(api, body)) {
    if (f.stream) out[f.stream].push(Buffer.from(f.data ?? "", "base64"));
    else if (f.error) throw new HutchError(200, f.error);
    else if (f.result) result = f.result;
  }
  if (!result) throw new HutchError(200, { error: "The answer ended without a result", code: "unavailable" });
  return { stdout: new Uint8Array(Buffer.concat(out.stdout)), stderr: new Uint8Array(Buffer.concat(out.stderr)), result };
}
