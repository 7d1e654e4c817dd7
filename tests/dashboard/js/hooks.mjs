// Module hooks for the dashboard under Node (registered by browser.mjs). The dashboard has one module that is not a
// file: the server makes js/agent-names.js at start from its table of agent products (server/web/dashboard.py,
// server/agents.py). Here it is a stand-in holding a few of the real names; test_dashboard_js.py checks each one
// against that table.
const GENERATED = new URL("../../../server/dashboard/js/agent-names.js", import.meta.url).href;

export const AGENT_NAMES = {"claude-code": "Claude Code", "cursor": "Cursor", "gemini-cli": "Gemini CLI"};

export async function resolve(specifier, context, next) {
  if (context.parentURL?.startsWith("file:") && new URL(specifier, context.parentURL).href === GENERATED) {
    return { url: GENERATED, shortCircuit: true };
  }
  return next(specifier, context);
}

export async function load(url, context, next) {
  if (url === GENERATED) {
    return { format: "module", source: `export const AGENT_NAMES = ${JSON.stringify(AGENT_NAMES)};\n`, shortCircuit: true };
  }
  return next(url, context);
}
