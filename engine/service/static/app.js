// The playground page: editors, the run loop, and drawing results with their provenance.

import { ApiError, adoptTokenFromUrl, call, hasToken, setToken } from "./api.js";
import { diffModels } from "./diff.js";
import { Editor, caretSnippet, offsetOfLineCol } from "./editor.js";
import { JsonPosError, lineCol, parseWithPositions, rangeOf } from "./jsonpos.js";
import { CATEGORIES, assembleModel, ejsModel, macrosModel, textCompletionModel, worldinfoModel } from "./provenance.js";
import { readFile, requestPartOf } from "./files.js";
import { SAMPLES } from "./samples.js";

const $ = (id) => document.getElementById(id);
const el = (tag, props, ...children) => {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("data-") || k.startsWith("aria-") || k === "role" || k === "tabindex" || k === "title") node.setAttribute(k, v);
    else node[k] = v;
  }
  node.append(...children.filter((c) => c !== null && c !== undefined));
  return node;
};

const MODES = {
  macros: {
    source: "Template (SillyTavern macros)",
    sourceHelp: "Text with {{macros}}. The output shows which macro or variable produced each part.",
    inputs: "Inputs: JSON object with context, card, seed",
    inputsHelp: "context: names, persona, chat, variables…; card: a character card; seed: for {{random}} and {{roll}}.",
    libKind: { source: "templates", inputs: "chats" },
  },
  ejs: {
    source: "EJS template",
    sourceHelp: "ST-Prompt-Template EJS. The inputs' variables are `variables` here; getvar() reads them.",
    inputs: "Inputs: JSON object with variables (and mvu, world_books, activated, preset, card)",
    inputsHelp: "variables: the template's data; mvu, world_books, activated, preset, card: what getvar, getwi, getpreset and getchar read.",
    libKind: { source: "templates", inputs: "mvu" },
  },
  worldinfo: {
    source: "World book (JSON)",
    sourceHelp: "One SillyTavern world book: {name, entries}. The trace explains every entry.",
    inputs: "Inputs: JSON object with chat, settings, max_context",
    inputsHelp: "chat: messages (strings or {role, content}), newest last; settings: SillyTavern's world_info_* settings.",
    libKind: { source: "books", inputs: "chats" },
  },
  assemble: {
    source: "Send box: the user's new message (empty: none)",
    sourceHelp: "What is typed in SillyTavern's send box; sent as generation.input.",
    inputs: "Request JSON: preset, card, books, user, chat, author_note, world_info, options",
    inputsHelp: "The request file of tavernbox assemble --request. Any asset may be a library ref: {\"ref\": \"presets/my-preset\"}; " +
      "the library panel saves the request's preset, card, first book, chat or persona, and loading one puts its ref in place.",
    libKind: { source: "templates", inputs: "presets" },
    libTarget: "inputs",
  },
};

const state = { mode: "macros", drafts: {}, model: null, pinned: null, seq: 0, timer: null, sourceRanges: null,
  inputsRanges: null, selected: null };
let source;
let inputs;

function pretty(value) { return JSON.stringify(value, null, 2); }

function loadDraft(mode) {
  const saved = state.drafts[mode];
  const sample = SAMPLES[mode];
  const src = saved ? saved.source : typeof sample.source === "string" ? sample.source : pretty(sample.source);
  const inp = saved ? saved.inputs : pretty(sample.inputs);
  source.value = src;
  inputs.value = inp;
}

function saveDraft() {
  state.drafts[state.mode] = { source: source.value, inputs: inputs.value };
  try { sessionStorage.setItem("tavernbox.drafts", JSON.stringify(state.drafts)); } catch { /* full: keep in memory */ }
}

function setMode(mode, keepText) {
  if (!keepText) saveDraft();
  state.mode = mode;
  $("mode").value = mode;
  const m = MODES[mode];
  $("source-label").textContent = m.source;
  $("source-help").textContent = m.sourceHelp;
  $("inputs-label").textContent = m.inputs;
  $("inputs-help").textContent = m.inputsHelp;
  $("lib-target").value = m.libTarget || "source";
  $("lib-kind").value = m.libKind[$("lib-target").value];
  document.body.dataset.mode = mode;
  if (!keepText) loadDraft(mode);
  state.pinned = null;
  drawDiff();
  run();
}

// --- running -----------------------------------------------------------------------------------

