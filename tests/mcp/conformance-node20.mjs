// Lets npm's @modelcontextprotocol/conformance (0.1.16) run on Node.js 20,
// the machines' Node: its CLI imports `globSync` from `fs` (Node 22+) for
// its `tier-check` command alone, and on Node 20 that import stops the
// whole CLI before it starts. Loaded with `node --import`, this gives the
// suite's `fs` a `globSync` that throws; the client scenarios never call it.
// On a Node that has `fs.globSync` it does nothing.
import fs from "node:fs";
import { register } from "node:module";

if (typeof fs.globSync !== "function") {
  const shim = `import fs from "node:fs";
export * from "node:fs";
export default fs;
export function globSync() {
  throw new Error("fs.globSync needs Node.js 22 (the conformance suite's tier-check)");
}`;
  const shimUrl = `data:text/javascript,${encodeURIComponent(shim)}`;
  const hooks = `export async function resolve(specifier, context, next) {
  if ((specifier === "fs" || specifier === "node:fs")
      && context.parentURL?.includes("/@modelcontextprotocol/conformance/")) {
    return { url: ${JSON.stringify(shimUrl)}, shortCircuit: true };
  }
  return next(specifier, context);
}`;
  register(`data:text/javascript,${encodeURIComponent(hooks)}`);
}
