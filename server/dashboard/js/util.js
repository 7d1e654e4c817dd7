// Small pure helpers shared by the views: names, relative times, provenance lines.

// Served by the server from its one table of agent products (server/agents.py); not a file in this folder.
import { AGENT_NAMES } from "./agent-names.js";

export const KINDS = ["fact", "decision", "preference", "project"];

// The time filter of the notes and the history: each choice is the since/until the server reads (in its local time
// zone, server/core/timewindow.py); the answer's `window.text` says the window it used.
export const WHEN = {
  today: { since: "today" },
  yesterday: { since: "yesterday", until: "yesterday" },
  "24h": { since: "24h" },
  week: { since: "this week" },
  "7d": { since: "7d" },
  month: { since: "this month" },
  "30d": { since: "30d" },
};
export const WHEN_LABELS = {
  today: "Today",
  yesterday: "Yesterday",
  "24h": "Last 24 hours",
  week: "This week",
  "7d": "Last 7 days",
  month: "This month",
  "30d": "Last 30 days",
};
export const whenName = (key) => (Object.hasOwn(WHEN_LABELS, key) ? WHEN_LABELS[key] : key);
export const whenQuery = (key) => (Object.hasOwn(WHEN, key) ? WHEN[key] : {});

// Agent ids come from any machine's shard, so they may be "constructor" or "__proto__": look up own keys only.
export function agentName(agent) {
  return (Object.hasOwn(AGENT_NAMES, agent) && AGENT_NAMES[agent]) || agent || "unknown";
}

/** The hostname part of a node id (`laptop-7f3a` -> `laptop`), as the server's render.machine does. */
export function machine(node) {
  if (!node) return "";
  const cut = node.lastIndexOf("-");
  return cut > 0 && node.length - cut - 1 === 4 ? node.slice(0, cut) : node;
}

// A shard may carry any non-negative integer as a time (another machine's clock, a hand-edited line): JavaScript
// dates end at ±8.64e15 ms, and formatting one beyond that throws "Invalid time value", which would blank a view.
const LAST_DATE_MS = 8.64e15;
const UNKNOWN_TIME = "at an unknown time";

export function knownTime(ms) {
  return typeof ms === "number" && Number.isFinite(ms) && Math.abs(ms) <= LAST_DATE_MS;
}

/** For <time datetime=...>: the ISO form, or nothing for a time no date can hold. */
export function isoTime(ms) {
  return knownTime(ms) ? new Date(ms).toISOString() : undefined;
}

/** 'just now', '5 minutes ago', '3 days ago' (a future stamp from a skewed clock reads 'just now'). */
export function ago(thenMs, nowMs = Date.now()) {
  if (!knownTime(thenMs)) return UNKNOWN_TIME;
  const seconds = Math.max(0, Math.floor((nowMs - thenMs) / 1000));
  for (const [unit, size] of [
    ["year", 31536000],
    ["month", 2592000],
    ["day", 86400],
    ["hour", 3600],
    ["minute", 60],
  ]) {
    if (seconds >= size) {
      const count = Math.floor(seconds / size);
      return `${count} ${unit}${count === 1 ? "" : "s"} ago`;
    }
  }
  return "just now";
}

export function when(ms) {
  if (!knownTime(ms)) return `${UNKNOWN_TIME} (${ms})`;
  return new Date(ms).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
}

/** "Claude Code · ana · laptop" for a note's writer ({agent, person, node}). */
export function who(by) {
  const parts = [agentName(by.agent)];
  if (by.person) parts.push(by.person);
  if (by.node) parts.push(machine(by.node));
  return parts.join(" · ");
}

/** The first words of a Markdown body as plain text, for a card (rendered as a text node, never as HTML). */
export function preview(body, length = 240) {
  const text = body
    .replace(/```[\s\S]*?```/g, " ")
    .replace(/[#>*_`~[\]]+/g, "")
    .replace(/\(https?:[^)]*\)/g, "")
    .replace(/\s+/g, " ")
    .trim();
  return text.length > length ? `${text.slice(0, length).trimEnd()}…` : text;
}

/** "1 note", "3 notes"; a word whose plural is not word + "s" names it: plural(n, "match", "matches"). */
export function plural(count, word, many = `${word}s`) {
  return `${count.toLocaleString()} ${count === 1 ? word : many}`;
}

/** Which key of a snippet's `where` map fits the OS this browser runs on. */
export function thisOs() {
  const platform = (navigator.userAgentData?.platform || navigator.platform || navigator.userAgent).toLowerCase();
  if (platform.includes("mac")) return "macos";
  if (platform.includes("win")) return "windows";
  return "linux";
}
