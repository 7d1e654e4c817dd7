// Icons drawn for Hivenote: one small original glyph per agent product (a hint of what it is, not its logo) on a
// coloured tile, and the interface's line icons. All built as SVG elements, never parsed from strings.
import { html } from "../vendor/htm-preact-3.1.1.standalone.module.js";
import { agentName } from "./util.js";

// [tile colour, glyph]. Glyphs are drawn on a 24×24 grid in white strokes.
const AGENTS = {
  // an arrow pointer
  cursor: ["#3b82f6", html`<path d="M8 6l9 6-4 1 2.5 4.5-2 1L11 14l-3 3z" fill="#fff" stroke="none" />`],
  // a prompt and a cursor bar: a coding agent in the terminal
  "claude-code": ["#d97757", html`<path d="M6 8l4 4-4 4M12 17h6" />`],
  // a speech bubble: a desktop chat app
  "claude-desktop": ["#c2410c", html`<path d="M6 7h12v8h-7l-4 3v-3H6z" />`],
  // braces
  codex: ["#10a37f", html`<path d="M10 6c-2 0-2 1-2 3s-1 3-2 3c1 0 2 1 2 3s0 3 2 3M14 6c2 0 2 1 2 3s1 3 2 3c-1 0-2 1-2 3s0 3-2 3" />`],
  // two linked circles (twins)
  "gemini-cli": ["#6366f1", html`<circle cx="9.5" cy="12" r="3.5" /><circle cx="14.5" cy="12" r="3.5" />`],
  // an editor window with a tag
  vscode: ["#0ea5e9", html`<rect x="5" y="6" width="14" height="12" rx="2" /><path d="M10 10l-2 2 2 2M14 10l2 2-2 2" />`],
  // a wave
  windsurf: ["#14b8a6", html`<path d="M5 14c2-3 4-3 6 0s4 3 6 0M5 10c2-3 4-3 6 0s4 3 6 0" />`],
  // a zig-zag bolt
  zed: ["#64748b", html`<path d="M7 7h10L7 17h10" />`],
  // a single line through a dot
  cline: ["#8b5cf6", html`<path d="M6 17L18 7" /><circle cx="12" cy="12" r="2" fill="#fff" />`],
  // a play-forward chevron pair
  continue: ["#22c55e", html`<path d="M7 7l5 5-5 5M12 7l5 5-5 5" />`],
  // an open square bracket pair
  opencode: ["#f59e0b", html`<path d="M9 6H6v12h3M15 6h3v12h-3" />`],
  // a sprout
  junie: ["#84cc16", html`<path d="M12 18v-6M12 12c0-3 2-5 5-5 0 3-2 5-5 5zM12 14c0-2-2-4-5-4 0 2 2 4 5 4z" />`],
  // a shell dollar
  cli: ["#475569", html`<path d="M15 8.5c-.5-1-1.7-1.5-3-1.5-1.7 0-3 .9-3 2.2 0 3 6 1.6 6 4.6 0 1.3-1.3 2.2-3 2.2-1.4 0-2.6-.6-3-1.6M12 5v14" />`],
  // a 2×2 grid
  dashboard: ["#f5a524", html`<rect x="6" y="6" width="5" height="5" rx="1" /><rect x="13" y="6" width="5" height="5" rx="1" /><rect x="6" y="13" width="5" height="5" rx="1" /><rect x="13" y="13" width="5" height="5" rx="1" />`],
  // an arrow into a tray
  import: ["#0891b2", html`<path d="M12 5v9M8 10l4 4 4-4M6 15v3h12v-3" />`],
};
const OTHER = ["#94a3b8", html`<circle cx="12" cy="12" r="5" /><circle cx="12" cy="12" r="1" fill="#fff" />`];

export function AgentIcon({ agent, size = 20 }) {
  const [colour, glyph] = (Object.hasOwn(AGENTS, agent) && AGENTS[agent]) || OTHER; // own keys: see agentName
  return html`<svg class="agent-icon" width=${size} height=${size} viewBox="0 0 24 24" role="img"
      aria-label=${agentName(agent)}>
    <title>${agentName(agent)}</title>
    <rect width="24" height="24" rx="6" fill=${colour} />
    <g fill="none" stroke="#fff" stroke-width="1.8" stroke-linecap="round" stroke-linejoin="round">${glyph}</g>
  </svg>`;
}

