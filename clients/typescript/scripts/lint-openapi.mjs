// Lints an OpenAPI description with Redocly's structural rules (the
// "minimal" ruleset: the document's structure against the OpenAPI 3.1
// specification, unresolved references, ...): warnings are printed,
// errors fail. hack/ts-client and go test ./internal/api run it on
// internal/api/openapi.json.
import { createConfig, lint } from "@redocly/openapi-core";

const ref = process.argv[2];
if (!ref) {
  console.error("usage: node scripts/lint-openapi.mjs FILE");
  process.exit(2);
}
// no-unused-components is off: ExecFrame is used by x-itemSchema (OpenAPI
// 3.2's itemSchema, which 3.1 lacks), where the linter does not look.
const config = await createConfig({ extends: ["minimal"], rules: { "no-unused-components": "off" } });
const problems = await lint({ ref, config });
for (const p of problems) {
  console.log(`${p.severity} ${p.ruleId}: ${p.message} (${p.location?.[0]?.pointer ?? ""})`);
}
process.exit(problems.some((p) => p.severity === "error") ? 1 : 0);
