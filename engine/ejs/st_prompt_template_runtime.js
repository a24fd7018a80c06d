// ST-Prompt-Template at generation: every template of one request, in one fresh VM, in the extension's order.
//
// This is template-side code: the sandbox runs it as the program of one render (prompt_template.py builds the
// program: this text, then the call), with the same isolation and budgets as any template. It receives, as the
// render's input, the request's variables (global, chat, the latest message's), the template context (names, chat
// messages, lorebook names), the world-info entries `getwi` may read, the compiled templates (JavaScript text from
// tavernbox's EJS compiler, compiled here with an indirect eval so that one template's syntax error fails only that
// template) and the per-template budgets. It returns one JSON text: each template's output or error, the variables
// as the templates left them, and what the templates read.
//
// Behaviour follows ST-Prompt-Template 1.17 (zonde306/ST-Prompt-Template): one shared context for the generation
// (`define`d names and variables carry from template to template), `getvar` reading the merged cache (global,
// chat, then message variables), writes going to the message scope unless a scope is named, `getwi` evaluating the
// entry it finds (the first whose comment equals the title, whose uid equals it, or whose comment matches it as a
// regular expression) with `world_info` set. Browser-only calls are refused with a clear code.
(async function (__tb) {
  // the input is frozen: only the variables, which the templates write, are copied
  const IN = __tb.locals.variables;
  const LIM = IN.limits;
  const out = { results: [], reads: [], refusals: [] };
  let tripped = null;
  let depth = 0;
  const notes = new WeakMap();
  const LOAD = takeTemplateLoader();
  // Per-template time: the harness's hook, taken before any template exists and never handed to one (templates
  // get their own `tb`, never `__tb`). `run` names the template about to run (its layout unit, -1: none), then
  // awaits, so the template starts in a pending-job step of its own; the host charges each step to the template
  // marked when it began (worker.py TemplateClock).
  const MARK = typeof __tb.mark === 'function' ? __tb.mark : function () {};
  let marked = -1;

  // `cause`: the engine's error that tripped it (its stack says where the template was); else this one's
  function budget(code, message, label, cause) {
    const e = new RangeError(message);
    if (tripped === null) {
      let stack = '';
      try {
        const from = cause !== undefined ? cause : e;
        if (isObj(from) && typeof from.stack === 'string') stack = from.stack.slice(0, 4000);
      } catch (err) { /* a template's own object: no position */ }
      tripped = { code: code, message: message, label: label, stack: stack };
    }
    notes.set(e, { budget: true });
    return e;
  }
  function refuse(name, why) {
    return function () {
      const e = new TypeError(name + ' is not available outside a browser (' + why + ')');
      notes.set(e, { code: 'TEMPLATE_UNSUPPORTED' });
      throw e;
    };
  }
  function read(kind, a, b) {
    if (out.reads.length < LIM.reads) out.reads.push([kind, a, b]);
  }

  // --- lodash's path helpers and the subset of lodash templates use -----------------------------------------------
  const PROP = /[^.[\]]+|\[(?:(-?\d+(?:\.\d+)?)|(["'])((?:(?!\2)[^\\]|\\.)*?)\2)\]|(?=(?:\.|\[\])(?:\.|\[\]|$))/g;
  const DEEP = /\.|\[(?:[^[\]]*|(["'])(?:(?!\1)[^\\]|\\.)*?\1)\]/;
  function toPath(path) {
    if (Array.isArray(path)) return path.map(String);
    if (typeof path === 'number' || typeof path === 'symbol') return [path];
    path = String(path);
    if (/^\w*$/.test(path) || !DEEP.test(path)) return [path];
    const keys = path.charCodeAt(0) === 46 ? [''] : [];
    path.replace(PROP, function (match, number, quote, inner) {
      keys.push(quote ? inner.replace(/\\(\\)?/g, '$1') : (number || match));
    });
    return keys;
  }
  function isObj(v) { return v !== null && (typeof v === 'object' || typeof v === 'function'); }
  function isPlain(v) {
    if (v === null || typeof v !== 'object') return false;
    const p = Object.getPrototypeOf(v);
    return p === null || p === Object.prototype;
  }
  function lget(obj, path, dflt) {
    if (obj == null) return dflt;
    const keys = (isObj(obj) && typeof path === 'string' && path in obj) ? [path] : toPath(path);
    let v = obj;
    for (let i = 0; i < keys.length; i++) {
      if (v == null) return dflt;
      v = v[keys[i]];
    }
    return v === undefined ? dflt : v;
  }
  function lhas(obj, path) {
    const keys = (isObj(obj) && typeof path === 'string' && path in obj) ? [path] : toPath(path);
    let v = obj;
    for (let i = 0; i < keys.length; i++) {
      if (v == null || !Object.prototype.hasOwnProperty.call(Object(v), keys[i])) return false;
      v = v[keys[i]];
    }
    return keys.length > 0;
  }
  function lset(obj, path, value) {
    if (!isObj(obj)) return obj;
    const keys = toPath(path);
    let v = obj;
    for (let i = 0; i < keys.length; i++) {
      const k = keys[i];
      if (k === '__proto__' || k === 'constructor' || k === 'prototype') return obj;
      if (i === keys.length - 1) { v[k] = value; break; }
      if (!isObj(v[k])) v[k] = /^(?:0|[1-9]\d*)$/.test(String(keys[i + 1])) ? [] : {};
      v = v[k];
    }
    return obj;
  }
  function lunset(obj, path) {
    const keys = toPath(path);
    let v = obj;
    for (let i = 0; i < keys.length - 1; i++) {
      if (!isObj(v)) return true;
      v = v[keys[i]];
    }
    if (isObj(v)) delete v[keys[keys.length - 1]];
    return true;
  }
  function clone(v) {
    if (Array.isArray(v)) return v.map(clone);
    if (isPlain(v)) { const o = {}; for (const k of Object.keys(v)) o[k] = clone(v[k]); return o; }
    return v;
  }
  function merge(dst, ...srcs) {
    for (const src of srcs) {
      if (!isObj(src)) continue;
      for (const k of Object.keys(src)) {
        const s = src[k];
        if (isPlain(s) && isPlain(dst[k])) merge(dst[k], s);
        else if (Array.isArray(s) && Array.isArray(dst[k])) merge(dst[k], s);
        else if (isPlain(s)) dst[k] = merge({}, s);
        else if (Array.isArray(s)) dst[k] = merge([], s);
        else if (s !== undefined) dst[k] = s;
      }
    }
    return dst;
  }
  function isEqual(a, b) {
    if (a === b) return true;
    if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => isEqual(x, b[i]));
    if (isPlain(a) && isPlain(b)) {
      const ka = Object.keys(a), kb = Object.keys(b);
      return ka.length === kb.length && ka.every((k) => Object.prototype.hasOwnProperty.call(b, k) && isEqual(a[k], b[k]));
    }
    return a !== a && b !== b;
  }
  const lodash = Object.freeze({
    get: lget, has: lhas, set: lset, unset: lunset, cloneDeep: clone, clone: (v) => (Array.isArray(v) ? v.slice() : isPlain(v) ? Object.assign({}, v) : v),
    merge: merge, isEqual: isEqual, isArray: Array.isArray, isPlainObject: isPlain, isObject: isObj,
    isString: (v) => typeof v === 'string', isNumber: (v) => typeof v === 'number', isBoolean: (v) => typeof v === 'boolean',
    isFunction: (v) => typeof v === 'function', isNil: (v) => v == null, isNull: (v) => v === null, isUndefined: (v) => v === undefined,
    isEmpty: (v) => (v == null ? true : Array.isArray(v) || typeof v === 'string' ? v.length === 0 : isObj(v) ? Object.keys(v).length === 0 : true),
    isInteger: Number.isInteger, isFinite: Number.isFinite, isNaN: (v) => typeof v === 'number' && v !== v,
    keys: (v) => (isObj(v) ? Object.keys(v) : []), values: (v) => (isObj(v) ? Object.values(v) : []),
    entries: (v) => (isObj(v) ? Object.entries(v) : []), toPairs: (v) => (isObj(v) ? Object.entries(v) : []),
    fromPairs: (p) => Object.fromEntries(p || []), size: (v) => (v == null ? 0 : Array.isArray(v) || typeof v === 'string' ? v.length : Object.keys(v).length),
    concat: (...a) => [].concat(...a), flatten: (a) => [].concat(...(a || [])), uniq: (a) => Array.from(new Set(a || [])),
    includes: (c, v) => (typeof c === 'string' ? c.includes(v) : Array.isArray(c) ? c.includes(v) : isObj(c) ? Object.values(c).includes(v) : false),
    clamp: (n, lo, hi) => Math.min(Math.max(n, lo), hi), sum: (a) => (a || []).reduce((s, x) => s + x, 0),
    max: (a) => (a && a.length ? Math.max(...a) : undefined), min: (a) => (a && a.length ? Math.min(...a) : undefined),
    range: (a, b, step) => { if (b === undefined) { b = a; a = 0; } step = step || (a < b ? 1 : -1); const r = []; for (let i = a; step > 0 ? i < b : i > b; i += step) r.push(i); return r; },
    pick: (o, ...ks) => { const r = {}; for (const k of [].concat(...ks)) if (lhas(o, k)) lset(r, k, lget(o, k)); return r; },
    omit: (o, ...ks) => { const r = clone(o); for (const k of [].concat(...ks)) lunset(r, k); return r; },
    toNumber: Number, toString: (v) => (v == null ? '' : String(v)), round: (n, p) => { const f = Math.pow(10, p || 0); return Math.round(n * f) / f; },
    floor: (n) => Math.floor(n), ceil: (n) => Math.ceil(n), trim: (s) => String(s == null ? '' : s).trim(),
    startsWith: (s, t) => String(s).startsWith(t), endsWith: (s, t) => String(s).endsWith(t),
    mergeWith: (dst, src, fn) => { for (const k of Object.keys(src || {})) { const r = fn ? fn(dst[k], src[k], k) : undefined; if (r !== undefined) dst[k] = r; else if (isPlain(src[k]) && isPlain(dst[k])) lodash.mergeWith(dst[k], src[k], fn); else dst[k] = clone(src[k]); } return dst; },
  });

  // --- variables: SillyTavern's three scopes and ST-Prompt-Template's merged cache --------------------------------
  const V = { global: clone(IN.vars.global), local: clone(IN.vars.chat), message: clone(IN.vars.message) };
  let cache = clone(Object.assign({}, V.global, IN.vars.initial || {}, V.local, V.message));
  function opts(o) { return isPlain(o) ? o : typeof o === 'string' ? { scope: o } : {}; }
  function scopeObject(scope) {
    if (scope === 'global') return V.global;
    if (scope === 'local') return V.local;
    return V.message;
  }
  function getvar(key, o) {
    o = opts(o);
    const scope = o.scope || 'cache';
    read('getvar', scope, key == null ? null : String(key));
    const src = scope === 'cache' ? cache : scopeObject(scope);
    let v = key == null ? src : lget(src, key, undefined);
    if (o.index != null && v !== undefined) v = lget(v, o.index, undefined);
    if (v === undefined) return o.defaults;
    return o.clone ? clone(v) : v;
  }
  function setvar(key, value, o) {
    o = opts(o);
    const scope = o.scope || 'message';
    const target = scopeObject(scope);
    const current = lget(cache, key, undefined);
    if (o.flags === 'nx' && lhas(target, key)) return undefined;
    if (o.flags === 'xx' && !lhas(target, key)) return undefined;
    if (o.flags === 'nxs' && current !== undefined) return undefined;
    if (o.flags === 'xxs' && current === undefined) return undefined;
    let v = value;
    if (o.merge) {
      const old = lget(target, key, undefined);
      v = Array.isArray(value) && (old === undefined || Array.isArray(old)) ? (old || []).concat(value)
        : lodash.mergeWith(clone(old || {}), value, (d, s) => (Array.isArray(s) ? s : undefined));
    }
    if (o.index != null) {
      const holder = clone(lget(target, key, undefined)) || {};
      if (v === undefined) lunset(holder, o.index); else lset(holder, o.index, v);
      v = holder;
    }
    if (v === undefined) { lunset(target, key); lunset(cache, key); } else { lset(target, key, clone(v)); lset(cache, key, v); }
    return o.results === 'old' ? current : v;
  }
  function delvar(key, o) {
    o = opts(o);
    lunset(scopeObject(o.scope || 'message'), key);
    lunset(cache, key);
  }
  function step(sign) {
    return function (key, value, o) {
      o = opts(o);
      const inscope = o.inscope || o.scope || 'cache';
      const outscope = o.outscope || o.scope || 'message';
      const old = getvar(key, { scope: inscope, defaults: 0 });
      return setvar(key, Number(old) + sign * (value === undefined ? 1 : Number(value)), { scope: outscope });
    };
  }
  function insvar(key, value, index, o) {
    o = opts(o);
    const inscope = o.inscope || o.scope || 'cache';
    const outscope = o.outscope || o.scope || 'message';
    const old = getvar(key, { scope: inscope });
    let next;
    if (Array.isArray(old)) {
      next = old.slice();
      if (index === undefined || index === null) next.push(value); else next.splice(Number(index), 0, value);
    } else if (isPlain(old) && index != null) {
      next = Object.assign({}, old); next[index] = value;
    } else {
      next = [value];
    }
    return setvar(key, next, { scope: outscope });
  }

  // --- world info ---------------------------------------------------------------------------------------------------
  const BOOKS = IN.books;
  function findEntry(book, title) {
    const entries = BOOKS[book];
    if (!entries) return null;
    let re = null;
    if (title instanceof RegExp) re = title;
    else if (title != null) re = new RegExp(String(title));
    for (const e of entries) {
      if (e.comment === title || e.uid === title || (re !== null && re.test(e.comment))) return e;
    }
    return null;
  }
  // --- provenance marks (the marked evaluation only: see st_prompt_template.py, ``marks``) ------------------------
  // The compiler's marks (U+FDD0, hex digits, U+FDD1) are tagged with the origin of the template that appended them;
  // what ``getwi`` returns is bracketed (U+FDD6 ... U+FDD7), so text after it is the caller's again.
  const MARKS = IN.marks === true;
  function hexTag(n) {
    let s = '';
    for (const d of n.toString(16)) s += String.fromCharCode(0xFDE0 + parseInt(d, 16));
    return s;
  }
  function originMark(origin, mark) { return '\uFDD0' + hexTag(origin) + '\uFDD3' + mark + '\uFDD1'; }
  function markedAppend(origin, s) {
    return s.length <= 12 && s.charCodeAt(0) === 0xFDD0 && s.charCodeAt(s.length - 1) === 0xFDD1
      ? originMark(origin, s.slice(1, -1)) : s;
  }
  function bracketed(e, text) {
    if (!MARKS || text === '') return text;
    return '\uFDD6' + (e.source === null ? originMark(e.origin, '') : '') + text + '\uFDD7';
  }

  const compiled = new Map();
  function fnOf(key, src, line) {
    if (compiled.has(key)) return compiled.get(key);
    let made = loaded(src, line);
    if (made === null) {
      try { made = { fn: (0, eval)('\n'.repeat(line - 1) + src) }; } catch (e) { made = { error: e }; }
    }
    compiled.set(key, made);
    return made;
  }
  // The worker's template cache (run_program's template_cache, worker.py's TemplateCache): a request is this
  // private object rejected with its text; the worker, when it serves the render, answers on it synchronously.
  // Its first rejection, before any template runs, introduces it. Without the worker's answer (kind 0) the
  // text is compiled here: the plain path.
  function takeTemplateLoader() {
    const request = Object.create(null);
    request.src = ''; request.line = 0; request.kind = 0; request.value = undefined;
    const reject = Promise.reject;
    const ask = function () { Function.prototype.call.call(reject, Promise, request); };
    ask();
    return { request: request, ask: ask };
  }
  // What `(0, eval)('\n'.repeat(line - 1) + src)` gives ({ fn } or { error }), evaluated by the worker from
  // the text's bytecode; null when it did not run it (then this evaluates the text itself).
  function loaded(src, line) {
    const r = LOAD.request;
    r.src = src; r.line = line; r.kind = 0; r.value = undefined;
    LOAD.ask();
    const kind = r.kind, value = r.value;
    r.src = ''; r.kind = 0; r.value = undefined;
    if (kind === 0) return null;
    if (kind === 1) return { fn: value };
    if (kind === 2) return { error: value };
    return { error: budget('TEMPLATE_MEMORY_LIMIT', 'the VM ran out of its memory budget loading a template', null) };
  }

  // activewi(world, title, force) / activewi(title, force): the entry is noted (world, uid, forced); before the
  // world-info scan (IN.generate.phase "before") the caller adds it to this request's scan, as the extension does
  // with what was activated when the scan starts; later calls change nothing in this request
  const activations = new Map();
  async function activewi(world, title, force) {
    read('activewi', null, null);
    if (typeof title === 'boolean') { force = title; title = undefined; }
    const key = String(world) + '.' + String(title);
    const book = title === undefined ? IN.default_book || '' : String(world);
    const e = findEntry(book, title === undefined ? world : title);
    if (e !== null) activations.set(key, [book, e.uid, !!force]);
    return e === null ? null : { world: book, uid: e.uid, comment: e.comment, content: e.content };
  }
  const CTX = Object.assign(Object.create(null), IN.context);
  async function getwi(worldOrEntry, entryOrData, data) {
    if (entryOrData === undefined) entryOrData = {};
    let book, title;
    const current = CTX.world_info && CTX.world_info.world;
    if (isPlain(entryOrData)) { book = current || ''; title = worldOrEntry; data = entryOrData; }
    else { book = worldOrEntry || current || ''; title = entryOrData; }
    if (!data) data = {};
    book = book || IN.default_book || '';
    const e = findEntry(book, title);
    read('getwi', book, title instanceof RegExp ? String(title) : title == null ? null : String(title));
    if (e === null) return '';
    if (depth >= LIM.getwi_depth) throw budget('TEMPLATE_STACK_LIMIT', 'getwi nested more than ' + LIM.getwi_depth + ' deep (an entry that reads itself?) at ' + book + '/' + e.comment, e.label);
    merge(CTX, data);
    CTX.world_info = e.info;
    if (e.source === null) return bracketed(e, e.content);
    depth++;
    try {
      return bracketed(e, await run(e.key, e.source, e.line, e.label, e.unit, e.origin));
    } finally {
      depth--;
    }
  }

  // --- injected prompts (getPromptsInjected is filled in when every template has run, as the extension does) ---
  const injected = Object.create(null);
  const OUTLET = '\uFDD2';
  function injectPrompt(key, prompt, order, sticky, uid) {
    (injected[key] = injected[key] || []).push({ prompt: String(prompt), order: Number(order || 100), uid: uid });
  }
  function getPromptsInjected(key) { return OUTLET + String(key) + OUTLET; }
  function hasPromptsInjected(key) { return !!(injected[key] && injected[key].length); }
  function fillOutlets(text) {
    if (text.indexOf(OUTLET) < 0) return text;
    return text.replace(new RegExp(OUTLET + '([^' + OUTLET + ']*)' + OUTLET, 'g'), function (m, key) {
      const list = (injected[key] || []).slice().sort((a, b) => a.order - b.order);
      return list.map((x) => x.prompt).join('\n');
    });
  }

  // --- chat messages ------------------------------------------------------------------------------------------------
  const CHAT = IN.chat;
  function roleOf(m) { return m.is_user ? 'user' : m.is_system ? 'system' : 'assistant'; }
  function pickRole(list, role) { return role ? list.filter((m) => roleOf(m) === role) : list; }
  function getChatMessages(startOrCount, endOrRole, role) {
    if (startOrCount === undefined) startOrCount = CHAT.length;
    let list = CHAT.map((m, i) => Object.assign({ id: i }, m));
    if (typeof endOrRole === 'string' || endOrRole == null) {
      list = pickRole(list, endOrRole);
      list = startOrCount > 0 ? list.slice(0, startOrCount) : startOrCount < 0 ? list.slice(startOrCount) : [];
    } else {
      list = pickRole(list.slice(startOrCount, endOrRole), role);
    }
    return list.map((m) => m.mes);
  }
  function getChatMessage(idx, role) {
    const list = pickRole(CHAT, role);
    const m = list[idx > -1 ? idx : list.length + idx];
    return m ? m.mes : '';
  }
  function matchChatMessages(pattern, o) {
    const re = pattern instanceof RegExp ? pattern : new RegExp(String(pattern), 'i');
    return CHAT.some((m) => re.test(m.mes));
  }
  function parseJSON(text) {
    try { return JSON.parse(text); } catch (e) { /* lenient below */ }
    try {
      const fixed = String(text)
        .replace(/,\s*([}\]])/g, '$1')
        .replace(/([{,]\s*)([A-Za-z_$][\w$]*)\s*:/g, '$1"$2":')
        .replace(/'((?:[^'\\]|\\.)*)'/g, (m, s) => JSON.stringify(s.replace(/\\'/g, "'")));
      return JSON.parse(fixed);
    } catch (e) {
      return null;
    }
  }

  Object.assign(CTX, {
    _: lodash, variables: undefined,
    getvar: getvar, setvar: setvar, delvar: delvar, incvar: step(1), decvar: step(-1), insvar: insvar,
    getLocalVar: (k, o) => getvar(k, Object.assign({}, opts(o), { scope: 'local' })),
    getGlobalVar: (k, o) => getvar(k, Object.assign({}, opts(o), { scope: 'global' })),
    getMessageVar: (k, o) => getvar(k, Object.assign({}, opts(o), { scope: 'message' })),
    setLocalVar: (k, v, o) => setvar(k, v, Object.assign({}, opts(o), { scope: 'local' })),
    setGlobalVar: (k, v, o) => setvar(k, v, Object.assign({}, opts(o), { scope: 'global' })),
    setMessageVar: (k, v, o) => setvar(k, v, Object.assign({}, opts(o), { scope: 'message' })),
    delLocalVar: (k, o) => delvar(k, Object.assign({}, opts(o), { scope: 'local' })),
    delGlobalVar: (k, o) => delvar(k, Object.assign({}, opts(o), { scope: 'global' })),
    delMessageVar: (k, o) => delvar(k, Object.assign({}, opts(o), { scope: 'message' })),
    incLocalVar: (k, v, o) => step(1)(k, v, Object.assign({}, opts(o), { outscope: 'local' })),
    incGlobalVar: (k, v, o) => step(1)(k, v, Object.assign({}, opts(o), { outscope: 'global' })),
    incMessageVar: (k, v, o) => step(1)(k, v, Object.assign({}, opts(o), { outscope: 'message' })),
    decLocalVar: (k, v, o) => step(-1)(k, v, Object.assign({}, opts(o), { outscope: 'local' })),
    decGlobalVar: (k, v, o) => step(-1)(k, v, Object.assign({}, opts(o), { outscope: 'global' })),
    decMessageVar: (k, v, o) => step(-1)(k, v, Object.assign({}, opts(o), { outscope: 'message' })),
    getwi: getwi, getWorldInfo: getwi,
    define: function (name, value, mergeIt) {
      const old = lget(CTX, name, undefined);
      if (mergeIt && Array.isArray(value) && (old === undefined || Array.isArray(old))) value = (old || []).concat(value);
      else if (mergeIt && isPlain(value) && (old === undefined || isPlain(old))) value = merge(old || {}, value);
      lset(CTX, name, value);
      return old;
    },
    getChatMessages: getChatMessages, getChatMessage: getChatMessage, matchChatMessages: matchChatMessages,
    injectPrompt: injectPrompt, getPromptsInjected: getPromptsInjected, hasPromptsInjected: hasPromptsInjected,
    parseJSON: parseJSON,
    activewi: activewi, activateWorldInfo: activewi,
    activateRegex: function () { read('activateRegex', null, null); },
    getchar: async function () { return IN.character_text; }, getchr: async function () { return IN.character_text; },
    getChara: async function () { return IN.character_text; },
    getpreset: async function (name) { const p = IN.preset_prompts[name]; return p === undefined ? '' : p; },
    getprp: async function (name) { const p = IN.preset_prompts[name]; return p === undefined ? '' : p; },
    getPresetPrompt: async function (name) { const p = IN.preset_prompts[name]; return p === undefined ? '' : p; },
    execute: refuse('execute', 'slash commands run in SillyTavern\'s page'),
    getqr: refuse('getqr', 'quick replies live in SillyTavern\'s page'),
    getQuickReply: refuse('getQuickReply', 'quick replies live in SillyTavern\'s page'),
    evalTemplate: refuse('evalTemplate', 'tavernbox compiles templates before the request runs'),
  });
  Object.defineProperty(CTX, 'variables', { get: function () { return cache; }, enumerable: true, configurable: true });

  function resourceKind(e) {
    const name = e.name, message = e.message;
    if (name === 'InternalError' && (message === 'out of memory' || message === 'string too long')) return 'TEMPLATE_MEMORY_LIMIT';
    if (name === 'RangeError' && (message === 'Maximum call stack size exceeded' || message === 'out of memory')) return 'TEMPLATE_STACK_LIMIT';
    if (name === 'InternalError' && /stack overflow/.test(String(message))) return 'TEMPLATE_STACK_LIMIT';
    return null;
  }

  // --- one template -------------------------------------------------------------------------------------------------
  async function run(key, source, line, label, unit, origin) {
    const outer = marked;
    marked = unit;
    MARK(unit);
    try {
      await null; // the template (its compilation included: a template can break out of its function) starts here
      return await runMarked(key, source, line, label, origin);
    } finally {
      // back to the template that read this one; after a message's template the mark stays until the next one
      // is marked, so a promise job a template left behind is charged to a template, never to none
      marked = outer;
      if (outer >= 0) MARK(outer);
    }
  }
  async function runMarked(key, source, line, label, origin) {
    const made = fnOf(key, source, line);
    if (made.error !== undefined) {
      // the engine's memory or stack running out while it compiles the template is a budget too
      const kind = isObj(made.error) ? resourceKind(made.error) : null;
      if (kind !== null) throw budget(kind, label + ': ' + made.error.name + ': ' + made.error.message, label, made.error);
      throw made.error;
    }
    const parts = [];
    let size = 0;
    const tb = {
      api: CTX, locals: {}, escape: (v) => v, finish: () => {},
      append: (v) => {
        if (v === undefined || v === null) return;
        const s = MARKS ? markedAppend(origin, '' + v) : '' + v;
        size += s.length;
        if (size > LIM.template_output) throw budget('TEMPLATE_OUTPUT_LIMIT', label + ' printed more than ' + LIM.template_output + ' characters', label);
        parts.push(s);
      },
    };
    try {
      await made.fn(tb);
    } catch (e) {
      // the engine's own resource errors are budgets (ours), whoever caught them on the way
      const kind = isObj(e) ? resourceKind(e) : null;
      if (kind !== null) throw budget(kind, label + ': ' + e.name + ': ' + e.message, label, e);
      if (isObj(e) && !notes.has(e)) notes.set(e, { label: label });
      else if (isObj(e) && notes.get(e).label === undefined) notes.get(e).label = label;
      throw e;
    }
    if (tripped !== null) throw budget(tripped.code, tripped.message, tripped.label);
    return parts.join('');
  }

  // --- @INJECT entries (ST-Prompt-Template's prompt injection, inject_loader_enabled) ------------------------------
  async function injectMessages(entries, roles, texts) {
    const prompt = roles.map((role, i) => ({ role: role, content: texts[i] }));
    const instructions = [];
    for (const e of entries) {
      const roleMatch = e.comment.match(/role=(\w+)/);
      const raw = roleMatch ? roleMatch[1] : 'system';
      const role = raw === 'user' || raw === 'assistant' || raw === 'system' ? raw : 'system';
      let content;
      try {
        merge(CTX, { world_info: e.info });
        content = e.source === null ? e.content : await run(e.key, e.source, e.line, e.label, e.unit, e.origin);
      } catch (err) {
        if (tripped !== null) throw err;
        out.inject_errors.push({ label: e.label, name: isObj(err) ? err.name : typeof err, message: isObj(err) ? err.message : String(err),
                                 stack: isObj(err) && typeof err.stack === 'string' ? err.stack.slice(0, 2000) : '' });
        continue;
      }
      if (content == null || !content.trim()) continue;
      const base = { role: role, content: content, order: e.order || 0 };
      const pos = e.comment.match(/pos=(\d+)/);
      if (pos) { instructions.push(Object.assign({ type: 'pos', pos: parseInt(pos[1]) }, base)); continue; }
      const target = e.comment.match(/target=(\w+)/);
      if (target) {
        const index = e.comment.match(/index=(-?\d+)/);
        const at = e.comment.match(/at=(before|after)/);
        instructions.push(Object.assign({ type: 'target', target: target[1], index: index ? parseInt(index[1]) : 1,
                                          at: at ? at[1] : 'before' }, base));
        continue;
      }
      const rx = e.comment.match(/regex=(?:"([^"]*)"|'([^']*)'|(\S+))/);
      if (rx) {
        const source = (rx[1] || rx[2] || rx[3] || '').replace(/^["']|["']$/g, '');
        if (!source) continue;
        const at = e.comment.match(/at=(before|after)/);
        instructions.push(Object.assign({ type: 'regex', regex: source, at: at ? at[1] : 'before' }, base));
      }
    }
    const counters = { user: 0, assistant: 0, system: 0 };
    const numbered = prompt.map((m, i) => ({ index: i + 1, nth: counters[m.role] === undefined ? 0 : ++counters[m.role], role: m.role }));
    const queue = [];
    for (const ins of instructions.filter((x) => x.type === 'target')) {
      let nth = ins.index || 1;
      if (nth < 0) nth = numbered.filter((m) => m.role === ins.target).length + nth + 1;
      const hit = numbered.find((m) => m.role === ins.target && m.nth === nth);
      if (hit) queue.push({ ins: ins, at: ins.at === 'before' ? hit.index : hit.index + 1 });
    }
    for (const ins of instructions.filter((x) => x.type === 'pos')) {
      if (ins.pos === 0) { queue.push({ ins: ins, at: 0 }); continue; }
      let at = ins.pos || 1;
      if (at < 0) at = Math.max(1, prompt.length + at + 1);
      queue.push({ ins: ins, at: at - 1 });
    }
    queue.sort((a, b) => (a.at !== b.at ? b.at - a.at : a.ins.order !== b.ins.order ? b.ins.order - a.ins.order
      : a.ins.type === 'pos' && b.ins.type !== 'pos' ? -1 : a.ins.type !== 'pos' && b.ins.type === 'pos' ? 1 : 0));
    for (const q of queue) prompt.splice(q.at, 0, { role: q.ins.role, content: q.ins.content });
    const later = [];
    for (const ins of instructions.filter((x) => x.type === 'regex')) {
      let re;
      try { re = new RegExp(ins.regex); } catch (e) { continue; }
      const hit = prompt.findIndex((m) => re.test(m.content));
      if (hit !== -1) later.push({ ins: ins, at: ins.at === 'before' ? hit : hit + 1 });
    }
    later.sort((a, b) => (a.at !== b.at ? b.at - a.at : b.ins.order - a.ins.order));
    for (const q of later) prompt.splice(q.at, 0, { role: q.ins.role, content: q.ins.content });
    return prompt;
  }
  out.inject_errors = [];

  // --- the chat's own templates when the chat loads: each message in its own message scope -------------------------
  // ST-Prompt-Template evaluates the shown messages in order when the chat loads, each with that message's variables
  // (`variables[swipe_id]`) as its message scope and a variables cache made for it. A message after the first that was
  // never initialised first takes a copy of the nearest earlier message's variables (the initial variables when no
  // earlier message has any), its own keys winning; the first message (or one initialised before) gets an empty
  // object when it has none. `IN.load`: the messages' variables, the indices evaluated (`steps`), which were
  // initialised before (`initialized`) and the templates, each with its `scope`.
  const MSGS = IN.load ? IN.load.messages.map((m) => (m == null ? null : clone(m))) : null;
  function enterMessage(index) {
    if (index > 0 && !IN.load.initialized[index]) {
      let prev = null;
      for (let j = index - 1; j >= 0 && prev === null; j--) if (MSGS[j] != null) prev = MSGS[j];
      MSGS[index] = clone(Object.assign({}, prev === null ? IN.vars.initial || {} : prev, MSGS[index] || {}));
    } else if (MSGS[index] == null) {
      MSGS[index] = {};
    }
    V.message = MSGS[index];
    cache = clone(Object.assign({}, V.global, IN.vars.initial || {}, V.local, V.message));
    const m = CHAT[index] || {};
    Object.assign(CTX, { runType: 'render', message_id: index, swipe_id: 0, is_last: index === MSGS.length - 1,
                         is_user: !!m.is_user, is_system: !!m.is_system, name: m.name });
  }
  async function loadChat() {
    for (const index of IN.load.steps) {
      enterMessage(index);
      for (const t of IN.load.templates) {
        if (t.scope !== index) continue;
        try {
          out.results.push({ text: await run('m' + out.results.length, t.source, t.line, t.label, t.unit, t.origin) });
        } catch (e) {
          if (tripped !== null) { out.tripped = tripped; return; }
          const note = isObj(e) ? notes.get(e) || {} : {};
          out.results.push({ error: {
            name: isObj(e) && typeof e.name === 'string' ? e.name : typeof e,
            message: isObj(e) && typeof e.message === 'string' ? e.message : String(e),
            stack: isObj(e) && typeof e.stack === 'string' ? e.stack.slice(0, 2000) : '',
            label: note.label || t.label, code: note.code || null } });
        }
      }
    }
  }
  // --- [GENERATE:*] / @@generate_* special entries (ST-Prompt-Template's generate loader) --------------------------
  // IN.generate: {entries, settings: {case_sensitive, match_whole_words, use_group_scoring}, seed, phase}. Each
  // query takes the entries whose comment starts with its title or whose decorators hold its decorator line,
  // activates them as the extension does (constant, @@activate, else keys against `content`; probability, inclusion
  // groups), sorts them (depth, order, uid) and evaluates each with `world_info` and `generateBuffer` set; a failed
  // one adds nothing (its error is reported). As in the extension, an activated entry's decorator lines lose their
  // arguments for the rest of the run (`@@generate_after 2` then also answers `@@generate_after`).
  const GEN = IN.generate || null;
  // the input is frozen: the entries are copied, as their decorator lines change during the run
  const GEN_ENTRIES = GEN ? GEN.entries.map((e) => Object.assign({}, e, { decos: e.decos.slice() })) : [];
  let genSeed = GEN ? (GEN.seed >>> 0) : 0;
  function genRandom(lo, hi) {
    genSeed = (genSeed + 0x6D2B79F5) >>> 0;
    let t = genSeed;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    const r = ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    return lo + Math.floor(r * (hi - lo + 1));
  }
  function genRegexOf(text) {
    const m = /^\/([\w\W]+?)\/([gimsuy]*)$/.exec(text);
    if (!m) return null;
    try { return new RegExp(m[1], m[2]); } catch (e) { return null; }
  }
  function genMatchKey(haystack, needle, e) {
    const re = genRegexOf(needle);
    if (re) return re.test(haystack);
    const cs = e.caseSensitive == null ? GEN.settings.case_sensitive : e.caseSensitive;
    const hay = cs ? haystack : haystack.toLowerCase();
    const key = cs ? needle : needle.toLowerCase();
    const whole = e.matchWholeWords == null ? GEN.settings.match_whole_words : e.matchWholeWords;
    if (!whole) return hay.includes(key);
    if (key.split(/\s+/).length > 1) return hay.includes(key);
    const escaped = key.replace(/[\\^$.*+?()[\]{}|]/g, '\\$&');
    return new RegExp('(?:^|\\W)(' + escaped + ')(?:$|\\W)').test(hay);
  }
  function genKeysMatch(e, trigger) {
    // (the extension looks for the first matching key and tests it for truth: an empty key never activates)
    if (!e.keys.find((k) => genMatchKey(trigger, k, e))) return false;
    if (!(e.selective && e.keysecondary.length > 0)) return true;
    const logic = e.selectiveLogic || 0;
    let any = false, all = true;
    for (const s of e.keysecondary) {
      const hit = !!s && genMatchKey(trigger, s.trim(), e);
      if (hit) any = true; else all = false;
      if (logic === 0 && hit) return true;
      if (logic === 1 && !hit) return true;
    }
    return (logic === 2 && !any) || (logic === 3 && all);
  }
  const GEN_DEPTH = { 0: 4, 1: 3, 5: 2, 6: 1, 2: 1, 3: -1 };
  function genSort(list) {
    const top = Math.max(...list.map((x) => (x.position === 4 ? x.depth : 0)));
    function depthOf(x) {
      const offset = GEN_DEPTH[x.position];
      return offset === undefined ? (x.depth == null ? 4 : x.depth) : offset + top;
    }
    return list.sort((a, b) => depthOf(b) - depthOf(a) || a.order - b.order || b.uid - a.uid);
  }
  function genGroupScore(trigger, e) {
    if (!e.keys.length) return 0;
    const primary = e.keys.filter((k) => genMatchKey(trigger, k, e)).length;
    const secondary = e.keysecondary.filter((k) => genMatchKey(trigger, k, e)).length;
    if (e.keysecondary.length && e.selectiveLogic === 0) return primary + secondary;
    if (e.keysecondary.length && e.selectiveLogic === 3) return secondary === e.keysecondary.length ? primary + secondary : primary;
    return primary;
  }
  function genActivated(list, trigger) {
    const active = [];
    for (const e of list) {
      if (e.useProbability && e.probability < genRandom(1, 100)) continue;
      if (e.constant || e.decos.includes('@@activate')) { active.push(e); continue; }
      if (e.decos.includes('@@dont_activate') || e.decos.includes('@@only_preload')) continue;
      if (genKeysMatch(e, trigger)) active.push(e);
    }
    if (!active.length) return [];
    const groups = new Map();
    for (const e of active) { if (!groups.has(e.group)) groups.set(e.group, []); groups.get(e.group).push(e); }
    const ungrouped = groups.get('') || [];
    if (ungrouped.length > 0 && groups.size <= 1) return genSort(ungrouped);
    const chosen = [];
    for (const [group, items] of groups) {
      if (group === '') continue;
      if (items.length === 1) { chosen.push(items[0]); continue; }
      if (items.some((x) => x.groupOverride)) {
        const top = Math.min(...items.map((x) => x.order));
        if (top) { chosen.push(items[Math.max(items.findIndex((x) => x.order <= top), 0)]); continue; }
      }
      if (items.some((x) => (x.useGroupScoring == null ? GEN.settings.use_group_scoring : x.useGroupScoring))) {
        const scores = items.map((x) => genGroupScore(trigger, x));
        const top = Math.max(...scores);
        if (top) { chosen.push(items[Math.max(scores.findIndex((x) => x >= top), 0)]); continue; }
      }
      if (items.some((x) => !x.groupOverride && !x.useGroupScoring)) {
        const weights = items.map((x) => (x.groupWeight == null ? 100 : x.groupWeight));
        let roll = genRandom(1, weights.reduce((a, b) => a + b, 0));
        const winner = weights.findIndex((w) => (roll -= w) <= 0);
        if (winner >= 0) chosen.push(items[winner]);
      }
    }
    return genSort(ungrouped.concat(chosen));
  }
  function genError(e, err) {
    return { label: e.label, name: isObj(err) ? err.name : typeof err, message: isObj(err) ? err.message : String(err),
             stack: isObj(err) && typeof err.stack === 'string' ? err.stack.slice(0, 2000) : '' };
  }
  // one query: the activated entries' outputs, each as [label, text, entry] (the caller joins them)
  async function genQuery(title, decorator, content, buffer) {
    const list = GEN_ENTRIES.filter((e) => e.comment.startsWith(title) || e.decos.includes(decorator));
    const pieces = [];
    for (const e of genActivated(list, content)) {
      e.decos = e.decos.map((d) => (d.indexOf(' ') >= 0 ? d.slice(0, d.indexOf(' ')) : d));
      if (e.cond && !e.disable && (await genCondition(e)) === 'false') continue;
      try {
        merge(CTX, { world_info: e.info, generateBuffer: buffer });
        const text = e.source === null ? e.content : await run(e.key, e.source, e.line, e.label, e.unit, e.origin);
        pieces.push([e.label, text, e.info]);
      } catch (err) {
        if (tripped !== null) throw err;
        out.generate_errors.push(genError(e, err));
      }
    }
    return pieces;
  }
  // an entry's @@if condition as text; a failing one filters nothing (its error is reported)
  async function genCondition(e) {
    try {
      return await run(e.key + ':if', e.cond.source, e.cond.line, e.label, e.cond.unit);
    } catch (err) {
      if (tripped !== null) throw err;
      out.generate_errors.push(genError(e, err));
      return null;
    }
  }
  function genJoin(pieces) { return pieces.map((p) => p[1]).join(''); }
  // the messages with the generate loader: per message its [GENERATE:n:BEFORE], its own templates, its
  // [GENERATE:n:AFTER]; then [GENERATE:AFTER] over all of it; [GENERATE:BEFORE] (evaluated before the world-info
  // scan, given as IN.generate.before) leads the first message, the last one ends with [GENERATE:AFTER]
  async function genMessages() {
    const texts = IN.texts.slice();
    const byIndex = new Map(IN.templates.map((t, i) => [t.index, i]));
    const pieces = texts.map(() => null);
    const before = GEN.before || '';
    let collect = before;
    for (let idx = 0; idx < texts.length; idx++) {
      const head = await genQuery('[GENERATE:' + idx + ':BEFORE]', '@@generate_before ' + idx, '', collect);
      let prompt = texts[idx];
      const t = byIndex.has(idx) ? IN.templates[byIndex.get(idx)] : null;
      if (t !== null) {
        const r = await evalMessage(t, byIndex.get(idx));
        if (out.tripped) return;
        out.results.push(r);
        prompt = r.text === undefined ? null : r.text;
      } else if (IN.failed.indexOf(idx) >= 0) {
        prompt = null;
      }
      // (the extension's buffer reads "null" for a message that failed)
      const tail = await genQuery('[GENERATE:' + idx + ':AFTER]', '@@generate_after ' + idx, prompt || '',
                                  collect + genJoin(head) + String(prompt));
      if (prompt !== null) {
        texts[idx] = genJoin(head) + prompt + genJoin(tail);
        collect += texts[idx];
        pieces[idx] = head.concat([[null, prompt, null]], tail);
      }
    }
    const after = await genQuery('[GENERATE:AFTER]', '@@generate_after', collect, before + collect);
    if (before.trim() && texts.length) {
      texts[0] = before + texts[0];
      pieces[0] = (GEN.before_pieces || []).concat(pieces[0] || [[null, IN.texts[0], null]]);
    }
    if (genJoin(after).trim() && texts.length) {
      const last = texts.length - 1;
      texts[last] += genJoin(after);
      pieces[last] = (pieces[last] || [[null, IN.texts[last], null]]).concat(after);
    }
    out.generated = { texts: texts, pieces: pieces };
  }
  if (GEN) out.generate_errors = [];

  async function evalMessage(t, i) {
    try {
      return { text: await run('m' + i, t.source, t.line, t.label, t.unit, t.origin) };
    } catch (e) {
      if (tripped !== null) { out.tripped = tripped; return {}; }
      const note = isObj(e) ? notes.get(e) || {} : {};
      return {
        error: {
          name: isObj(e) && typeof e.name === 'string' ? e.name : typeof e,
          message: isObj(e) && typeof e.message === 'string' ? e.message : String(e),
          stack: isObj(e) && typeof e.stack === 'string' ? e.stack.slice(0, 2000) : '',
          label: note.label || t.label, code: note.code || null,
        },
      };
    }
  }
  if (IN.load) await loadChat();
  if (GEN && GEN.phase === 'before') {
    // before the world-info scan: [GENERATE:BEFORE] first, then the texts (conditions, preprocessed entries)
    try {
      out.generate_before = await genQuery('[GENERATE:BEFORE]', '@@generate_before', '', '');
    } catch (e) {
      if (tripped !== null) out.tripped = tripped; else throw e;
    }
  }
  if (out.tripped) {
    // a budget tripped: nothing else runs
  } else if (GEN && GEN.phase === 'messages') {
    try {
      await genMessages();
    } catch (e) {
      if (tripped !== null) out.tripped = tripped; else throw e;
    }
  } else {
    for (let i = 0; i < IN.templates.length; i++) {
      const r = await evalMessage(IN.templates[i], i);
      if (out.tripped) break;
      out.results.push(r);
    }
  }
  if (!out.tripped && IN.inject && IN.inject.length) {
    try {
      const texts = out.generated ? out.generated.texts.slice() : IN.texts.slice();
      if (!out.generated) out.results.forEach((r, i) => { if (r.text !== undefined) texts[IN.templates[i].index] = r.text; });
      out.injected = await injectMessages(IN.inject, IN.roles, texts);
    } catch (e) {
      if (tripped !== null) out.tripped = tripped;
      else throw e;
    }
  }
  if (!out.tripped) {
    for (const r of out.results) if (r.text !== undefined) r.text = fillOutlets(r.text);
    if (out.injected) for (const m of out.injected) m.content = fillOutlets(m.content);
    if (out.generated) {
      out.generated.texts = out.generated.texts.map(fillOutlets);
      for (const list of out.generated.pieces) if (list) for (const p of list) p[1] = fillOutlets(p[1]);
    }
  }
  out.activated = Array.from(activations.values());
  out.variables = { global: V.global, chat: V.local, message: V.message };
  if (MSGS) out.variables.messages = MSGS;
  __tb.append(JSON.stringify(out));
  __tb.finish();
})
