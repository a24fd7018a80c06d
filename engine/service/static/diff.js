// What changed between two results, by span: SillyTavern's "diff with previous prompt", with each
// added or removed run naming the source it came from.
//
// Both results are flattened to words (a word keeps its piece's provenance label; a message
// boundary is a token of its own), the common prefix and suffix are cut, and the middle is
// aligned by a longest common subsequence. A word counts as unchanged only when its text and its
// source are both the same, so text that moved from one source to another shows as a change.

const MAX_CELLS = 4_000_000;

function tokens(model) {
  const out = [];
  model.blocks.forEach((block, b) => {
    if (block.title !== null && block.title !== undefined) {
      out.push({ text: `[${block.title}]\n`, label: "message " + (b + 1), cls: "boundary", key: "\u0001" + block.title });
    }
    for (const p of block.pieces) {
      for (const word of p.text.match(/\s+|[^\s]+/g) || []) {
        out.push({ text: word, label: p.label, cls: p.cls, key: p.label + "\u0000" + word });
      }
    }
    out.push({ text: "\n", label: "message end", cls: "boundary", key: "\u0002" });
  });
  if (model.table) {
    for (const { row } of model.table) {
      const text = `${row.book} #${row.uid}${row.comment ? " " + row.comment : ""}: ${row.outcome} (${row.reason})\n`;
      out.push({ text, label: `world info: book "${row.book}", entry ${row.uid}`, cls: "world_info", key: text });
    }
  }
  return out;
}

// Align two token lists: [{op: "same" | "add" | "del", text, label, cls}], runs merged.
function align(a, b) {
  let pre = 0;
  while (pre < a.length && pre < b.length && a[pre].key === b[pre].key) pre++;
  let suf = 0;
  while (suf < a.length - pre && suf < b.length - pre && a[a.length - 1 - suf].key === b[b.length - 1 - suf].key) suf++;
  const x = a.slice(pre, a.length - suf);
  const y = b.slice(pre, b.length - suf);
  const ops = a.slice(0, pre).map((t) => ({ op: "same", ...t }));
  const n = x.length;
  const m = y.length;
  if ((n + 1) * (m + 1) > MAX_CELLS) {
    for (const t of x) ops.push({ op: "del", ...t });
    for (const t of y) ops.push({ op: "add", ...t });
  } else {
    const w = m + 1;
    const table = new Uint32Array((n + 1) * w);
    for (let i = n - 1; i >= 0; i--) {
      for (let j = m - 1; j >= 0; j--) {
        table[i * w + j] = x[i].key === y[j].key ? table[(i + 1) * w + j + 1] + 1
          : Math.max(table[(i + 1) * w + j], table[i * w + j + 1]);
      }
    }
    let i = 0;
    let j = 0;
    while (i < n || j < m) {
      if (i < n && j < m && x[i].key === y[j].key) { ops.push({ op: "same", ...y[j] }); i++; j++; }
      else if (j < m && (i >= n || table[i * w + j + 1] >= table[(i + 1) * w + j])) { ops.push({ op: "add", ...y[j] }); j++; }
      else { ops.push({ op: "del", ...x[i] }); i++; }
    }
  }
  for (const t of b.slice(b.length - suf)) ops.push({ op: "same", ...t });
  const merged = [];
  for (const o of ops) {
    const last = merged[merged.length - 1];
    if (last && last.op === o.op && last.label === o.label) last.text += o.text;
    else merged.push({ op: o.op, text: o.text, label: o.label, cls: o.cls });
  }
  return merged;
}

// The diff of `before` and `after` (page models) with a summary per source.
export function diffModels(before, after) {
  const runs = align(tokens(before), tokens(after));
  const summary = new Map();
  for (const r of runs) {
    if (r.op === "same" || !r.text.trim()) continue;
    const s = summary.get(r.label) || { label: r.label, added: 0, removed: 0 };
    const words = (r.text.match(/[^\s]+/g) || []).length;
    if (r.op === "add") s.added += words; else s.removed += words;
    summary.set(r.label, s);
  }
  return { runs, summary: [...summary.values()], changed: summary.size > 0 };
}