function schedule() {
  saveDraft();
  if (!$("live").checked) return;
  clearTimeout(state.timer);
  state.timer = setTimeout(run, 350);
}

function jsonDiagnostic(err, editorName, text) {
  const pos = lineCol(text, err.offset ?? 0);
  return { code: "INPUT_JSON_INVALID", message: `the ${editorName} is not JSON: ${err.message}`, severity: "error",
    editor: editorName, line: pos.line, column: pos.column, width: 1, utf16: true };
}

// Where a service error or diagnostic with a JSON path points: an editor and a range.
function placePath(path) {
  if (!path) return null;
  const mode = state.mode;
  if (mode === "worldinfo" && path.startsWith("$.books[0]")) {
    const local = "$" + path.slice("$.books[0]".length);
    const r = rangeOf(state.sourceRanges, local);
    return r ? { editor: "source", start: r.keyStart ?? r.start, end: r.end } : null;
  }
  if ((mode === "macros" || mode === "ejs") && path === "$.template") return { editor: "source", start: 0, end: 0 };
  if (mode === "assemble" && path.startsWith("$.generation.input")) return { editor: "source", start: 0, end: source.value.length };
  const r = rangeOf(state.inputsRanges, path);
  return r ? { editor: "inputs", start: r.keyStart ?? r.start, end: r.end } : null;
}

function errorModel(error, mode) {
  const d = { code: error.code, message: error.message, severity: "error", path: error.path };
  // a JSON path places it in the inputs (or the book); a line and column are the template's
  if (!error.path && error.line && (mode === "macros" || mode === "ejs")) {
    Object.assign(d, { editor: "source", line: error.line, column: error.column, width: 1 });
  } else if (!error.path && error.line) {
    d.message += ` (at ${error.line}:${error.column} of the text it concerns)`;
  }
  return { blocks: [], diagnostics: [d], exportable: { error }, size: {} };
}

async function run() {
  clearTimeout(state.timer);
  const seq = ++state.seq;
  const mode = state.mode;
  const src = source.value;
  const inp = inputs.value;
  let parsedInputs;
  try {
    parsedInputs = parseWithPositions(inp);
    state.inputsRanges = parsedInputs.ranges;
  } catch (err) {
    if (!(err instanceof JsonPosError)) throw err;
    state.inputsRanges = null;
    show({ blocks: [], diagnostics: [jsonDiagnostic(err, "inputs", inp)], size: {} }, mode, null);
    return;
  }
  const given = parsedInputs.value;
  if (!given || typeof given !== "object" || Array.isArray(given)) {
    show({ blocks: [], diagnostics: [{ code: "INPUT_JSON_INVALID", message: "the inputs must be a JSON object",
      severity: "error", editor: "inputs", line: 1, column: 1, width: 1 }], size: {} }, mode, null);
    return;
  }
  let route;
  let body;
  let book = null;
  if (mode === "macros") {
    route = "/v1/macros";
    body = { ...given, template: src, trace: true };
  } else if (mode === "ejs") {
    route = "/v1/render";
    body = { ...given, template: src, provenance: true };
  } else if (mode === "worldinfo") {
    try {
      const parsed = parseWithPositions(src);
      state.sourceRanges = parsed.ranges;
      book = parsed.value;
    } catch (err) {
      if (!(err instanceof JsonPosError)) throw err;
      state.sourceRanges = null;
      show({ blocks: [], diagnostics: [jsonDiagnostic(err, "source", src)], size: {} }, mode, null);
      return;
    }
    route = "/v1/activate";
    body = { ...given, books: [book] };
  } else {
    route = "/v1/assemble";
    body = { ...given };
    if (src) body.generation = { ...(given.generation || {}), input: src };
  }
  setStatus("Running…");
  let answer;
  try {
    // the service's own memory figure (macros, world info, assemble run in its process; an EJS
    // render reports its sandbox's heap in its usage)
    const measure = $("measure").checked && mode !== "ejs" ? { "X-Tavernbox-Measure": "memory" } : undefined;
    answer = await call("POST", route, body, measure);
  } catch (err) {
    if (seq !== state.seq) return;
    if (err instanceof ApiError && err.status === 401) askToken("The service refused the token: paste the one it printed.");
    show(errorModel(err.error || { code: "NETWORK", message: String(err) }, mode), mode, null);
    return;
  }
  if (seq !== state.seq || mode !== state.mode) return;
  const data = answer.body;
  let model;
  if (data && data.error && !("text" in data)) {
    model = errorModel(data.error, mode);
  } else if (mode === "macros") {
    model = macrosModel(data, src);
  } else if (mode === "ejs") {
    model = ejsModel(data, src);
  } else if (mode === "worldinfo") {
    model = worldinfoModel(data, book, state.sourceRanges);
    for (const d of data.diagnostics || []) {
      model.diagnostics.push({ code: d.code, message: d.message, severity: d.severity || "warning", path: d.path });
    }
  } else if (data && typeof data.prompt === "string") {
    model = textCompletionModel(data, parsedInputs.ranges);
  } else {
    model = assembleModel(data, given, parsedInputs.ranges, inp, src);
  }
  model.ms = answer.ms;
  model.peakBytes = answer.peakBytes;
  model.refs = data && data.refs;
  show(model, mode, answer);
}

