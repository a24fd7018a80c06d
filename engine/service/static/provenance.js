// The service's answers as one model the page draws: blocks of pieces, each piece a run of output
// text with where it came from (its provenance) and, when the source is in an editor, the range
// of the editor's text it maps to.
//
// model = {blocks: [{title, pieces: [{text, cls, label, info, target}]}], table?, diagnostics,
//          stats, exportable}
// target = {editor: "source" | "inputs", start, end} (UTF-16 indices into that editor's text)

import { utf16Index } from "./editor.js";
import { rangeOf, stringSubrange } from "./jsonpos.js";

// Colour classes and their legend names.
export const CATEGORIES = {
  preset: "preset prompt", character: "character card", persona: "persona", world_info: "world info",
  author_note: "author's note", history: "chat history", input: "new message", macro: "macro output",
  variable: "variable read", literal: "template text", ejs_output: "EJS output tag", ejs_code: "EJS code",
  story: "story string", stop: "stop string", other: "other",
};

function piece(text, cls, label, info, target) {
  return { text, cls, label, info: info || {}, target: target || null };
}

// --- macros ------------------------------------------------------------------------------------

export function macrosModel(answer, source) {
  const text = answer.text ?? "";
  const pieces = [];
  let out = 0;
  let src = 0;
  const t16 = (i) => utf16Index(text, i);
  const s16 = (i) => utf16Index(source, i);
  const literal = (from, to, sfrom, sto) => {
    if (to > from) {
      pieces.push(piece(text.slice(t16(from), t16(to)), "literal", "template text",
        { kind: "literal", source: "the template" },
        sto > sfrom ? { editor: "source", start: s16(sfrom), end: s16(sto) } : null));
    }
  };
  for (const seg of answer.segments || []) {
    literal(out, seg.start, src, seg.source_start);
    const isVar = seg.kind === "variable";
    const info = { kind: seg.kind, macro: "{{" + seg.macro + "}}", source: source.slice(s16(seg.source_start), s16(seg.source_end)) };
    if (seg.reads) info.reads = seg.reads.map((r) => r.scope + "." + r.name).join(", ");
    if (isVar) info.variable = seg.scope + "." + seg.name;
    pieces.push(piece(text.slice(t16(seg.start), t16(seg.end)), isVar ? "variable" : "macro",
      isVar ? `variable ${seg.scope}.${seg.name} read by {{${seg.macro}}}` : `macro {{${seg.macro}}}`, info,
      { editor: "source", start: s16(seg.source_start), end: s16(seg.source_end) }));
    out = seg.end;
    src = seg.source_end;
  }
  literal(out, [...text].length, src, [...source].length);
  const diagnostics = (answer.diagnostics || []).map((d) => ({
    code: d.code, message: d.message, severity: d.severity || "warning", editor: "source",
    line: d.line, column: d.column, width: (d.end ?? d.start + 1) - d.start,
  }));
  return { blocks: pieces.length ? [{ title: null, pieces }] : [], diagnostics, exportable: answer,
    size: { chars: text.length }, variables: answer.variables };
}

// --- EJS ---------------------------------------------------------------------------------------

const EJS_KIND = { text: ["literal", "template text"], output: ["ejs_output", "<%- %> output tag"],
  escaped: ["ejs_output", "<%= %> output tag"], code: ["ejs_code", "printed by a <% %> code tag"] };

