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

  function budget(code, message, label) {
    const e = new RangeError(message);
    tripped = tripped || { code: code, message: message, label: label };
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
    let made;
    try { made = { fn: (0, eval)('\n'.repeat(line - 1) + src) }; } catch (e) { made = { error: e }; }
    compiled.set(key, made);
    return made;
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
      return bracketed(e, await run(e.key, e.source, e.line, e.label, e.origin));
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
    activewi: function () { read('activewi', null, null); }, activateWorldInfo: function () { read('activewi', null, null); },
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
  async function run(key, source, line, label, origin) {
    const made = fnOf(key, source, line);
    if (made.error !== undefined) throw made.error;
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
      if (kind !== null) throw budget(kind, label + ': ' + e.name + ': ' + e.message, label);
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
        content = e.source === null ? e.content : await run(e.key, e.source, e.line, e.label, e.origin);
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

  for (let i = 0; i < IN.templates.length; i++) {
    const t = IN.templates[i];
    try {
      out.results.push({ text: await run('m' + i, t.source, t.line, t.label, t.origin) });
    } catch (e) {
      if (tripped !== null) { out.tripped = tripped; break; }
      const note = isObj(e) ? notes.get(e) || {} : {};
      out.results.push({
        error: {
          name: isObj(e) && typeof e.name === 'string' ? e.name : typeof e,
          message: isObj(e) && typeof e.message === 'string' ? e.message : String(e),
          stack: isObj(e) && typeof e.stack === 'string' ? e.stack.slice(0, 2000) : '',
          label: note.label || t.label, code: note.code || null,
        },
      });
    }
  }
  if (!out.tripped && IN.inject && IN.inject.length) {
    try {
      const texts = IN.texts.slice();
      out.results.forEach((r, i) => { if (r.text !== undefined) texts[IN.templates[i].index] = r.text; });
      out.injected = await injectMessages(IN.inject, IN.roles, texts);
    } catch (e) {
      if (tripped !== null) out.tripped = tripped;
      else throw e;
    }
  }
  if (!out.tripped) {
    for (const r of out.results) if (r.text !== undefined) r.text = fillOutlets(r.text);
    if (out.injected) for (const m of out.injected) m.content = fillOutlets(m.content);
  }
  out.variables = { global: V.global, chat: V.local, message: V.message };
  __tb.append(JSON.stringify(out));
  __tb.finish();
})
