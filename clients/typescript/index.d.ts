import type { Client } from "openapi-fetch";
import type { components, paths } from "./schema.js";

export type { components, paths };
export type Schemas = components["schemas"];

/** An error answer of the API: its HTTP status, class code and text. */
export declare class HutchError extends Error {
  constructor(status: number, body?: Schemas["ErrorBody"]);
  readonly status: number;
  readonly code: Schemas["ErrorBody"]["code"];
}

export interface ClientOptions {
  /** Where the daemon listens, e.g. http://127.0.0.1:7878 (hutch serve --listen-tcp). */
  baseUrl: string;
  /** The bearer token: $HUTCH_API_TOKEN, or <state-dir>/api-token. */
  token?: string;
  fetch?: typeof globalThis.fetch;
}

export interface ExecOutput {
  stdout: Uint8Array;
  stderr: Uint8Array;
  result: Schemas["ExecResult"];
}

export interface HutchClient {
  /** Every route, typed from the OpenAPI description. */
  api: Client<paths>;
  health(): Promise<Schemas["Health"]>;
  version(): Promise<Schemas["Version"]>;
  execFrames(body: Schemas["ExecRequest"]): AsyncGenerator<Schemas["ExecFrame"]>;
  exec(body: Schemas["ExecRequest"]): Promise<ExecOutput>;
  readFile(body: Schemas["FileRequest"]): Promise<Uint8Array>;
  writeFile(
    query: paths["/v1/files/write"]["post"]["parameters"]["query"],
    bytes: Uint8Array | string,
  ): Promise<Schemas["WriteAnswer"]>;
}

export declare function createClient(options: ClientOptions): HutchClient;
export declare function unwrap<T>(result: { data?: T; error?: unknown; response: Response }): T;
export declare function execFrames(api: Client<paths>, body: Schemas["ExecRequest"]): AsyncGenerator<Schemas["ExecFrame"]>;
export declare function exec(api: Client<paths>, body: Schemas["ExecRequest"]): Promise<ExecOutput>;