// --- drawing -----------------------------------------------------------------------------------

function setStatus(text) { $("status").textContent = text; }

function editorOf(name) { return name === "inputs" ? inputs : source; }

function fmtBytes(n) { return n >= 1048576 ? (n / 1048576).toFixed(1) + " MiB" : n >= 1024 ? (n / 1024).toFixed(1) + " KiB" : n + " B"; }

function drawStats(model) {
  const parts = [];
  if (model.ms !== undefined) parts.push(`round trip ${model.ms.toFixed(0)} ms`);
  if (model.usage) {
    if (model.usage.time_ms !== undefined) parts.push(`render ${model.usage.time_ms} ms`);
    if (model.usage.memory_bytes !== undefined) parts.push(`memory ${fmtBytes(model.usage.memory_bytes)}`);
  }
  if (model.peakBytes !== undefined) parts.push(`memory ${fmtBytes(model.peakBytes)} (service peak)`);
  const s = model.size || {};
  if (s.chars !== undefined) parts.push(`${s.chars} characters`);
  if (s.messages !== undefined) parts.push(`${s.messages} messages`);
  if (s.entries !== undefined) parts.push(`${s.fired} of ${s.entries} entries fired`);
  if (model.budget) {
    const b = model.budget;
    const dropped = b.dropped && b.dropped.tokens ? `, ${b.dropped.tokens} dropped` : "";
    parts.push(`budget ${b.used} of ${b.budget} tokens (${b.tokenizer}${dropped})`);
  } else if (model.budget === null) {
    parts.push("budget: everything fits (not counted)");
  }
  if (model.refs && model.refs.length) parts.push("refs " + model.refs.map((r) => `${r.kind}/${r.id}@${r.revision}`).join(", "));
  $("stats").textContent = parts.join(" · ");
}

function drawLegend(model) {
  const used = new Set();
  for (const b of model.blocks) for (const p of b.pieces) used.add(p.cls);
  const legend = $("legend");
  legend.textContent = "";
  for (const cls of Object.keys(CATEGORIES)) {
    if (used.has(cls)) legend.append(el("span", { class: "key piece-" + cls, text: CATEGORIES[cls] }));
  }
}

function pieceNodes(model) {
  const nodes = [];
  let first = true;
  model.blocks.forEach((block, b) => {
    const box = el("div", { class: "block" });
    if (block.title) box.append(el("div", { class: "block-title", text: block.title }));
    const body = el("div", { class: "block-text" });
    block.pieces.forEach((p, k) => {
      const span = el("span", { class: "piece piece-" + p.cls, text: p.text, tabindex: first ? "0" : "-1", role: "button",
        "data-block": String(b), "data-piece": String(k), "aria-label": p.label + ": " + p.text.slice(0, 80) });
      first = false;
      span._piece = p;
      body.append(span);
    });
    box.append(body);
    nodes.push(box);
  });
  return nodes;
}

function traceTable(model) {
  const table = el("table", { class: "trace", "data-testid": "trace" });
  table.append(el("caption", { text: "World-info trace: every entry, fired or why not" }));
  const head = el("tr", {});
  for (const h of ["Book", "Entry", "Comment", "Outcome", "Reason", "Detail", "Step"]) head.append(el("th", { scope: "col", text: h }));
  table.append(el("thead", {}, head));
  const tbody = el("tbody", {});
  model.table.forEach(({ row, target }, k) => {
    const tr = el("tr", { class: "trace-row outcome-" + row.outcome, tabindex: k === 0 && !model.blocks.length ? "0" : "-1",
      "data-uid": String(row.uid) });
    for (const v of [row.book, row.uid, row.comment || "", row.outcome, row.reason, row.detail || "", row.step ?? ""]) {
      tr.append(el("td", { text: String(v) }));
    }
    tr._piece = { text: "", cls: "world_info", label: `world info: book "${row.book}", entry ${row.uid}${row.comment ? ` "${row.comment}"` : ""}`,
      info: row, target };
    tbody.append(tr);
  });
  table.append(tbody);
  return table;
}

