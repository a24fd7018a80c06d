// What changed between two results, by span: SillyTavern's "diff with previous prompt", with each
// added or removed run naming the source it came from.
//
// Two levels, so a message that moved or appeared shows as one whole change instead of its words
// matching stray words elsewhere: first the messages (or trace rows) are aligned by a longest
// common subsequence of (role, text); then each removed message is paired, in order, with an
// added one between the same neighbours and the two are aligned word by word. Words keep their
// piece's provenance label; a word whose text stayed but whose source changed (the last user
// message becoming chat history) is reported as "relabelled", not as removed and added again.

const MAX_CELLS = 4_000_000;

// Longest-common-subsequence alignment of x and y by `key`: [["same", i, j] | ["del", i] | ["add", j]].
function lcs(x, y, key) {
  const ops = [];
  let pre = 0;
  while (pre < x.length && pre < y.length && key(x[pre]) === key(y[pre])) { ops.push(["same", pre, pre]); pre++; }
  let suf = 0;
  while (suf < x.length - pre && suf < y.length - pre && key(x[x.length - 1 - suf]) === key(y[y.length - 1 - suf])) suf++;
  const n = x.length - pre - suf;
  const m = y.length - pre - suf;
  if ((n + 1) * (m + 1) > MAX_CELLS) {
    for (let i = 0; i < n; i++) ops.push(["del", pre + i]);
    for (let j = 0; j < m; j++) ops.push(["add", pre + j]);
  } else {
    const w = m + 1;
    const table = new Uint32Array((n + 1) * w);
    for (let i = n - 1; i >= 0; i--) {
      for (let j = m - 1; j >= 0; j--) {
        table[i * w + j] = key(x[pre + i]) === key(y[pre + j]) ? table[(i + 1) * w + j + 1] + 1
          : Math.max(table[(i + 1) * w + j], table[i * w + j + 1]);
      }
    }
    let i = 0;
    let j = 0;
    while (i < n || j < m) {
      if (i < n && j < m && key(x[pre + i]) === key(y[pre + j])) { ops.push(["same", pre + i, pre + j]); i++; j++; }
      else if (j < m && (i >= n || table[i * w + j + 1] >= table[(i + 1) * w + j])) { ops.push(["add", pre + j]); j++; }
      else { ops.push(["del", pre + i]); i++; }
    }
  }
  for (let k = 0; k < suf; k++) ops.push(["same", x.length - suf + k, y.length - suf + k]);
  return ops;
}

// A result as units (messages, or trace rows), each a list of word tokens with their source.
function units(model) {
  const out = [];
  for (const block of model.blocks) {
    const words = [];
    const titled = block.title !== null && block.title !== undefined;
    if (titled) words.push({ text: `[${block.title}]\n`, label: "message boundary", cls: "boundary" });
    for (const p of block.pieces) {
      for (const word of p.text.match(/\s+|[^\s]+/g) || []) words.push({ text: word, label: p.label, cls: p.cls });
    }
    if (titled) words.push({ text: "\n", label: "message boundary", cls: "boundary" });
    out.push({ key: words.map((t) => t.text).join(""), words });
  }
  for (const { row } of model.table || []) {
    const text = `${row.book} #${row.uid}${row.comment ? " " + row.comment : ""}: ${row.outcome} (${row.reason})\n`;
    out.push({ key: text, words: [{ text, label: `world info: book "${row.book}", entry ${row.uid}`, cls: "world_info" }] });
  }
  return out;
}

function same(after, before) {
  return after.label === before.label ? { op: "same", ...after } : { op: "relabel", ...after, was: before.label };
}

function sameUnit(out, before, after) {
  const paired = before.words.length === after.words.length;
  after.words.forEach((t, k) => out.push(paired ? same(t, before.words[k]) : { op: "same", ...t }));
}

function changedUnit(out, before, after) {
  for (const [op, i, j] of lcs(before.words, after.words, (t) => t.text)) {
    if (op === "same") out.push(same(after.words[j], before.words[i]));
    else if (op === "add") out.push({ op, ...after.words[i] });
    else out.push({ op, ...before.words[i] });
  }
}

function similar(u, v) {
  const x = u.words.filter((t) => t.text.trim());
  const y = v.words.filter((t) => t.text.trim());
  if (x.length * y.length > 250_000) return false;
  const common = lcs(x, y, (t) => t.text).filter((o) => o[0] === "same").length;
  return 2 * common >= 0.5 * (x.length + y.length);
}

// The diff of `before` and `after` (page models) with a summary per source.
export function diffModels(before, after) {
  const a = units(before);
  const b = units(after);
  const tokens = [];
  let dels = [];
  let adds = [];
  const flush = () => {
    // pair a removed message with the next added one of the same role when at least half their
    // words match (an edit); other removed and added messages show whole
    const pairs = new Map();
    let from = 0;
    for (const i of dels) {
      for (let k = from; k < adds.length; k++) {
        if (a[i].words[0]?.text === b[adds[k]].words[0]?.text && similar(a[i], b[adds[k]])) {
          pairs.set(i, adds[k]);
          from = k + 1;
          break;
        }
      }
    }
    const pairedAdds = new Set(pairs.values());
    let k = 0;
    const addsUpTo = (limit) => {
      while (k < adds.length && (limit === null || adds[k] <= limit)) {
        if (!pairedAdds.has(adds[k])) for (const t of b[adds[k]].words) tokens.push({ op: "add", ...t });
        k++;
      }
    };
    for (const i of dels) {
      if (pairs.has(i)) {
        addsUpTo(pairs.get(i) - 1);
        changedUnit(tokens, a[i], b[pairs.get(i)]);
        k = Math.max(k, adds.indexOf(pairs.get(i)) + 1);
      } else {
        for (const t of a[i].words) tokens.push({ op: "del", ...t });
      }
    }
    addsUpTo(null);
    dels = [];
    adds = [];
  };
  for (const [op, i, j] of lcs(a, b, (u) => u.key)) {
    if (op === "same") { flush(); sameUnit(tokens, a[i], b[j]); }
    else if (op === "del") dels.push(i);
    else adds.push(i);
  }
  flush();
  const runs = [];
  for (const t of tokens) {
    const last = runs[runs.length - 1];
    if (last && last.op === t.op && last.label === t.label && last.was === t.was) last.text += t.text;
    else runs.push({ op: t.op, text: t.text, label: t.label, cls: t.cls, was: t.was });
  }
  const summary = new Map();
  for (const r of runs) {
    if (r.op === "same" || r.cls === "boundary" || !r.text.trim()) continue;
    const key = r.op === "relabel" ? r.label + "\u0000" + r.was : r.label;
    const s = summary.get(key) || { label: r.label, was: r.op === "relabel" ? r.was : null, added: 0, removed: 0, relabelled: 0 };
    const words = (r.text.match(/[^\s]+/g) || []).length;
    if (r.op === "add") s.added += words; else if (r.op === "del") s.removed += words; else s.relabelled += words;
    summary.set(key, s);
  }
  return { runs, summary: [...summary.values()], changed: summary.size > 0 };
}