export function ejsModel(answer, source) {
  const text = answer.text ?? "";
  const diagnostics = [];
  if (answer.error) {
    const e = answer.error;
    diagnostics.push({ code: e.code, message: e.message, severity: "error", editor: "source",
      line: e.line, column: e.column, width: 1 });
  }
  const pieces = [];
  if (answer.provenance && answer.provenance.spans) {
    const t16 = (i) => utf16Index(text, i);
    const s16 = (i) => utf16Index(source, i);
    let at = 0;
    for (const span of answer.provenance.spans) {
      if (span.start > at) pieces.push(piece(text.slice(t16(at), t16(span.start)), "other", "unattributed", {}));
      const [cls, what] = EJS_KIND[span.kind] || ["other", span.kind];
      const src = source.slice(s16(span.source_start), s16(span.source_end));
      pieces.push(piece(text.slice(t16(span.start), t16(span.end)), cls, what,
        { kind: span.kind, tag: src.length > 200 ? src.slice(0, 200) + "…" : src, at: `${span.line}:${span.column}` },
        { editor: "source", start: s16(span.source_start), end: s16(span.source_end) }));
      at = span.end;
    }
    if ([...text].length > at) pieces.push(piece(text.slice(t16(at)), "other", "unattributed", {}));
  } else if (text) {
    pieces.push(piece(text, "literal", "rendered text",
      { note: answer.provenance && answer.provenance.reason ? answer.provenance.reason : "no per-tag provenance" }));
  }
  const reads = (answer.reads || []).map((r) => Object.entries(r).map(([k, v]) => `${k}: ${typeof v === "string" ? v : JSON.stringify(v)}`).join(", "));
  return { blocks: pieces.length ? [{ title: null, pieces }] : [], diagnostics, exportable: answer,
    size: { chars: text.length }, usage: answer.usage, reads };
}

// --- world info --------------------------------------------------------------------------------

export function entryPath(books, bookName, uid, bookIndexHint) {
  if (!Array.isArray(books)) return null;
  let j = books.findIndex((b) => b && ((b.book && b.book.name) || b.name) === bookName);
  if (j < 0) j = bookIndexHint ?? (books.length === 1 ? 0 : -1);
  if (j < 0 || !books[j]) return null;
  const wrapped = books[j].book && !books[j].entries;
  const book = wrapped ? books[j].book : books[j];
  const base = `$.books[${j}]` + (wrapped ? ".book" : "");
  const entries = book && book.entries;
  if (Array.isArray(entries)) {
    const k = entries.findIndex((e) => e && e.uid === uid);
    return k >= 0 ? `${base}.entries[${k}]` : null;
  }
  if (entries && typeof entries === "object") {
    const key = Object.keys(entries).find((k) => entries[k] && entries[k].uid === uid) ??
      (String(uid) in entries ? String(uid) : null);
    if (key === null) return null;
    return /^[A-Za-z_][A-Za-z0-9_]*$|^[0-9]+$/.test(key) ? `${base}.entries.${key}` : `${base}.entries[${JSON.stringify(key)}]`;
  }
  return null;
}

function bookEntries(book) {
  // the book's entries in its own order (an object's keys as written, or a list's items)
  const entries = book && book.entries;
  if (Array.isArray(entries)) return entries.filter((e) => e && typeof e === "object");
  if (entries && typeof entries === "object") return Object.values(entries).filter((e) => e && typeof e === "object");
  return [];
}

function entryPieces(text, outlet, activated, byUid) {
  // an outlet's text (the activated entries joined with newlines) as one piece per entry, where each entry's text
  // is found; text that is no entry's content as written (expanded macros) stays the outlet's
  const found = [];
  for (const a of activated) {
    const entry = byUid.get(a.uid);
    const content = entry && typeof entry.content === "string" ? entry.content.trim() : "";
    const at = content ? text.indexOf(content) : -1;
    if (at >= 0) found.push({ at, a, entry, content });
  }
  found.sort((x, y) => x.at - y.at);
  const pieces = [];
  let cursor = 0;
  for (const { at, a, entry, content } of found) {
    if (at < cursor) continue;
    if (at > cursor) pieces.push(piece(text.slice(cursor, at), "world_info", `the "${outlet}" outlet`, { outlet }));
    const name = entry.comment ? ` (${entry.comment})` : "";
    pieces.push(piece(content, "world_info", `entry ${a.uid}${name}`, { outlet, book: a.book, uid: a.uid }));
    cursor = at + content.length;
  }
  if (cursor < text.length) pieces.push(piece(text.slice(cursor), "world_info", `the "${outlet}" outlet`, { outlet }));
  return pieces;
}