function show(model, mode, answer) {
  state.model = model;
  state.answer = answer;
  const out = $("output");
  out.textContent = "";
  if (model.note) out.append(el("p", { class: "help", text: model.note }));
  if (model.table) out.append(traceTable(model));
  out.append(...pieceNodes(model));
  if (!model.blocks.length && !model.table) {
    const failed = (model.diagnostics || []).some((d) => d.severity === "error");
    out.append(el("p", { class: "help", text: failed ? "No output: see the diagnostics." : "No output (the result is empty)." }));
  }
  if (model.reads && model.reads.length) {
    out.append(el("details", {}, el("summary", { text: `Reads (${model.reads.length})` }),
      el("ul", {}, ...model.reads.map((r) => el("li", { text: r })))));
  }
  if (model.table && model.blocks.length) {
    const rows = out.querySelectorAll(".trace-row");
    if (rows.length) rows[0].tabIndex = -1;
  }
  drawLegend(model);
  drawStats(model);
  drawDiagnostics(model.diagnostics || []);
  select(null);
  drawDiff();
  document.body.dataset.runs = String(Number(document.body.dataset.runs || 0) + 1);  // for tests and tools
  const n = (model.diagnostics || []).length;
  const what = model.table ? `${model.size.fired} of ${model.size.entries} entries fired` :
    `${model.size.chars ?? 0} characters`;
  setStatus(`${mode}: ${n ? n + " diagnostic" + (n > 1 ? "s" : "") + ", " : ""}${what}` +
    (model.ms !== undefined ? ` in ${model.ms.toFixed(0)} ms` : ""));
}

function diagnosticPlace(d) {
  if (d.editor && d.line) {
    const text = editorOf(d.editor).value;
    const start = d.utf16 ? offsetOfLineCol(text, d.line, 1) + d.column - 1 : offsetOfLineCol(text, d.line, d.column);
    return { editor: d.editor, line: d.line, column: d.column, start, width: d.width || 1 };
  }
  const placed = placePath(d.path);
  if (placed) {
    const text = editorOf(placed.editor).value;
    const pos = lineCol(text, placed.start);
    return { editor: placed.editor, line: pos.line, column: pos.column, start: placed.start,
      width: Math.max(1, Math.min(placed.end - placed.start, text.length)) };
  }
  return null;
}

function drawDiagnostics(list) {
  const ul = $("diagnostics");
  ul.textContent = "";
  for (const d of list) {
    const place = diagnosticPlace(d);
    const where = place ? `${place.line}:${place.column}` : "-";
    const li = el("li", { class: "diagnostic severity-" + (d.severity || "error"), "data-code": d.code,
      "data-line": place ? String(place.line) : "", "data-column": place ? String(place.column) : "" });
    const button = el("button", { type: "button", class: "diag-go" },
      el("span", { class: "code", text: d.code }), " ",
      el("span", { class: "where", text: (place ? (place.editor === "inputs" ? "inputs " : "") : "") + where }));
    if (!place) button.disabled = true;
    button.setAttribute("aria-label", `${d.code} at ${place ? (place.editor === "inputs" ? "inputs " : "") + "line " + place.line + " column " + place.column : "no position"}: ${d.message}. Press to go there.`);
    li.append(button, " ", el("span", { class: "message", text: d.message + (d.path ? ` (${d.path})` : "") }));
    if (place) {
      const snippet = el("pre", { class: "snippet", text: caretSnippet(editorOf(place.editor).value, place.line, place.column, Math.min(place.width, 80)) });
      li.append(snippet);
      button.addEventListener("click", () => {
        const ed = editorOf(place.editor);
        ed.highlight({ start: place.start, end: place.start + place.width });
        ed.select(place.start);
      });
    }
    ul.append(li);
  }
  if (!list.length) ul.append(el("li", { class: "none", text: "No diagnostics." }));
}