// Interface icons: 24×24, drawn with the current text colour.
const PATHS = {
  notes: html`<path d="M7 4h8l4 4v12H7z" /><path d="M15 4v4h4M10 12h6M10 16h6" />`,
  trash: html`<path d="M5 7h14M10 7V5h4v2M7 7l1 13h8l1-13M10 11v5M14 11v5" />`,
  agents: html`<circle cx="9" cy="9" r="3" /><path d="M3.5 19c.8-3 3-4.5 5.5-4.5s4.7 1.5 5.5 4.5" /><circle cx="17" cy="8" r="2.5" /><path d="M16 13.5c2.3 0 4 1.3 4.6 3.8" />`,
  graph: html`<circle cx="6" cy="7" r="2.5" /><circle cx="18" cy="7" r="2.5" /><circle cx="12" cy="17" r="2.5" /><path d="M8.2 8.3l2.6 6.4M15.8 8.3l-2.6 6.4M8.5 7h7" />`,
  transfer: html`<path d="M8 4v12M4 8l4-4 4 4M16 20V8M12 16l4 4 4-4" />`,
  settings: html`<circle cx="12" cy="12" r="3" /><path d="M12 3v3M12 18v3M3 12h3M18 12h3M5.6 5.6l2.1 2.1M16.3 16.3l2.1 2.1M5.6 18.4l2.1-2.1M16.3 7.7l2.1-2.1" />`,
  plug: html`<path d="M9 3v5M15 3v5M7 8h10v3a5 5 0 0 1-10 0zM12 16v5" />`,
  search: html`<circle cx="11" cy="11" r="6" /><path d="M20 20l-4.5-4.5" />`,
  plus: html`<path d="M12 5v14M5 12h14" />`,
  close: html`<path d="M6 6l12 12M18 6L6 18" />`,
  edit: html`<path d="M5 19h4L19 9l-4-4L5 15zM13 7l4 4" />`,
  restore: html`<path d="M4 12a8 8 0 1 0 2.4-5.7M4 4v4h4" />`,
  history: html`<circle cx="12" cy="12" r="8" /><path d="M12 8v4l3 2" />`,
  copy: html`<rect x="8" y="8" width="11" height="11" rx="2" /><path d="M5 15V5h10" />`,
  check: html`<path d="M5 12.5l4.5 4.5L19 7.5" />`,
  download: html`<path d="M12 4v11M7 10l5 5 5-5M5 19h14" />`,
  upload: html`<path d="M12 16V5M7 10l5-5 5 5M5 19h14" />`,
  key: html`<circle cx="8" cy="15" r="4" /><path d="M11 12l8-8M16 7l2 2M14 9l2 2" />`,
  wifi: html`<path d="M4 9a12 12 0 0 1 16 0M7 12.5a7.5 7.5 0 0 1 10 0M10 16a3 3 0 0 1 4 0" /><circle cx="12" cy="19" r="1" />`,
  sync: html`<path d="M5 10a7 7 0 0 1 12-3l2 2M19 14a7 7 0 0 1-12 3l-2-2M19 5v4h-4M5 19v-4h4" />`,
  arrow: html`<path d="M5 12h14M13 6l6 6-6 6" />`,
};

export function Icon({ name, size = 18 }) {
  return html`<svg class="icon" width=${size} height=${size} viewBox="0 0 24 24" aria-hidden="true" fill="none"
      stroke="currentColor" stroke-width="1.8" stroke-linecap="round" stroke-linejoin="round">${PATHS[name]}</svg>`;
}

export function Logo({ size = 28 }) {
  return html`<svg width=${size} height=${size} viewBox="0 0 32 32" aria-hidden="true">
    <path d="M16 2.5 27.7 9.25v13.5L16 29.5 4.3 22.75V9.25Z" fill="#f5a524" />
    <path d="M11 12h10M11 16h10M11 20h6" stroke="#1f1300" stroke-width="2.2" stroke-linecap="round" />
  </svg>`;
}