export function worldinfoModel(answer, book, sourceRanges) {
  const entries = bookEntries(book);
  const order = new Map(entries.map((e, i) => [e.uid, i]));
  const byUid = new Map(entries.map((e) => [e.uid, e]));
  // the trace in book order (the activation's own order is its evaluation order)
  const rows = [...(answer.trace || [])].sort((a, b) => (order.get(a.uid) ?? Infinity) - (order.get(b.uid) ?? Infinity));
  const diagnostics = [];
  const table = rows.map((row) => {
    const path = entryPath([book], row.book, row.uid, 0);
    const local = path ? path.replace(/^\$\.books\[0\]/, "$") : null;
    const r = local ? rangeOf(sourceRanges, local) : null;
    return { row, target: r ? { editor: "source", start: r.keyStart ?? r.start, end: r.end } : null };
  });
  const pieces = [];
  const outlets = ["before", "after"];
  for (const name of outlets) {
    if (answer[name]) pieces.push(...entryPieces(answer[name], name, answer.activated || [], byUid));
  }
  for (const name of ["an_top", "an_bottom", "em_top", "em_bottom"]) {
    for (const text of answer[name] || []) pieces.push(piece(text, "world_info", `the ${name} outlet`, { outlet: name }));
  }
  for (const d of answer.at_depth || []) {
    pieces.push(piece(typeof d === "string" ? d : d.content ?? JSON.stringify(d), "world_info", "at depth", d));
  }
  return { blocks: pieces.length ? [{ title: "Activated text", pieces }] : [], table, diagnostics,
    exportable: answer, size: { chars: pieces.reduce((n, p) => n + p.text.length, 0), entries: rows.length,
      fired: rows.filter((r) => r.outcome === "activated").length } };
}

// --- assemble ----------------------------------------------------------------------------------

// ST-Prompt-Template's output: a world-info entry getwi read, or the template's own text, output tag or code.
const TEMPLATE_TOKEN = { text: "literal", output: "ejs_output", escaped: "ejs_output", code: "ejs_code" };

function category(span) {
  if (span.kind === "world_info") return "world_info";
  if (span.kind === "template_output") return span.book !== undefined ? "world_info" : TEMPLATE_TOKEN[span.token] || "ejs_output";
  if (span.kind === "variable_read") return "variable";
  if (span.kind === "macro_output" || span.kind === "literal_macro") return "macro";
  if (span.field === "authorsNote") return "author_note";
  const rule = span.rule_id || span.source_id;
  if (rule in CATEGORIES) return rule;
  return "other";
}

function spanLabel(span) {
  const where = span.field ? ` (prompt ${span.field})` : "";
  switch (span.kind) {
    case "world_info":
      return `world info: book "${span.book}", entry ${span.uid}${span.comment ? ` "${span.comment}"` : ""}${where}`;
    case "macro_output":
    case "literal_macro":
      return `macro {{${span.macro}}}${where}`;
    case "variable_read":
      return `variable ${span.scope}.${span.name} read by {{${span.macro}}}`;
    case "macro":
      return `{{${span.macro}}}: ${span.rule_id} ${span.field || ""}`.trim();
    case "template_output": {
      const at = span.line ? ` at ${span.line}:${span.column}` : "";
      const what = span.book !== undefined
        ? `world info: book "${span.book}", entry ${span.uid}${span.comment ? ` "${span.comment}"` : ""}, read by getwi`
        : `template of ${span.template}`;
      return span.token && span.token !== "entry" ? `${what}: EJS ${span.token}${at}` : what;
    }
    default:
  }
  if (span.native_message_id) return `${span.rule_id === "input" ? "new message" : "chat history"} ${span.native_message_id}`;
  if (span.rule_id === "preset") return `preset prompt ${span.field}`;
  return [span.rule_id, span.field].filter(Boolean).join(" ");
}