function select(node) {
  if (state.selected) state.selected.classList.remove("selected");
  state.selected = node;
  const panel = $("provenance");
  panel.textContent = "";
  source.highlight(null);
  inputs.highlight(null);
  if (!node) {
    panel.append(el("p", { class: "help", text: "Nothing selected." }));
    return;
  }
  node.classList.add("selected");
  const p = node._piece;
  panel.append(el("p", { class: "prov-label piece-" + p.cls, text: p.label }));
  const dl = el("dl", {});
  for (const [k, v] of Object.entries(p.info || {})) {
    if (v === null || v === undefined || v === "") continue;
    dl.append(el("dt", { text: k }), el("dd", { text: typeof v === "string" ? v : JSON.stringify(v) }));
  }
  panel.append(dl);
  if (p.target) {
    const ed = editorOf(p.target.editor);
    ed.highlight({ start: p.target.start, end: p.target.end });
    const pos = lineCol(ed.value, p.target.start);
    panel.append(el("p", { class: "help", text: `Highlighted in the ${p.target.editor === "inputs" ? "inputs" : "source"} editor at ${pos.line}:${pos.column}.` }));
  } else {
    panel.append(el("p", { class: "help", text: "Its source is not in the editors (a library asset or the engine)." }));
  }
}

function selectable(node) {
  return node && node._piece ? node : null;
}

function wireOutput() {
  const out = $("output");
  out.addEventListener("mouseover", (e) => { const n = selectable(e.target.closest(".piece, .trace-row")); if (n) select(n); });
  out.addEventListener("click", (e) => { const n = selectable(e.target.closest(".piece, .trace-row")); if (n) { n.focus(); select(n); } });
  out.addEventListener("focusin", (e) => { const n = selectable(e.target.closest(".piece, .trace-row")); if (n) select(n); });
  out.addEventListener("keydown", (e) => {
    const items = [...out.querySelectorAll(".piece, .trace-row")];
    const at = items.indexOf(document.activeElement);
    if (at < 0) return;
    let to = null;
    if (e.key === "ArrowRight" || e.key === "ArrowDown") to = Math.min(items.length - 1, at + 1);
    else if (e.key === "ArrowLeft" || e.key === "ArrowUp") to = Math.max(0, at - 1);
    else if (e.key === "Home") to = 0;
    else if (e.key === "End") to = items.length - 1;
    if (to === null) return;
    e.preventDefault();
    items[at].tabIndex = -1;
    items[to].tabIndex = 0;
    items[to].focus();
  });
}

// --- diff --------------------------------------------------------------------------------------

function drawDiff() {
  const box = $("diff");
  $("unpin").disabled = !state.pinned;
  if (!state.pinned || !state.model) {
    box.textContent = "";
    box.append(el("p", { class: "help", text: state.pinned ? "Waiting for a result…" :
      "Pin a result, change something (a new message, another preset), and the changes show here by source." }));
    return;
  }
  const result = diffModels(state.pinned, state.model);
  box.textContent = "";
  if (!result.changed) {
    box.append(el("p", { class: "diff-summary", text: "No change from the pinned result." }));
    return;
  }
  const ul = el("ul", { class: "diff-summary" });
  for (const s of result.summary) {
    if (s.was !== null) {
      ul.append(el("li", {}, el("span", { class: "relabelled", text: `${s.relabelled}` }),
        ` words now from ${s.label} (were from ${s.was})`));
    } else {
      ul.append(el("li", {}, el("span", { class: "added", text: `+${s.added}` }), " ",
        el("span", { class: "removed", text: `−${s.removed}` }), ` words: ${s.label}`));
    }
  }
  box.append(ul);
  const flow = el("div", { class: "diff-flow" });
  const runs = [];
  for (const r of result.runs) {  // unchanged text is one stretch, whatever its sources
    const last = runs[runs.length - 1];
    if (r.op === "same" && last && last.op === "same") last.text += r.text;
    else runs.push({ ...r });
  }
  for (const r of runs) {
    if (r.op === "same") {
      // long unchanged stretches are folded so the changes stay in view
      const fold = r.text.length > 240 ? `${r.text.slice(0, 100)} … ${r.text.length - 200} unchanged characters … ${r.text.slice(-100)}` : r.text;
      flow.append(el("span", { class: "same", text: fold, title: r.text.length > 240 ? "unchanged (folded)" : "unchanged" }));
    } else if (r.op === "relabel") {
      flow.append(el("span", { class: "relabel piece-" + r.cls, title: `now from ${r.label}, was from ${r.was}`, text: r.text }));
    } else {
      const tag = r.op === "add" ? "ins" : "del";
      flow.append(el(tag, { class: "piece-" + r.cls, title: (r.op === "add" ? "added, from " : "removed, was from ") + r.label, text: r.text }));
    }
  }
  box.append(flow);
}

