// The README's example, type-checked by hack/ts-client (tsc --noEmit).
import { createClient, HutchError } from "./index.js";

export async function example(token: string): Promise<void> {
  const hutch = createClient({ baseUrl: "http://127.0.0.1:7878", token });
  const conversation = { platform: "web", conversationId: "demo" } as const;
  const { stdout, result } = await hutch.exec({ conversation, command: "echo hello" });
  console.log(new TextDecoder().decode(stdout), result.exitCode);
  try {
    await hutch.readFile({ conversation, path: "missing.txt" });
  } catch (e) {
    if (e instanceof HutchError) console.log(e.status, e.code, e.message);
  }
}