// The JSON paths in the request a span's text may have come from, most precise first.
function candidatePaths(span, request) {
  const out = [];
  if (!request || typeof request !== "object") return out;
  if (span.kind === "world_info" || (span.kind === "template_output" && span.book !== undefined)) {
    const p = entryPath(request.books, span.book, span.uid);
    if (p) out.push(p + ".content", p);
    return out;
  }
  const chat = span.native_message_id && /^chat-(\d+)$/.exec(span.native_message_id);
  if (chat) {
    out.push(`$.chat.messages[${chat[1]}].content`, `$.chat.messages[${chat[1]}]`);
    return out;
  }
  const field = span.field;
  if (field === "authorsNote") out.push("$.author_note.content");
  if (span.rule_id === "persona") out.push("$.user.persona.description", "$.user.persona");
  if (span.rule_id === "character" && field) out.push(`$.card.data.${field}`, `$.card.${field}`);
  if (span.rule_id === "preset" && field) {
    const prompts = request.preset && Array.isArray(request.preset.prompts) ? request.preset.prompts : [];
    const k = prompts.findIndex((p) => p && p.identifier === field);
    if (k >= 0) out.push(`$.preset.prompts[${k}].content`, `$.preset.prompts[${k}]`);
    out.push(`$.preset.${field}`, `$.card.data.${field}`, `$.card.${field}`);
  }
  return out;
}

// Where in the request text `span` (whose output text is `text`) came from.
function assembleTarget(span, text, request, ranges, inputsText, nth) {
  for (const path of candidatePaths(span, request)) {
    const r = ranges.get(path);
    if (!r) continue;
    if (inputsText[r.start] === '"') {
      let decoded;
      try { decoded = JSON.parse(inputsText.slice(r.start, r.end)); } catch { decoded = null; }
      if (typeof decoded === "string") {
        let needle = null;
        if (span.kind === "macro_output" || span.kind === "variable_read" || span.kind === "macro") {
          needle = "{{" + span.macro;
        } else if (!span.kind && text.trim()) {
          needle = text;
        }
        if (needle) {
          let at = -1;
          for (let k = 0; k <= (nth[needle] || 0); k++) {
            at = decoded.indexOf(needle, at + 1);
            if (at < 0) break;
          }
          if (at < 0) at = decoded.indexOf(needle);
          if (at >= 0) {
            nth[needle] = (nth[needle] || 0) + 1;
            let end = at + needle.length;
            if (needle.startsWith("{{")) {
              const close = decoded.indexOf("}}", at);
              end = close >= 0 ? close + 2 : end;
            }
            return { editor: "inputs", path, ...stringSubrange(inputsText, r.start, at, end) };
          }
        }
      }
    }
    return { editor: "inputs", path, start: r.start, end: r.end };
  }
  return null;
}

export function assembleModel(answer, request, ranges, inputsText, sendBox) {
  const usePost = answer.provenance_of && answer.provenance_of !== "messages" && answer.logical_messages;
  const messages = usePost ? answer.logical_messages : answer.messages || [];
  const byIndex = new Map((answer.provenance || []).map((p) => [p.index, p.spans]));
  const blocks = [];
  messages.forEach((message, index) => {
    const content = typeof message.content === "string" ? message.content : JSON.stringify(message.content);
    const spans = byIndex.get(index) || [];
    const pieces = [];
    let at = 0;
    const c16 = (i) => utf16Index(content, i);
    const nthByBlock = {};
    for (const span of spans) {
      if (span.start > at) pieces.push(piece(content.slice(c16(at), c16(span.start)), "other", "unattributed", {}));
      const text = content.slice(c16(span.start), c16(span.end));
      const nth = (nthByBlock[span.block_id || ""] ||= {});
      let target = assembleTarget(span, text, request, ranges, inputsText, nth);
      if (!target && span.rule_id === "input" && sendBox) target = { editor: "source", start: 0, end: sendBox.length };
      const info = { ...span };
      delete info.start; delete info.end;
      if (target && target.path) info.source_path = target.path;
      pieces.push(piece(text, category(span), spanLabel(span), info, target));
      at = span.end;
    }
    if ([...content].length > at) pieces.push(piece(content.slice(c16(at)), "other", "unattributed", {}));
    blocks.push({ title: message.role + (message.name ? " · " + message.name : ""), pieces });
  });
  const diagnostics = (answer.warnings || []).map((w) => (typeof w === "string"
    ? { code: "WARNING", message: w, severity: "warning" }
    : { code: w.code || "WARNING", message: w.message || JSON.stringify(w), severity: w.severity || "warning", path: w.path }));
  const chars = messages.reduce((n, m) => n + (typeof m.content === "string" ? m.content.length : 0), 0);
  return { blocks, diagnostics, exportable: answer.body ?? answer, size: { chars, messages: messages.length },
    budget: answer.budget, note: usePost ? "provenance of the messages before post-processing" : null,
    trace: answer.trace };
}