// --- library -----------------------------------------------------------------------------------

function libStatus(text) { $("lib-status").textContent = text; }

async function refreshIds() {
  const kind = $("lib-kind").value;
  try {
    const answer = await call("GET", `/v1/library/${kind}`);
    const list = $("lib-ids");
    list.textContent = "";
    for (const item of (answer.body.items || [])) list.append(el("option", { value: item.id }));
  } catch { /* the list is a convenience */ }
}

// In assemble mode the library works on the request's parts: the preset, card, first book,
// chat or persona is what is saved, and loading one puts a ref to it in its place.
const PARTS = { presets: "preset", cards: "card", books: "books", chats: "chat", personas: "persona" };

function requestPart(kind) {
  if (state.mode !== "assemble" || $("lib-target").value !== "inputs" || !(kind in PARTS)) return null;
  let request;
  try { request = parseWithPositions(inputs.value).value; } catch { return { error: "the request is not JSON" }; }
  if (!request || typeof request !== "object" || Array.isArray(request)) return { error: "the request is not an object" };
  return { request, part: PARTS[kind] };
}

function partValue(request, part) {
  if (part === "books") {
    const first = Array.isArray(request.books) ? request.books[0] : undefined;
    return first && first.book && !first.entries ? first.book : first;
  }
  if (part === "persona") return request.user && request.user.persona;
  return request[part];
}

function setPart(request, part, value) {
  if (part === "books") {
    const books = Array.isArray(request.books) ? request.books : [];
    request.books = [value, ...books.slice(1)];
  } else if (part === "persona") {
    request.user = { ...(request.user || {}), persona: value };
  } else {
    request[part] = value;
  }
}

async function librarySave() {
  const target = $("lib-target").value;
  const kind = $("lib-kind").value;
  const id = $("lib-id").value.trim();
  const ed = editorOf(target);
  let doc;
  const part = requestPart(kind);
  if (part && part.error) { libStatus(`Not saved: ${part.error}.`); return; }
  if (part) {
    doc = partValue(part.request, part.part);
    if (doc === undefined || doc === null || (typeof doc === "object" && Object.keys(doc).length === 1 && "ref" in doc)) {
      libStatus(`Not saved: the request has no inline ${part.part} to save.`);
      return;
    }
  } else if (kind === "templates") doc = ed.value;
  else {
    try { doc = parseWithPositions(ed.value).value; } catch (err) {
      libStatus(`Not saved: the ${target} is not JSON (${err.message}).`);
      return;
    }
  }
  try {
    const answer = await call("PUT", `/v1/library/${kind}/${encodeURIComponent(id)}`, JSON.stringify(doc));
    if (answer.body.error) {
      const e = answer.body.error;
      libStatus(`Not saved: ${e.code} ${e.message}${e.path ? " at " + e.path : ""}`);
      return;
    }
    libStatus(`Saved ${kind}/${id} as revision ${answer.body.revision}.`);
    refreshIds();
  } catch (err) {
    libStatus(`Not saved: ${err.message}`);
  }
}

async function libraryLoad() {
  const target = $("lib-target").value;
  const kind = $("lib-kind").value;
  const id = $("lib-id").value.trim();
  try {
    const answer = await call("GET", `/v1/library/${kind}/${encodeURIComponent(id)}`);
    if (answer.body.error) {
      libStatus(`Not loaded: ${answer.body.error.code} ${answer.body.error.message}`);
      return;
    }
    const data = answer.body.data;
    const part = requestPart(kind);
    if (part && !part.error) {
      setPart(part.request, part.part, { ref: `${kind}/${id}` });
      inputs.value = pretty(part.request);
      libStatus(`The request's ${part.part} is now the ref ${kind}/${id} (revision ${answer.body.revision} today).`);
      schedule();
      return;
    }
    editorOf(target).value = typeof data === "string" ? data : pretty(data);
    libStatus(`Loaded ${kind}/${id} revision ${answer.body.revision} into the ${target}.`);
    schedule();
  } catch (err) {
    libStatus(`Not loaded: ${err.message}`);
  }
}

