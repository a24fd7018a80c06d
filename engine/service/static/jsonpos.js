// JSON text with positions: which character range of the text holds the value at a JSON path.
//
// Why: the service names places in JSON inputs by path ("$.books[0].entries.2.content") and the
// assembler's provenance by resource and field; the editor needs character ranges to highlight
// them and to put the caret there. JSON.parse gives values only, so this is a small parser that
// records, for every value, where it starts and ends (UTF-16 indices, as the textarea counts).

export class JsonPosError extends Error {
  constructor(message, offset) {
    super(message);
    this.offset = offset;
  }
}

// Parse `text`; returns {value, ranges} where ranges maps a path ("$", "$.a", "$.a[0]") to
// {start, end, keyStart?} of the value's text. Throws JsonPosError with the offset of the fault.
export function parseWithPositions(text) {
  const ranges = new Map();
  let i = 0;
  const n = text.length;

  function ws() {
    while (i < n) {
      const c = text.charCodeAt(i);
      if (c === 32 || c === 9 || c === 10 || c === 13 || c === 0xfeff) i++;
      else break;
    }
  }
  function fail(msg) { throw new JsonPosError(msg, Math.min(i, n)); }

  function str() {
    const start = i;
    i++; // opening quote
    let out = "";
    while (i < n) {
      const c = text[i];
      if (c === '"') { i++; return [out, start]; }
      if (c === "\\") {
        const e = text[i + 1];
        const map = { '"': '"', "\\": "\\", "/": "/", b: "\b", f: "\f", n: "\n", r: "\r", t: "\t" };
        if (e in map) { out += map[e]; i += 2; continue; }
        if (e === "u" && /^[0-9a-fA-F]{4}$/.test(text.slice(i + 2, i + 6))) {
          out += String.fromCharCode(parseInt(text.slice(i + 2, i + 6), 16)); i += 6; continue;
        }
        fail("bad escape in a string");
      }
      if (c === "\n") fail("unterminated string");
      out += c; i++;
    }
    fail("unterminated string");
  }

  function value(path, depth) {
    if (depth > 500) fail("nested too deeply");
    ws();
    const start = i;
    if (i >= n) fail("a value was expected");
    const c = text[i];
    let v;
    if (c === "{") {
      i++; v = {};
      ws();
      if (text[i] === "}") { i++; }
      else {
        for (;;) {
          ws();
          if (text[i] !== '"') fail("a quoted key was expected");
          const [key, keyStart] = str();
          ws();
          if (text[i] !== ":") fail("':' was expected");
          i++;
          const child = path + (/^[A-Za-z_][A-Za-z0-9_]*$/.test(key) || /^[0-9]+$/.test(key) ? "." + key : "[" + JSON.stringify(key) + "]");
          v[key] = value(child, depth + 1);
          ranges.get(child).keyStart = keyStart;
          ws();
          if (text[i] === ",") { i++; continue; }
          if (text[i] === "}") { i++; break; }
          fail("',' or '}' was expected");
        }
      }
    } else if (c === "[") {
      i++; v = [];
      ws();
      if (text[i] === "]") { i++; }
      else {
        for (let k = 0; ; k++) {
          v.push(value(path + "[" + k + "]", depth + 1));
          ws();
          if (text[i] === ",") { i++; continue; }
          if (text[i] === "]") { i++; break; }
          fail("',' or ']' was expected");
        }
      }
    } else if (c === '"') {
      v = str()[0];
    } else {
      const m = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/.exec(text.slice(i, i + 400));
      if (m && m[0]) { v = Number(m[0]); i += m[0].length; }
      else if (text.startsWith("true", i)) { v = true; i += 4; }
      else if (text.startsWith("false", i)) { v = false; i += 5; }
      else if (text.startsWith("null", i)) { v = null; i += 4; }
      else fail("unexpected character " + JSON.stringify(c));
    }
    ranges.set(path, { start, end: i });
    return v;
  }

  const v = value("$", 0);
  ws();
  if (i < n) fail("unexpected text after the JSON value");
  return { value: v, ranges };
}

// The range of `path` in parsed `ranges`, trying the path as given and in the other spelling of
// its keys (the service writes "$.entries.0" where this parser may hold "$.entries[\"0\"]").
// Falls back to the longest known prefix, so a path below a value still points near it.
export function rangeOf(ranges, path) {
  if (!ranges || !path) return null;
  let p = path;
  while (p) {
    if (ranges.has(p)) return { ...ranges.get(p), path: p, exact: p === path };
    const cut = Math.max(p.lastIndexOf("."), p.lastIndexOf("["));
    if (cut <= 0) break;
    p = p.slice(0, cut);
  }
  return ranges.has("$") ? { ...ranges.get("$"), path: "$", exact: path === "$" } : null;
}

// Raw text offsets of decoded characters [from, to) of the JSON string literal at `start`.
export function stringSubrange(text, start, from, to) {
  let i = start + 1;
  let k = 0;
  let rawFrom = null;
  while (i < text.length && text[i] !== '"') {
    if (k === from && rawFrom === null) rawFrom = i;
    if (k === to) return { start: rawFrom ?? i, end: i };
    if (text[i] === "\\") i += text[i + 1] === "u" ? 6 : 2;
    else i += 1;
    k += 1;
  }
  if (rawFrom === null) rawFrom = i;
  return { start: rawFrom, end: i };
}

// 1-based line and column (UTF-16 code units) of `offset` in `text`.
export function lineCol(text, offset) {
  const before = text.slice(0, offset);
  const line = before.split("\n").length;
  return { line, column: offset - (before.lastIndexOf("\n") + 1) + 1 };
}