// --- text completion ---------------------------------------------------------------------------

// The prompt's sources (text_completion.to_dict's provenance): what each names, and its colour.
const PROMPT_PARTS = {
  story_string: ["story", "story string (context template)"], chat_start: ["literal", "chat start (context template)"],
  user_alignment: ["literal", "user alignment message (instruct template)"],
  post_history: ["preset", "post-history instructions"], quiet_prompt: ["input", "quiet prompt"],
  prompt_line: ["literal", "last prompt line (instruct template)"], continued: ["history", "the message continued"],
};
const IN_CHAT = [["2_floating_prompt", "author_note"], ["customDepthWI", "world_info"],
  ["PERSONA_DESCRIPTION", "persona"], ["DEPTH_PROMPT", "character"], ["__STORY_STRING__", "story"]];

function promptPart(source) {
  if (source in PROMPT_PARTS) return PROMPT_PARTS[source];
  let m = /^example\[(\d+)\]$/.exec(source);
  if (m) return ["character", `example dialogue ${Number(m[1]) + 1} (card)`];
  m = /^chat\[(\d+)\]$/.exec(source);
  if (m) return ["history", `chat message ${m[1]}`];
  if (source.startsWith("in-chat:")) {
    const keys = source.slice(8).split("+");
    const hit = IN_CHAT.find(([key]) => keys[0].startsWith(key));
    return [hit ? hit[1] : "other", "placed in the chat at a depth: " + keys.join(", ")];
  }
  return ["other", source];
}

// The request's JSON text a chat message's span came from ($.chat.messages[i].content).
function chatTarget(source, ranges) {
  const m = /^chat\[(\d+)\]$/.exec(source);
  if (!m || !ranges) return null;
  for (const path of [`$.chat.messages[${m[1]}].content`, `$.chat[${m[1]}].content`]) {
    const r = ranges.get(path);
    if (r) return { editor: "inputs", path, start: r.start, end: r.end };
  }
  return null;
}

// A text-completion answer: the prompt as one block of its sources, then the stop strings.
export function textCompletionModel(answer, ranges) {
  const prompt = answer.prompt ?? "";
  const pieces = []; // the provenance's offsets are UTF-16, as the prompt string here
  let at = 0;
  for (const span of answer.provenance || []) {
    if (span.start > at) pieces.push(piece(prompt.slice(at, span.start), "other", "unattributed", {}));
    const [cls, label] = promptPart(span.source);
    pieces.push(piece(prompt.slice(span.start, span.end), cls, label, { source: span.source },
      chatTarget(span.source, ranges)));
    at = span.end;
  }
  if (prompt.length > at) pieces.push(piece(prompt.slice(at), "other", "unattributed", {}));
  const stops = (answer.stop || []).map((s, i) => piece(JSON.stringify(s) + "\n", "stop", `stop string ${i + 1}`,
    { stop: JSON.stringify(s) }));
  const templates = answer.templates || {};
  const title = "text-completion prompt · " + ["instruct", "context", "sysprompt"]
    .map((k) => `${k} ${templates[k] == null ? "off" : templates[k] || "inline"}`).join(", ");
  const blocks = [{ title, pieces }, { title: `stop strings (${stops.length})`, pieces: stops }];
  const diagnostics = (answer.warnings || []).map((w) => ({ code: w.code || "WARNING", message: w.message || String(w),
    severity: w.severity || "warning", path: w.path }));
  return { blocks, diagnostics, exportable: answer, size: { chars: prompt.length }, budget: undefined };
}
