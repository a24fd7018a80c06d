// A plain <textarea> with line numbers and a highlight layer underneath it.
//
// Why not a vendored editor: the playground needs three things from its editor (line numbers, a
// highlighted range, the caret put at a line and column) and a textarea keeps native editing,
// undo, selection and screen-reader support. The highlight is a <pre> under the transparent
// textarea holding the same text with one <mark>; both scroll together.

export class Editor {
  constructor(textarea) {
    this.area = textarea;
    const wrap = document.createElement("div");
    wrap.className = "editor";
    this.gutter = document.createElement("pre");
    this.gutter.className = "gutter";
    this.gutter.setAttribute("aria-hidden", "true");
    const stack = document.createElement("div");
    stack.className = "stack";
    this.layer = document.createElement("pre");
    this.layer.className = "layer";
    this.layer.setAttribute("aria-hidden", "true");
    textarea.parentNode.insertBefore(wrap, textarea);
    wrap.append(this.gutter, stack);
    stack.append(this.layer, textarea);
    this.range = null;
    this.lines = -1;
    textarea.addEventListener("input", () => this.refresh());
    textarea.addEventListener("scroll", () => this.syncScroll());
    this.refresh();
  }

  get value() { return this.area.value; }

  set value(text) {
    this.area.value = text;
    this.range = null;
    this.refresh();
  }

  refresh() {
    const text = this.area.value;
    const count = text.split("\n").length;
    if (count !== this.lines) {
      this.lines = count;
      let out = "";
      for (let k = 1; k <= count; k++) out += k + "\n";
      this.gutter.textContent = out;
    }
    this.layer.textContent = "";
    const r = this.range;
    if (r && r.start <= text.length) {
      const end = Math.min(r.end, text.length);
      const mark = document.createElement("mark");
      mark.className = "source-highlight";
      mark.textContent = text.slice(r.start, end) || " ";
      this.layer.append(text.slice(0, r.start), mark, text.slice(end) + "\n");
    } else {
      this.layer.append(text + "\n");
    }
    this.syncScroll();
  }

  syncScroll() {
    this.layer.scrollTop = this.area.scrollTop;
    this.layer.scrollLeft = this.area.scrollLeft;
    this.gutter.scrollTop = this.area.scrollTop;
  }

  // Highlight [start, end) (UTF-16 indices) and scroll it into view; null clears.
  highlight(range) {
    this.range = range && range.end >= range.start ? range : null;
    this.refresh();
    if (this.range) this.reveal(this.range.start);
    return this.range;
  }

  reveal(offset) {
    const text = this.area.value;
    const before = text.slice(0, offset);
    const line = before.split("\n").length;
    const style = getComputedStyle(this.area);
    const lineHeight = parseFloat(style.lineHeight) || 18;
    const top = (line - 1) * lineHeight;
    if (top < this.area.scrollTop || top > this.area.scrollTop + this.area.clientHeight - lineHeight * 2) {
      this.area.scrollTop = Math.max(0, top - this.area.clientHeight / 3);
    }
    // lines do not wrap: bring the column into view too (monospace: one advance per character)
    if (!Editor.advance) {
      const probe = document.createElement("canvas").getContext("2d");
      probe.font = `${style.fontSize} ${style.fontFamily}`;
      Editor.advance = probe.measureText("0000000000").width / 10 || 8;
    }
    const left = (offset - (before.lastIndexOf("\n") + 1)) * Editor.advance;
    if (left < this.area.scrollLeft || left > this.area.scrollLeft + this.area.clientWidth - 4 * Editor.advance) {
      this.area.scrollLeft = Math.max(0, left - this.area.clientWidth / 3);
    }
    this.syncScroll();
  }

  // Put the caret at [start, end) and focus the textarea.
  select(start, end) {
    this.area.focus();
    this.area.setSelectionRange(start, end ?? start);
    this.reveal(start);
  }
}

// UTF-16 index of 1-based `line` and `column`, columns counted in code points (as the engine does).
export function offsetOfLineCol(text, line, column) {
  let offset = 0;
  for (let l = 1; l < line; l++) {
    const next = text.indexOf("\n", offset);
    if (next < 0) return text.length;
    offset = next + 1;
  }
  let i = offset;
  for (let c = 1; c < column && i < text.length && text[i] !== "\n"; c++) {
    const code = text.charCodeAt(i);
    i += code >= 0xd800 && code <= 0xdbff ? 2 : 1;
  }
  return i;
}

// UTF-16 index of code-point `offset` in `text` (the engine counts code points).
export function utf16Index(text, offset) {
  let i = 0;
  for (let c = 0; c < offset && i < text.length; c++) {
    const code = text.charCodeAt(i);
    i += code >= 0xd800 && code <= 0xdbff ? 2 : 1;
  }
  return i;
}

// The source line at `line` with a caret line under `column` (width `width`), as the CLI prints it.
export function caretSnippet(text, line, column, width) {
  const lines = text.split("\n");
  const src = lines[line - 1] ?? "";
  const gutter = line + " | ";
  return gutter + src + "\n" + " ".repeat(gutter.length + Math.max(0, column - 1)) +
    "^".repeat(Math.max(1, Math.min(width || 1, Math.max(1, src.length - column + 1))));
}