async function openFile(file, target) {
  // a file opened or dropped: in assemble mode an asset goes into its field of the request, else the editor takes it
  let read;
  try { read = await readFile(file); } catch (err) { libStatus(`Not opened: ${file.name}: ${err.message}`); return; }
  const part = target === "inputs" && state.mode === "assemble" ? requestPartOf(read.value, read.kind) : null;
  if (part) {
    let request;
    try { request = parseWithPositions(inputs.value).value; } catch { request = null; }
    if (request && typeof request === "object" && !Array.isArray(request)) {
      if (part === "books") request.books = [...(Array.isArray(request.books) ? request.books : []), read.value];
      else request[part] = read.value;
      inputs.value = pretty(request);
      libStatus(`Opened ${file.name} as the request's ${part === "books" ? "book " + request.books.length : part}.`);
      schedule();
      return;
    }
  }
  editorOf(target).value = typeof read.value === "string" ? read.value : pretty(read.value);
  libStatus(`Opened ${file.name} in the ${target}.`);
  schedule();
}

function exportResult() {
  if (!state.model || !state.model.exportable) { libStatus("Nothing to export yet: run first."); return; }
  const blob = new Blob([pretty(state.model.exportable) + "\n"], { type: "application/json" });
  const a = el("a", { href: URL.createObjectURL(blob), download: state.mode === "assemble" ? "assembled-request.json" : `${state.mode}-result.json` });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 1000);
  libStatus(state.mode === "assemble" ? "Exported the assembled request body." : "Exported the result.");
}

// --- token -------------------------------------------------------------------------------------

function askToken(message) {
  const form = $("token-form");
  form.hidden = false;
  if (message) setStatus(message);
}

function wireToken() {
  $("token-form").addEventListener("submit", (e) => {
    e.preventDefault();
    setToken($("token").value.trim());
    $("token").value = "";
    $("token-form").hidden = true;
    run();
    refreshIds();
  });
}

// --- start -------------------------------------------------------------------------------------

function start() {
  adoptTokenFromUrl();
  source = new Editor($("source"));
  inputs = new Editor($("inputs"));
  try { state.drafts = JSON.parse(sessionStorage.getItem("tavernbox.drafts") || "{}") || {}; } catch { state.drafts = {}; }
  wireToken();
  wireOutput();
  for (const [name, ed] of [["source", source], ["inputs", inputs]]) {
    ed.area.addEventListener("dragover", (e) => { if (e.dataTransfer?.types.includes("Files")) e.preventDefault(); });
    ed.area.addEventListener("drop", (e) => {
      const file = e.dataTransfer?.files?.[0];
      if (!file) return;
      e.preventDefault();
      openFile(file, name);
    });
    ed.area.addEventListener("input", schedule);
    ed.area.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); run(); }
    });
  }
  $("mode").addEventListener("change", () => setMode($("mode").value));
  $("run").addEventListener("click", () => run());
  $("sample").addEventListener("click", () => { delete state.drafts[state.mode]; loadDraft(state.mode); run(); });
  $("pin").addEventListener("click", () => {
    if (!state.model) return;
    state.pinned = state.model;
    drawDiff();
    setStatus("Pinned this result: changes from it show under “Compare”.");
  });
  $("unpin").addEventListener("click", () => { state.pinned = null; drawDiff(); });
  $("lib-target").addEventListener("change", () => { $("lib-kind").value = MODES[state.mode].libKind[$("lib-target").value]; refreshIds(); });
  $("lib-kind").addEventListener("change", refreshIds);
  $("lib-save").addEventListener("click", librarySave);
  $("lib-load").addEventListener("click", libraryLoad);
  $("export").addEventListener("click", exportResult);
  $("open-file").addEventListener("change", (e) => {
    const file = e.target.files?.[0];
    if (file) openFile(file, $("lib-target").value);
    e.target.value = "";
  });
  const wanted = new URL(window.location.href).searchParams.get("mode");
  const mode = wanted in MODES ? wanted : "macros";
  if (!hasToken()) askToken("Paste the service token to start (or open the URL tavernbox serve printed).");
  loadDraft(mode);
  setMode(mode, true);
  if (hasToken()) refreshIds();
  document.body.dataset.ready = "true";
}

start();
