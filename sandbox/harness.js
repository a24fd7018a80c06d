// The trusted in-VM prelude of tavernbox's sandbox (evaluated once per fresh QuickJS context,
// before any untrusted code exists in it).
//
// Why it is shaped like this (see research/sandbox-security.md sections 0 and 4):
//  * every intrinsic the harness relies on is captured here, so a template that overrides
//    String.prototype.replace, JSON.stringify or Promise.prototype.then cannot bypass escaping,
//    forge output or stall the harness;
//  * the built-ins that loop in C without polling the interrupt handler on huge (sparse) lengths
//    get length guards, so `Array(2**32-1).join('')` fails fast instead of hanging the worker;
//  * host reach that can call back into the binding's unguarded conversions (queueMicrotask,
//    FinalizationRegistry, WeakRef) and the high-resolution clock are removed;
//  * every reachable intrinsic, the hidden ones included, is frozen, and the global bindings are
//    made non-writable and non-configurable (the global object itself stays extensible so that
//    sloppy-mode templates can still create their own globals in their own throwaway context);
//  * the host never receives a JS object from user code: `poll()` returns a JSON string built
//    here with the captured JSON.stringify, and user exceptions are reduced to plain strings.
//
// The script's completion value is an installer
// `(planKinds, planKeys, planParents, planGroups, planLazy, planLazyGroups, replay?) => dispatch`, where
// `dispatch(op, a, b)` runs `prepare(payload)`, `start(outputLimit)`, `poll()`, `settled()` or `seeds()`. `payload` is
// the parsed JSON array [programSource, [variables]], or in bridge mode (the template API of issue 4)
// [programSource, [null], [answersTable, bridgeCallLimit]].
(function (planSteps, planKeys, planParents, planGroups, planLazy, planLazyGroups, replay) {
  'use strict';
  const G = globalThis;
  const O = Object;
  const R = Reflect;
  const apply = R.apply;
  const freeze = O.freeze;
  const isFrozen = O.isFrozen;
  const create = O.create;
  const defineProperty = O.defineProperty;
  const getOwnPropertyDescriptor = O.getOwnPropertyDescriptor;
  const getPrototypeOf = O.getPrototypeOf;
  const ownKeys = R.ownKeys;
  const hasOwn = O.hasOwn;
  const isArray = Array.isArray;
  const objectKeys = O.keys;
  const jsonStringify = JSON.stringify;
  const Str = String;
  const Num = Number;
  const isError = Error.isError;
  const indirectEval = G.eval;
  const PromiseCtor = Promise;
  const ProxyCtor = Proxy;
  const promiseThen = Promise.prototype.then;
  const strReplace = String.prototype.replace;
  const strSlice = String.prototype.slice;
  const strSplit = String.prototype.split;
  const strCharCodeAt = String.prototype.charCodeAt;
  const reExec = RegExp.prototype.exec;
  const arrPush = Array.prototype.push;
  const arrPop = Array.prototype.pop;
  const arrJoin = Array.prototype.join;
  const RangeErrorProto = RangeError.prototype;
  const InternalErrorProto = InternalError.prototype;
  const SyntaxErrorProto = SyntaxError.prototype;
  const ErrorProto = Error.prototype;
  // `stack` is a native accessor on Error.prototype in this engine (computed lazily).
  const stackDescriptor = getOwnPropertyDescriptor(ErrorProto, 'stack');
  const stackGetter = stackDescriptor !== undefined ? stackDescriptor.get : undefined;

  // Longest array (or array-like) the guarded built-ins accept. Sparse arrays cost nothing to
  // allocate, so the memory limit does not bound these loops; at ~15 ns per element in C, 2**20
  // elements stay well inside the time budget between two interrupt checks.
  const MAX_GUARDED_LENGTH = 1048576;

  // Sticky trip flags: a template can catch the error a guard throws, but the render still fails
  // with the budget's code, so catch-and-retry cannot turn a tripped budget into a success.
  let outputTripped = false;
  let guardTripped = false;

  function lengthOf(o) {
    if (o === null || o === undefined) return 0;
    const n = o.length;
    return typeof n === 'number' ? n : Num(n);
  }

  function tooLong(name, n) {
    guardTripped = true;
    return new RangeError('tavernbox: ' + name + ' on an array of length ' + n +
      ' exceeds the sandbox limit of ' + MAX_GUARDED_LENGTH);
  }

  // --- length guards on Array.prototype methods that loop in C ---------------------------------
  const arrayProto = Array.prototype;
  const guarded = ['join', 'toString', 'toLocaleString', 'reverse', 'sort', 'copyWithin', 'fill',
    'slice', 'splice', 'concat', 'flat', 'flatMap', 'shift', 'unshift', 'indexOf', 'lastIndexOf',
    'includes', 'forEach', 'map', 'filter', 'some', 'every', 'reduce', 'reduceRight', 'find',
    'findIndex', 'findLast', 'findLastIndex', 'toReversed', 'toSorted', 'toSpliced', 'with'];
  const HARNESS_FRAMES = create(null);
  for (let i = 0; i < guarded.length; i++) HARNESS_FRAMES[guarded[i]] = true;
  HARNESS_FRAMES.append = true;
  HARNESS_FRAMES.escape = true;
  HARNESS_FRAMES.start = true;
  HARNESS_FRAMES.stringify = true;
  HARNESS_FRAMES.guard = true;
  HARNESS_FRAMES.Wrapper = true;
  function guardCall(self, args, name) {
    const n = lengthOf(self);
    if (n > MAX_GUARDED_LENGTH) throw tooLong(name, n);
    // concat also walks its spreadable arguments.
    if (name === 'concat') {
      for (let j = 0; j < args.length; j++) {
        const a = args[j];
        if (isArray(a)) {
          const m = a.length;
          if (m > MAX_GUARDED_LENGTH) throw tooLong(name, m);
        }
      }
    }
  }
  HARNESS_FRAMES.guardCall = true;
  for (let i = 0; i < guarded.length; i++) {
    const name = guarded[i];
    const original = arrayProto[name];
    if (typeof original !== 'function') continue;
    // Method syntax gives a non-constructor function, like the original, and its parameter
    // count the original's `length` (no descriptor to define for the usual 0, 1 or 2).
    let wrapper;
    const arity = original.length;
    if (arity === 0) {
      wrapper = ({ [name]() { guardCall(this, arguments, name); return apply(original, this, arguments); } })[name];
    } else if (arity === 1) {
      wrapper = ({ [name](a) { guardCall(this, arguments, name); return apply(original, this, arguments); } })[name];
    } else {
      wrapper = ({ [name](a, b) { guardCall(this, arguments, name); return apply(original, this, arguments); } })[name];
      if (arity !== 2) defineProperty(wrapper, 'length', { value: arity });
    }
    // The methods are writable, non-enumerable, configurable data properties: assigning keeps
    // exactly those attributes.
    arrayProto[name] = wrapper;
  }

  // JSON.stringify walks every index of a sparse array in C: guard arrays through a replacer.
  const originalStringify = JSON.stringify;
  const guardedStringify = ({
    stringify(value, replacer, space) {
      if (isArray(replacer)) {
        // A property allow-list cannot be composed with a guard replacer; only the top level
        // is checked (deeper sparse arrays are bounded by the memory limit).
        if (isArray(value) && value.length > MAX_GUARDED_LENGTH) throw tooLong('JSON.stringify', value.length);
        return apply(originalStringify, JSON, [value, replacer, space]);
      }
      const user = typeof replacer === 'function' ? replacer : undefined;
      const guard = function (key, v) {
        if (user !== undefined) v = apply(user, this, [key, v]);
        if (isArray(v) && v.length > MAX_GUARDED_LENGTH) throw tooLong('JSON.stringify', v.length);
        return v;
      };
      return apply(originalStringify, JSON, [value, guard, space]);
    },
  }).stringify;
  defineProperty(guardedStringify, 'length', { value: 3 });
  defineProperty(JSON, 'stringify', { value: guardedStringify, writable: true, enumerable: false, configurable: true });

  // --- error constructors that mark what they build --------------------------------------------
  // Budget errors the engine raises inside user code (stack overflow, out of memory) are
  // catchable JS errors. To classify them without trusting text a template controls, every
  // error constructor a template can reach is replaced by a wrapper that records the errors it
  // builds: an error with an engine message that was *not* built by a template is the engine's.
  // (`class X extends Error`, `Reflect.construct(TypeError, [m], RangeError)` and calls without
  // `new` all go through a wrapper.)
  const WeakSetCtor = WeakSet;
  const forged = new WeakSetCtor();
  const forgedAdd = WeakSet.prototype.add;
  const forgedHas = WeakSet.prototype.has;
  const construct = R.construct;
  const setPrototypeOf = O.setPrototypeOf;
  const errorNames = ['Error', 'EvalError', 'RangeError', 'ReferenceError', 'SyntaxError', 'TypeError',
    'URIError', 'InternalError', 'AggregateError', 'SuppressedError', 'DOMException'];
  const wrappers = create(null);
  const plainStatic = { value: undefined, writable: false, enumerable: false, configurable: true };
  const protoStatic = { value: undefined, writable: false, enumerable: false, configurable: false };
  function wrapError(name, Real) {
    const Wrapper = function (...args) {
      const e = construct(Real, args, new.target === undefined ? Wrapper : new.target);
      apply(forgedAdd, forged, [e]);
      return e;
    };
    const statics = ownKeys(Real);
    for (let j = 0; j < statics.length; j++) {
      const k = statics[j];
      if (k === 'prototype') continue;
      if (k === 'length') { plainStatic.value = Real.length; defineProperty(Wrapper, k, plainStatic); continue; }
      if (k === 'name') { plainStatic.value = name; defineProperty(Wrapper, k, plainStatic); continue; }
      const d = getOwnPropertyDescriptor(Real, k);
      // Accessor statics (prepareStackTrace, stackTraceLimit) would hand templates the engine's
      // own setters; the wrapper gets their current value as a plain data property instead.
      if (hasOwn(d, 'value')) defineProperty(Wrapper, k, d);
      else defineProperty(Wrapper, k, { value: apply(d.get, Real, []), writable: false, enumerable: d.enumerable, configurable: true });
    }
    protoStatic.value = Real.prototype;
    defineProperty(Wrapper, 'prototype', protoStatic);
    // Both are writable, non-enumerable, configurable data properties: assigning keeps that.
    Real.prototype.constructor = Wrapper;
    wrappers[name] = Wrapper;
    return Wrapper;
  }
  for (let i = 0; i < errorNames.length; i++) {
    const name = errorNames[i];
    const Real = G[name];
    if (typeof Real !== 'function') continue;
    G[name] = wrapError(name, Real);
  }
  for (let i = 0; i < errorNames.length; i++) {
    const w = wrappers[errorNames[i]];
    if (w !== undefined && errorNames[i] !== 'Error' && errorNames[i] !== 'DOMException') setPrototypeOf(w, wrappers.Error);
  }
  function engineMade(e) { return isError(e) && !apply(forgedHas, forged, [e]); }

  // --- the render's clock ----------------------------------------------------------------------
  // Date.now(), new Date() and Date() read the render's fixed `now` (a payload input, the same in
  // every replay pass), never the host's clock, so a render replays exactly. The constructor is
  // a wrapper like the error constructors': same prototype, statics and subclassing.
  const RealDate = Date;
  const realDateNow = Date.now;
  const dateToString = Date.prototype.toString;
  let fixedNow = NaN;
  function clockNow() { return fixedNow === fixedNow ? fixedNow : apply(realDateNow, RealDate, []); }
  const DateWrapperCtor = function Date(a, b, c, d, e, f, g) {
    if (new.target === undefined) return apply(dateToString, construct(RealDate, [clockNow()]), []);
    return construct(RealDate, arguments.length === 0 ? [clockNow()] : arguments, new.target);
  };
  {
    const statics = ownKeys(RealDate);
    for (let j = 0; j < statics.length; j++) {
      const k = statics[j];
      if (k === 'prototype' || k === 'length' || k === 'name') continue;
      const d = getOwnPropertyDescriptor(RealDate, k);
      if (k === 'now') d.value = ({ now() { return clockNow(); } }).now;
      defineProperty(DateWrapperCtor, k, d);
    }
    plainStatic.value = 7;
    defineProperty(DateWrapperCtor, 'length', plainStatic);
    plainStatic.value = 'Date';
    defineProperty(DateWrapperCtor, 'name', plainStatic);
    protoStatic.value = RealDate.prototype;
    defineProperty(DateWrapperCtor, 'prototype', protoStatic);
    RealDate.prototype.constructor = DateWrapperCtor;
    G.Date = DateWrapperCtor;
  }
  HARNESS_FRAMES.Date = true;
  HARNESS_FRAMES.clockNow = true;

  // --- engine-internal values ------------------------------------------------------------------
  // String.prototype.normalize and localeCompare, when the engine runs out of memory inside them,
  // throw its internal "uninitialized" marker instead of an error (typeof gives "unknown"). The
  // wrappers turn anything but a language value into a sticky memory trip, so no such value ever
  // reaches template code.
  const LANGUAGE_TYPES = create(null);
  LANGUAGE_TYPES.undefined = true;
  LANGUAGE_TYPES.object = true;
  LANGUAGE_TYPES.boolean = true;
  LANGUAGE_TYPES.number = true;
  LANGUAGE_TYPES.bigint = true;
  LANGUAGE_TYPES.string = true;
  LANGUAGE_TYPES.symbol = true;
  LANGUAGE_TYPES.function = true;
  const memoryGuarded = ['normalize', 'localeCompare'];
  for (let i = 0; i < memoryGuarded.length; i++) {
    const name = memoryGuarded[i];
    const original = String.prototype[name];
    const wrapper = ({
      [name](a) {
        try {
          return apply(original, this, arguments);
        } catch (e) {
          if (LANGUAGE_TYPES[typeof e] === true) throw e;
          guardTripped = true;
          throw new RangeError('tavernbox: ' + name + ' ran out of the memory budget');
        }
      },
    })[name];
    plainStatic.value = original.length;
    defineProperty(wrapper, 'length', plainStatic);
    String.prototype[name] = wrapper;
    HARNESS_FRAMES[name] = true;
  }

  // Bindings frozen on first read instead of in every fresh context (see lazyValue below): each
  // holds intrinsics that only the binding itself leads to, through properties and through what
  // the engine builds. (Not DOMException, for one: the engine throws those from atob and btoa.)
  const LAZY_NAMES = ['Math', 'Atomics', 'Date', 'Map', 'Set', 'WeakMap', 'Proxy', 'DisposableStack',
    'AsyncDisposableStack', 'ArrayBuffer', 'SharedArrayBuffer', 'DataView', 'Int8Array', 'Uint8Array',
    'Uint8ClampedArray', 'Int16Array', 'Uint16Array', 'Int32Array', 'Uint32Array', 'BigInt64Array', 'BigUint64Array',
    'Float16Array', 'Float32Array', 'Float64Array'];
  // Pairs of lazy bindings frozen together: the engine hands out an object of the one's family
  // from the other's functions (new Uint8Array(2).buffer is an ArrayBuffer), with no property
  // path between them for the discovery walk to see.
  const LAZY_TIED = [['ArrayBuffer', 'Int8Array']];

  // --- remove host reach -------------------------------------------------------------------------
  // queueMicrotask / FinalizationRegistry callbacks run outside any promise chain the harness
  // guards, so a hostile throw would reach the binding's unguarded conversion; WeakRef makes GC
  // observable; performance.now is a high-resolution clock.
  const removed = ['queueMicrotask', 'FinalizationRegistry', 'WeakRef', 'performance', '__date_clock'];
  for (let i = 0; i < removed.length; i++) delete G[removed[i]];
  // The entry marker the host prefixes to the program: it flips `entered` once the program's
  // code starts to run, so a SyntaxError thrown before it is a compile error and one thrown
  // after it is a runtime error (a template cannot fake the difference).
  let entered = false;
  const ENTER_PREFIX = '__tbEnter();';
  // Precompiled programs (worker.py's ProgramCache): the host evaluates the program's cached
  // bytecode itself, under the template's budget, and hands this function the outcome before
  // `start` runs: (1, the program's value) or (2, what its top level threw). Only the host's
  // last call before `start` counts: a template that calls this from code that runs while its
  // program is evaluated is overwritten, and once `start` ran nothing is taken any more.
  let handoffOpen = true;
  let handoffKind = 0;
  let handoffValue;
  const enter = freeze(({
    __tbEnter(kind, value) {
      entered = true;
      if (handoffOpen && (kind === 1 || kind === 2)) {
        handoffKind = kind;
        handoffValue = value;
      }
    },
  }).__tbEnter);

  // --- freeze every reachable intrinsic (SES lockdown-lite) ------------------------------------
  // Roots: the global object plus the hidden intrinsics reachable only through instances.
  const seeds = [G];
  function addSeed(f) { try { const v = f(); if (v !== null && v !== undefined) seeds.push(v); } catch (e) { /* absent */ } }
  addSeed(() => getPrototypeOf(function* () {}));
  addSeed(() => getPrototypeOf(getPrototypeOf((function* () {})())));
  addSeed(() => getPrototypeOf(async function () {}));
  addSeed(() => getPrototypeOf(async function* () {}));
  addSeed(() => getPrototypeOf(getPrototypeOf((async function* () {})())));
  addSeed(() => getPrototypeOf(getPrototypeOf(getPrototypeOf((async function* () {})()))));
  addSeed(() => getPrototypeOf([][Symbol.iterator]()));
  addSeed(() => getPrototypeOf(new Map()[Symbol.iterator]()));
  addSeed(() => getPrototypeOf(new Set()[Symbol.iterator]()));
  addSeed(() => getPrototypeOf(''[Symbol.iterator]()));
  addSeed(() => getPrototypeOf(''.matchAll(/a/g)));
  addSeed(() => getPrototypeOf([].values().map((x) => x)));
  addSeed(() => getPrototypeOf(Iterator.from({ next() { return { done: true }; } })));

  // Finding every intrinsic means reading every property descriptor (~5 ms in this engine), so
  // intrinsics.js walks the graph once per worker and records a plan; every later context
  // replays it here (see intrinsics.js for the encoding). An empty plan freezes nothing: that
  // is the discovery context itself.
  // A worker that precompiles the harness passes `replay` instead: the same plan as straight-line
  // code (worker.py replay_source), which also locks the global bindings below; it returns how
  // many it locked, and any other global is locked by the loop as before.
  // The lazily frozen bindings (see below): their values, taken before the bindings are replaced.
  const SEP = '\u0001';
  const lazyNames = planLazy === '' || planLazy === undefined ? [] : apply(strSplit, planLazy, [SEP]);
  const lazyRoots = [];
  for (let i = 0; i < lazyNames.length; i++) lazyRoots[i] = G[lazyNames[i]];
  let globalsLocked = -1;
  // Per family: a function that freezes it, given the values of its bindings.
  const familyFreeze = [];
  if (typeof replay === 'function') {
    const made = replay(seeds, freeze, getOwnPropertyDescriptor, getPrototypeOf, G, defineProperty);
    globalsLocked = made[0];
    for (let i = 1; i < made.length; i++) familyFreeze[i - 1] = made[i];
  } else if (planSteps !== '') {
    const kinds = planSteps;
    const keys = apply(strSplit, planKeys, [SEP]);
    const objs = [];
    const at = (i, roots) => {
      const c = kinds[i];
      if (c === 'r') return seeds[+keys[i]];
      if (c === 'L') {
        for (let j = 0; j < lazyNames.length; j++) if (lazyNames[j] === keys[i]) return roots[j];
      }
      const o = objs[apply(strCharCodeAt, planParents, [i]) - 1];
      if (c === 'p') return getPrototypeOf(o);
      if (c === 'v') return o[keys[i]];
      if (c === 'V') return o[Symbol[keys[i]]];
      if (c === 'g') return getOwnPropertyDescriptor(o, keys[i]).get;
      if (c === 'G') return getOwnPropertyDescriptor(o, Symbol[keys[i]]).get;
      if (c === 's') return getOwnPropertyDescriptor(o, keys[i]).set;
      return getOwnPropertyDescriptor(o, Symbol[keys[i]]).set;
    };
    // (A factory, not a closure over the loop's `i`: the engine lets a `continue` skip closing it.)
    const familyFrom = (first, g) => (roots) => {
      for (let j = first; j < kinds.length; j++) {
        if (planGroups[j] !== g) continue;
        const v = at(j, roots);
        objs[j] = v;
        freeze(v);
      }
    };
    for (let i = 0; i < kinds.length; i++) {
      const g = planGroups[i];
      if (g !== '.') {
        const f = apply(strCharCodeAt, planGroups, [i]) - 65;
        if (familyFreeze[f] === undefined) familyFreeze[f] = familyFrom(i, g);
        continue;
      }
      const v = at(i, null);
      objs[i] = v;
      if (v !== G) freeze(v);
    }
  }
  // Lazily frozen families. A binding named in the plan becomes a non-writable, non-configurable
  // accessor whose getter freezes the binding's whole family the first time any of the family's
  // bindings is read, and only then returns the value.
  // Nothing else leads to a family's objects: no property path (intrinsics.js checks that when it
  // draws the plan) and no object the engine builds for a template outside the family's own
  // functions (LAZY_NAMES above lists only such bindings; tests/test_security.py tries the engine's
  // builders), so no template code ever holds one of them unfrozen, and freezing the third of the
  // intrinsics that most templates never touch is not paid by every fresh context. A freeze cut
  // short (the stack or memory ran out mid-way) throws before the value is returned and is redone
  // on the next read.
  // Per binding: its family is frozen (every later read is one array load).
  const lazyReady = [];
  function lazyValue(i) {
    const f = apply(strCharCodeAt, planLazyGroups, [i]) - 65;
    if (familyFreeze[f] !== undefined) familyFreeze[f](lazyRoots);
    for (let j = 0; j < lazyNames.length; j++) {
      if (apply(strCharCodeAt, planLazyGroups, [j]) - 65 === f) lazyReady[j] = true;
    }
    return lazyRoots[i];
  }
  // One descriptor, its getter swapped per binding (an arrow: no `this`, no prototype).
  const lazyDescriptor = { get: undefined, set: undefined, enumerable: false, configurable: false };
  const getterFor = (i) => () => (lazyReady[i] === true ? lazyRoots[i] : lazyValue(i));
  for (let i = 0; i < lazyNames.length; i++) {
    lazyDescriptor.get = getterFor(i);
    defineProperty(G, lazyNames[i], lazyDescriptor);
  }
  if (globalsLocked >= 0) globalsLocked += lazyNames.length;
  // Global bindings: non-writable, non-configurable (the global object stays extensible).
  const globalKeys = ownKeys(G);
  if (globalsLocked !== globalKeys.length) for (let i = 0; i < globalKeys.length; i++) {
    const k = globalKeys[i];
    const d = getOwnPropertyDescriptor(G, k);
    if (hasOwn(d, 'value')) defineProperty(G, k, { writable: false, configurable: false });
    else defineProperty(G, k, { configurable: false });
  }
  defineProperty(G, '__tbEnter', { value: enter, writable: false, enumerable: false, configurable: false });

  // --- output and escaping ---------------------------------------------------------------------
  const NON_ASCII = /[^\x00-\x7f]/;
  const UNITS_2PLUS = /[\u0080-\uffff]/g;
  const UNITS_3PLUS = /[\u0800-\uffff]/g;
  const PAIRS = /[\ud800-\udbff][\udc00-\udfff]/g;
  const ESCAPED_ANY = /[&<>"']/;
  // Five C-level passes with string patterns: a regex with a replacer function would call back
  // into JS once per character (200 KiB of '<' took ~0.4 s that way, ~30 ms this way).
  const strReplaceAll = String.prototype.replaceAll;
  function countMatches(s, re) {
    return s.length - apply(strReplace, s, [re, '']).length;
  }
  // UTF-8 length of a JS string: 1 byte per ASCII unit, 2 up to U+07FF, 3 above, 4 per surrogate
  // pair, 3 per lone surrogate (what U+FFFD costs when the host writes it out).
  function utf8Length(s) {
    if (apply(reExec, NON_ASCII, [s]) === null) return s.length;
    return s.length + countMatches(s, UNITS_2PLUS) + countMatches(s, UNITS_3PLUS) - countMatches(s, PAIRS);
  }

  let outputLimit = 0;
  // Exact UTF-8 bytes of parts[0 .. counted). Later pieces are not measured yet: a UTF-16 unit
  // is at most 3 UTF-8 bytes, so while outputBytes + 3 * uncountedUnits stays within the limit
  // no piece needs measuring (a regex scan per append was ~40% of a typical render's run time);
  // once it might not, everything is measured exactly, so the limit trips exactly as before.
  let outputBytes = 0;
  const parts = [];
  let partCount = 0;
  let counted = 0;
  let uncountedUnits = 0;
  // The text settleOutput joined, and how many parts it held (parts are only ever appended, so
  // the same count means the same text): poll reuses it instead of joining twice.
  let joinedText = '';
  let joinedCount = -1;
  function outputText() {
    return joinedCount === partCount ? joinedText : apply(arrJoin, parts, ['']);
  }
  function settleOutput() {
    if (counted === 0 && partCount > 0) {
      // The usual end of a render: nothing measured yet. One scan of the joined text tells
      // whether every piece is ASCII (then bytes = units), instead of one scan per piece.
      const joined = apply(arrJoin, parts, ['']);
      joinedText = joined;
      joinedCount = partCount;
      if (apply(reExec, NON_ASCII, [joined]) === null) {
        outputBytes = joined.length;
        counted = partCount;
      }
    }
    while (counted < partCount) outputBytes += utf8Length(parts[counted++]);
    uncountedUnits = 0;
  }
  function outputError() {
    outputTripped = true;
    return new RangeError('tavernbox: the output passed the limit of ' + outputLimit + ' bytes');
  }
  const api = create(null);
  // The prototype of the compiled program's locals: null (plain ejs) or the template API (installApi).
  api.api = null;
  api.append = ({
    append(value) {
      if (value === undefined || value === null) return;
      if (outputTripped) throw outputError();
      const piece = '' + value;
      const units = piece.length;
      if (outputBytes + 3 * (uncountedUnits + units) > outputLimit) {
        settleOutput();
        const n = utf8Length(piece);
        if (outputBytes + n > outputLimit) throw outputError();
        outputBytes += n;
        counted = partCount + 1;
      } else {
        uncountedUnits += units;
      }
      // A local array; Array.prototype and Object.prototype are frozen, so no setter can run.
      parts[partCount++] = piece;
    },
  }).append;
  api.escape = ({
    escape(value) {
      if (value === undefined || value === null) return '';
      const s = Str(value);
      if (apply(reExec, ESCAPED_ANY, [s]) === null) return s;
      let r = apply(strReplaceAll, s, ['&', '&amp;']);
      r = apply(strReplaceAll, r, ['<', '&lt;']);
      r = apply(strReplaceAll, r, ['>', '&gt;']);
      r = apply(strReplaceAll, r, ['"', '&#34;']);
      return apply(strReplaceAll, r, ["'", '&#39;']);
    },
  }).escape;

  // --- error reduction -------------------------------------------------------------------------
  // Read a string-valued data property along the prototype chain without running getters.
  function dataString(o, key) {
    let cur = o;
    for (let depth = 0; depth < 64 && cur !== null && cur !== undefined; depth++) {
      const d = getOwnPropertyDescriptor(cur, key);
      if (d !== undefined) return hasOwn(d, 'value') && typeof d.value === 'string' ? d.value : '';
      cur = getPrototypeOf(cur);
    }
    return '';
  }
  const FRAME = /\(?<input>:(\d+):(\d+)\)?$/;
  const FRAME_NAME = /^\s*at (\S+)/;
  const CONSTRUCT_FRAME = /^\s*at construct \(native\)$/;
  // 1-based line/column of the first stack frame that is not the harness's own.
  function stackOf(e) {
    const own = getOwnPropertyDescriptor(e, 'stack');
    if (own !== undefined) return hasOwn(own, 'value') && typeof own.value === 'string' ? own.value : '';
    if (!isError(e) || typeof stackGetter !== 'function') return '';
    const s = apply(stackGetter, e, []);
    return typeof s === 'string' ? s : '';
  }
  function position(e, skipHarness) {
    const stack = stackOf(e);
    if (stack === '') return [0, 0];
    const lines = apply(strSplit, stack, ['\n']);
    // An error built through a constructor wrapper starts with the native `construct` frame
    // and the wrapper's own frame: both are ours, not the template's.
    const start = skipHarness && lines.length > 1 && apply(reExec, CONSTRUCT_FRAME, [lines[0]]) !== null ? 2 : 0;
    for (let i = start; i < lines.length && i < 32; i++) {
      const m = apply(reExec, FRAME, [lines[i]]);
      if (m === null) continue;
      if (skipHarness) {
        const fn = apply(reExec, FRAME_NAME, [lines[i]]);
        if (fn !== null && HARNESS_FRAMES[fn[1]] === true) continue;
      }
      const line = Num(m[1]);
      let column = Num(m[2]);
      // The host prefixes ENTER_PREFIX to the program's first line.
      if (line === 1 && column > ENTER_PREFIX.length) column -= ENTER_PREFIX.length;
      return [line, column];
    }
    return [0, 0];
  }
  function clip(s) { return s.length > 2000 ? apply(strSlice, s, [0, 2000]) + '...' : s; }

  function classify(e, phase) {
    if (bridgeTrip !== null) return bridgeTrip;
    if (outputTripped) return { kind: 'output', name: 'RangeError', message: 'output limit', line: 0, column: 0 };
    if (guardTripped) return { kind: 'memory', name: 'RangeError', message: 'array length guard', line: 0, column: 0 };
    const t = typeof e;
    // Not a language value: the engine's internal marker of a failed allocation.
    if (LANGUAGE_TYPES[t] !== true) return { kind: 'memory', name: '', message: 'out of memory', line: 0, column: 0 };
    // A null is either the template's own or the engine's failure to allocate its out-of-memory
    // error: the worker tells them apart (worker.py Worker.classify_null).
    if (e === null) return { kind: 'null', name: '', message: 'null', line: 0, column: 0 };
    if (t !== 'object' && t !== 'function') {
      // String(symbol) is the engine's own description ("Symbol(x)"), no method of the symbol runs.
      const message = t === 'string' ? e : Str(e);
      return { kind: 'throw', name: '', message: clip(message), line: 0, column: 0 };
    }
    const name = dataString(e, 'name');
    let message = dataString(e, 'message');
    if (!isError(e) && message === '') message = 'a non-Error ' + t + ' was thrown';
    if (engineMade(e)) {
      const proto = getPrototypeOf(e);
      const own = getOwnPropertyDescriptor(e, 'message');
      const ownMessage = own !== undefined && hasOwn(own, 'value') ? own.value : undefined;
      if (proto === InternalErrorProto && (ownMessage === 'out of memory' || ownMessage === 'string too long')) {
        return { kind: 'memory', name, message: ownMessage, line: 0, column: 0 };
      }
      if (proto === RangeErrorProto && ownMessage === 'BigInt is too large to allocate') {
        return { kind: 'memory', name, message: ownMessage, line: 0, column: 0 };
      }
      if (proto === RangeErrorProto && ownMessage === 'Maximum call stack size exceeded') {
        return { kind: 'stack', name, message: ownMessage, line: 0, column: 0 };
      }
      if (phase === 'compile' && !entered && proto === SyntaxErrorProto) {
        const pos = position(e, false);
        return { kind: 'syntax', name, message: clip(message), line: pos[0], column: pos[1] };
      }
    }
    const pos = position(e, true);
    return { kind: 'throw', name: clip(name), message: clip(message), line: pos[0], column: pos[1] };
  }

  // --- the render ------------------------------------------------------------------------------
  let state = 'idle';
  let failure = null;
  function fail(e, phase) {
    if (state !== 'running') return;
    let reduced;
    try { reduced = classify(e, phase); } catch (inner) {
      reduced = { kind: 'throw', name: '', message: 'an exception that could not be described', line: 0, column: 0 };
    }
    state = 'error';
    failure = reduced;
  }
  function succeed() {
    if (state !== 'running') return;
    if (outputTripped || guardTripped || bridgeTrip !== null) { fail(undefined, 'run'); return; }
    state = 'done';
  }

  // JSON data is a tree (no cycles, no sharing, only own enumerable data properties), and no
  // template code has run when this is called, so a plain stack walk is exact and safe.
  function deepFreeze(root) {
    if (typeof root !== 'object' || root === null) return root;
    const todo = [root];
    let n = 1;
    while (n > 0) {
      const o = todo[--n];
      freeze(o);
      if (isArray(o)) {
        for (let i = 0; i < o.length; i++) {
          const v = o[i];
          if (typeof v === 'object' && v !== null) todo[n++] = v;
        }
      } else {
        const keys = objectKeys(o);
        for (let i = 0; i < keys.length; i++) {
          const v = o[keys[i]];
          if (typeof v === 'object' && v !== null) todo[n++] = v;
        }
      }
    }
    return root;
  }

  // --- the template API and the lookup bridge (bridge mode only) --------------------------------
  // Why it is shaped like this (issue 4, seed 003): a template may read variables, world-info
  // entries, preset prompts and the character, but the VM never performs I/O. Every lookup is
  // answered from `answers`, a table of JSON the host has already authorised for this request; a
  // miss records the request (the first one only) and throws, and the host ends the pass no
  // matter what the template does next, resolves the request outside the VM and replays the
  // template from the start in a fresh context with the answer added. Leases never enter here.
  // Bridge failures are sticky like the output and length guards: catching them changes nothing.
  const MAX_REQUEST_CHARS = 4096;
  const MAX_PATH_SEGMENTS = 64;
  const RegExpCtor = RegExp;
  const reTest = RegExp.prototype.test;
  const isExtensible = O.isExtensible;
  const ReflectOps = ['get', 'has', 'ownKeys', 'getOwnPropertyDescriptor', 'getPrototypeOf', 'isExtensible'];
  let bridgeMode = false;
  let staticMode = false;
  const NO_ENTRIES = freeze([]);
  // The static API's answers (see installApi): nothing but the variables was given.
  function staticAnswer(kind) {
    if (kind === 'variables') return variablesValue;
    if (kind === 'worldbook-catalog') return NO_ENTRIES;
    return '';
  }
  let answers = null;
  let callLimit = 0;
  let calls = 0;
  let pendingKey = null;
  let pendingAt = [0, 0];
  let bridgeTrip = null;
  // Set by the compiled program's `finally` (`__tb.finish()`): the body is over, whatever
  // callbacks it left behind; they may not make the host resolve anything.
  let bodyFinished = false;
  api.finish = ({ finish() { bodyFinished = true; } }).finish;
  // Per-template time (worker.py TemplateClock, only when the host set template_time_ms): the
  // program names the template it is about to run (a small integer, -1 for none) and the host
  // reads it between pending-job steps (host.mark) to give that template its own slice of the
  // render's budget. Only a number is taken: nothing is converted, so no template code runs here.
  // What calling it buys a template that reaches it: docs/ARCHITECTURE.md "Per-template time".
  let currentMark = -1;
  api.mark = ({
    mark(n) {
      if (typeof n === 'number' && (n | 0) === n && n >= -1) currentMark = n;
    },
  }).mark;

  function here() {
    const pos = position(new Error('position'), true);
    return pos;
  }
  // A sticky bridge failure: the first one wins, and none counts once a lookup is pending (the
  // pass is void then; the replay will meet the failure again if it is real).
  function trip(kind, message) {
    if (bridgeTrip === null && pendingKey === null) {
      const pos = here();
      bridgeTrip = { kind, name: '', message: clip(message), line: pos[0], column: pos[1] };
    }
    return new Error('tavernbox: ' + message);
  }
  // One error object per pass, thrown again on every later call: a template that catches in a
  // loop must not make the harness build (and charge it for) thousands of stack traces.
  let stuckError = null;
  function pendingError() {
    if (stuckError === null) stuckError = new Error('tavernbox: a dependency is pending; this pass of the template is void');
    return stuckError;
  }
  function countCall(name) {
    if (state !== 'running' || bodyFinished) throw new Error('tavernbox: ' + name + '() after the template finished');
    if (pendingKey !== null) throw pendingError();
    if (bridgeTrip !== null) {
      if (stuckError === null) stuckError = new Error('tavernbox: ' + bridgeTrip.message);
      throw stuckError;
    }
    calls += 1;
    if (calls > callLimit) {
      throw trip('bridge', 'the template made more than ' + callLimit + ' bridge calls (' + name + ')');
    }
  }
  function checkArg(name, v) {
    const t = typeof v;
    if (t === 'string') return v;
    if (t === 'number' && v === v && v !== 1 / 0 && v !== -1 / 0) return v;
    throw new TypeError(name + ': expected a string or a finite number, got ' + (v === null ? 'null' : t));
  }
  // kind plus at most two string/number arguments, as canonical JSON (the table's key).
  function lookup(kind, a, b, n) {
    if (staticMode && n === 0) return staticAnswer(kind);
    if (pendingKey !== null) throw pendingError();
    const request = [kind];
    if (n > 0) apply(arrPush, request, [a]);
    if (n > 1) apply(arrPush, request, [b]);
    const key = originalStringify(request);
    if (key.length > MAX_REQUEST_CHARS) {
      throw trip('invalid', 'a ' + kind + ' request of ' + key.length + ' characters is longer than the limit of ' +
        MAX_REQUEST_CHARS);
    }
    if (staticMode) return staticAnswer(kind);
    if (hasOwn(answers, key)) return answers[key];
    if (bridgeTrip === null) {
      pendingKey = key;
      // Where the template asked: the host reports a refused dependency at this place.
      pendingAt = here();
    }
    throw pendingError();
  }

  // `variables`: a read-only view that asks for the variables only when touched, so a template
  // that never reads them never makes its source read its state (lazy MVU).
  let variablesValue;
  let variablesLoaded = false;
  function loadVariables() {
    if (!variablesLoaded) {
      variablesValue = lookup('variables', undefined, undefined, 0);
      variablesLoaded = true;
    }
    return variablesValue;
  }
  function materialize(target) {
    if (!isExtensible(target)) return;
    if (state !== 'running' || bodyFinished) throw new Error('tavernbox: variables read after the template finished');
    const v = loadVariables();
    if (typeof v === 'object' && v !== null) {
      const keys = ownKeys(v);
      for (let i = 0; i < keys.length; i++) {
        const d = getOwnPropertyDescriptor(v, keys[i]);
        defineProperty(target, keys[i], { value: d.value, writable: false, enumerable: d.enumerable, configurable: false });
      }
    }
    freeze(target);
  }
  const variablesHandler = create(null);
  for (let i = 0; i < ReflectOps.length; i++) {
    const op = R[ReflectOps[i]];
    variablesHandler[ReflectOps[i]] = function (target, a, b) { materialize(target); return apply(op, R, [target, a, b]); };
  }
  const refuse = function () { return false; };
  variablesHandler.set = refuse;
  variablesHandler.defineProperty = refuse;
  variablesHandler.deleteProperty = refuse;
  variablesHandler.setPrototypeOf = refuse;
  variablesHandler.preventExtensions = function (target) { materialize(target); return true; };
  freeze(variablesHandler);

  const FORBIDDEN_SEGMENTS = create(null);
  FORBIDDEN_SEGMENTS.__proto__ = true;
  FORBIDDEN_SEGMENTS.prototype = true;
  FORBIDDEN_SEGMENTS.constructor = true;
  // lodash-style paths: `a.b`, `a[0]`, `a['x.y']`, `a["x"]`; no negative indices.
  function parsePath(path) {
    const segments = [];
    let i = 0;
    const n = path.length;
    let cur = '';
    let pending = true;
    function push(seg) {
      if (segments.length >= MAX_PATH_SEGMENTS) {
        throw trip('invalid', 'getvar: the path has more than ' + MAX_PATH_SEGMENTS + ' segments');
      }
      apply(arrPush, segments, [seg]);
    }
    while (i < n) {
      const c = path[i];
      if (c === '.') {
        if (pending) push(cur);
        cur = '';
        pending = true;
        i += 1;
      } else if (c === '[') {
        if (pending && cur !== '') push(cur);
        cur = '';
        const q = path[i + 1];
        if (q === "'" || q === '"') {
          let j = i + 2;
          let seg = '';
          while (j < n && path[j] !== q) {
            if (path[j] === '\\' && j + 1 < n) j += 1;
            seg += path[j];
            j += 1;
          }
          if (j + 1 >= n + 1 || path[j + 1] !== ']') throw new TypeError('getvar: unclosed quoted segment in the path');
          push(seg);
          i = j + 2;
        } else {
          let j = i + 1;
          while (j < n && path[j] !== ']') j += 1;
          if (j >= n) throw new TypeError('getvar: unclosed [ in the path');
          const inner = apply(strSlice, path, [i + 1, j]);
          push(inner);
          i = j + 1;
        }
        pending = false;
      } else {
        cur += c;
        pending = true;
        i += 1;
      }
    }
    if (pending && (cur !== '' || n === 0 || path[n - 1] === '.')) push(cur);
    for (let k = 0; k < segments.length; k++) {
      if (FORBIDDEN_SEGMENTS[segments[k]] === true) {
        throw new TypeError("getvar: the path segment '" + segments[k] + "' is not allowed");
      }
    }
    return segments;
  }
  const GETVAR_OPTIONS = create(null);
  GETVAR_OPTIONS.scope = true;
  GETVAR_OPTIONS.defaults = true;
  GETVAR_OPTIONS.clone = true;
  const api2 = create(null);
  api2.getvar = ({
    getvar(path, options) {
      countCall('getvar');
      let scope;
      let defaults;
      if (typeof options === 'string') scope = options;
      else if (typeof options === 'object' && options !== null) {
        const keys = objectKeys(options);
        for (let i = 0; i < keys.length; i++) {
          if (GETVAR_OPTIONS[keys[i]] !== true) {
            throw trip('unsupported', "getvar option '" + keys[i] + "' is not supported: templates only read the cache scope");
          }
        }
        scope = options.scope;
        defaults = options.defaults;
      } else if (options !== undefined && options !== null) {
        throw new TypeError('getvar: options must be a scope string or an object');
      }
      if (scope !== undefined && scope !== 'cache') {
        throw trip('unsupported', "getvar scope '" + Str(typeof scope === 'string' ? scope : typeof scope) +
          "' is not supported: templates only read the cache scope");
      }
      const root = loadVariables();
      if (path === undefined || path === null) return root;
      if (typeof path === 'number' && path === path) path = '' + path;
      if (typeof path !== 'string') throw new TypeError('getvar: the path must be a string');
      if (path.length > MAX_REQUEST_CHARS) {
        throw trip('invalid', 'getvar: a path of ' + path.length + ' characters is longer than the limit of ' + MAX_REQUEST_CHARS);
      }
      if (FORBIDDEN_SEGMENTS[path] === true) throw new TypeError("getvar: the path segment '" + path + "' is not allowed");
      // As in lodash, an exact top-level key wins over the path reading ('a.b' as one key).
      if (typeof root === 'object' && root !== null && hasOwn(root, path)) return root[path];
      const segments = parsePath(path);
      let cur = root;
      for (let i = 0; i < segments.length; i++) {
        if (typeof cur !== 'object' || cur === null || !hasOwn(cur, segments[i])) return defaults;
        cur = cur[segments[i]];
      }
      return cur === undefined ? defaults : cur;
    },
  }).getvar;
  api2.getwi = ({
    getwi(book, title, data) {
      countCall('getwi');
      const n = arguments.length;
      if (n > 2 && data !== undefined) throw trip('unsupported', 'getwi: the data argument is not supported (entries are never rendered again)');
      if (n < 2) { title = book; book = ''; }
      if (book === undefined || book === null) book = '';
      book = checkArg('getwi', book);
      const isRegExp = typeof title === 'object' && title !== null && title instanceof RegExpCtor;
      if (!isRegExp) title = checkArg('getwi', title);
      const catalog = lookup('worldbook-catalog', book, undefined, 1);
      let hit = null;
      for (let i = 0; i < catalog.length && hit === null; i++) {
        const e = catalog[i];
        if (isRegExp) { if (apply(reTest, title, [e[2]])) hit = e; }
        else if (typeof title === 'number') { if (e[1] === title || e[1] === '' + title) hit = e; }
        else if (e[2] === title) hit = e;
      }
      if (hit === null && typeof title === 'string') {
        for (let i = 0; i < catalog.length && hit === null; i++) if ('' + catalog[i][1] === title) hit = catalog[i];
      }
      if (hit === null) return '';
      return lookup('worldbook-entry', hit[0], hit[1], 2);
    },
  }).getwi;
  api2.getpreset = ({
    getpreset(name, data) {
      countCall('getpreset');
      if (arguments.length > 1 && data !== undefined) throw trip('unsupported', 'getpreset: the data argument is not supported');
      return lookup('preset-prompt', checkArg('getpreset', name), undefined, 1);
    },
  }).getpreset;
  api2.getchar = ({
    getchar(name, template, data) {
      countCall('getchar');
      if (arguments.length > 1 && (template !== undefined || data !== undefined)) {
        throw trip('unsupported', 'getchar: template and data arguments are not supported (only the description is readable)');
      }
      if (name === undefined || name === null) name = '';
      return lookup('character', checkArg('getchar', name), undefined, 1);
    },
  }).getchar;
  // A read-only sliver of lodash (`_`, which ST-Prompt-Template exposes): real cards guard their
  // reads with `_.has(getvar('stat_data'), 'a.b')` and `_.get(variables, 'a.b', dflt)`. Same path
  // rules as getvar; own properties only; no bridge call (it only walks values already given).
  function walk(obj, path) {
    let segments;
    if (isArray(path)) {
      segments = [];
      for (let i = 0; i < path.length && i <= MAX_PATH_SEGMENTS; i++) apply(arrPush, segments, ['' + path[i]]);
      if (segments.length > MAX_PATH_SEGMENTS) throw trip('invalid', '_: the path has more than ' + MAX_PATH_SEGMENTS + ' segments');
      for (let k = 0; k < segments.length; k++) {
        if (FORBIDDEN_SEGMENTS[segments[k]] === true) throw new TypeError("_: the path segment '" + segments[k] + "' is not allowed");
      }
    } else {
      const text = typeof path === 'string' ? path : '' + checkArg('_', path);
      if (text.length > MAX_REQUEST_CHARS) throw trip('invalid', '_: a path longer than ' + MAX_REQUEST_CHARS + ' characters');
      if (typeof obj === 'object' && obj !== null && FORBIDDEN_SEGMENTS[text] !== true && hasOwn(obj, text)) return [true, obj[text]];
      segments = parsePath(text);
    }
    let cur = obj;
    for (let i = 0; i < segments.length; i++) {
      if ((typeof cur !== 'object' && typeof cur !== 'function') || cur === null || !hasOwn(cur, segments[i])) return [false, undefined];
      cur = cur[segments[i]];
    }
    return [true, cur];
  }
  const lodash = create(null);
  lodash.get = ({ get(obj, path, defaultValue) { const r = walk(obj, path); return r[0] && r[1] !== undefined ? r[1] : defaultValue; } }).get;
  lodash.has = ({ has(obj, path) { return walk(obj, path)[0]; } }).has;
  freeze(lodash.get);
  freeze(lodash.has);
  freeze(lodash);
  const ALIASES = [['getWorldInfo', 'getwi'], ['getPresetPrompt', 'getpreset'], ['getprp', 'getpreset'],
    ['getChara', 'getchar'], ['getchr', 'getchar']];
  // The ST-Prompt-Template writes and commands: a template here is read-only.
  const WRITES = ['setvar', 'setLocalVar', 'setGlobalVar', 'setMessageVar', 'incvar', 'incLocalVar', 'incGlobalVar',
    'incMessageVar', 'decvar', 'decLocalVar', 'decGlobalVar', 'decMessageVar', 'delvar', 'delLocalVar',
    'delGlobalVar', 'delMessageVar', 'insvar', 'insLocalVar', 'insGlobalVar', 'insMessageVar', 'patchVariables',
    'setVariableSchema', 'execute', 'activewi', 'activateWorldInfo', 'activateWorldInfoByKeywords', 'injectPrompt',
    'activateRegex', 'define', 'evalTemplate'];
  // Reads of state this engine does not give templates (other scopes, chat, quick replies, raw data).
  const UNAVAILABLE = ['getLocalVar', 'getGlobalVar', 'getMessageVar', 'getqr', 'getQuickReply', 'getChatMessage',
    'getChatMessages', 'matchChatMessages', 'getWorldInfoData', 'getWorldInfoActivatedData',
    'getEnabledWorldInfoEntries', 'selectActivatedEntries', 'getEnabledLoreBooks', 'getCharData',
    'getQuickReplyData', 'getPromptsInjected', 'hasPromptsInjected', 'findVariables', 'applyVarYamlAnnotate'];
  // Not frozen: nothing reads their properties (like the plain built-in methods), and freezing
  // ~50 functions in every fresh context cost more than the rest of the API together.
  function unsupported(name, why) {
    HARNESS_FRAMES[name] = true;
    return ({
      [name]() { throw trip('unsupported', name + '() is not supported: ' + why); },
    })[name];
  }
  const API_NAMES = ['getvar', 'getwi', 'getpreset', 'getchar', 'lookup', 'walk', 'countCall', 'trip', 'here', 'loadVariables',
    'materialize', 'checkArg', 'parsePath', 'push', 'unsupported', 'staticAnswer'];
  for (let i = 0; i < API_NAMES.length; i++) HARNESS_FRAMES[API_NAMES[i]] = true;
  // The API's locals, built once per context in the prelude (before any template code): a render
  // only copies them into its own locals object.
  // The template API, built with the context (in the prelude, not on a render's path): the
  // prototype of the compiled program's locals (`__tb.api`), so a render copies only its own
  // `variables`. Not frozen: nothing trusted reads it again, and a template's `_ = 5` lands on its
  // own locals copy as before.
  const apiObject = create(null);
  apiObject._ = lodash;
  {
    const names = objectKeys(api2);
    for (let i = 0; i < names.length; i++) apiObject[names[i]] = freeze(api2[names[i]]);
    for (let i = 0; i < ALIASES.length; i++) apiObject[ALIASES[i][0]] = api2[ALIASES[i][1]];
    const readOnly = 'templates are read-only';
    for (let i = 0; i < WRITES.length; i++) apiObject[WRITES[i]] = unsupported(WRITES[i], readOnly);
    const notGiven = 'templates here read only variables (cache scope), activated world-info entries, preset prompts ' +
      'and the character description';
    for (let i = 0; i < UNAVAILABLE.length; i++) apiObject[UNAVAILABLE[i]] = unsupported(UNAVAILABLE[i], notGiven);
  }
  function installApi(locals, limit, table, variables) {
    callLimit = limit;
    answers = table;
    if (table === null) {
      staticMode = true;
      variablesValue = variables;
      variablesLoaded = true;
      locals.variables = variables;
    } else {
      bridgeMode = true;
      locals.variables = new ProxyCtor({}, variablesHandler);
    }
    api.api = apiObject;
  }

  const host = create(null);
  let program = '';
  // Step 1 (trusted, not charged to the template's budget): check and freeze the input.
  // payload is [program, [variables]]: the host splices the caller's JSON text between
  // brackets, so anything but exactly one value there is input that tried to break out.
  host.prepare = ({
    prepare(payload) {
      if (!isArray(payload) || payload.length < 2 || payload.length > 4 || !isArray(payload[1]) ||
          payload[1].length !== 1) {
        return 'the input is not a single JSON value';
      }
      program = payload[0];
      // [program, [variables], mode?, now?]: mode null (plain ejs), a number (the static template
      // API's call limit) or [answers, limit] (bridge mode); now the render's clock in ms.
      if (payload.length === 4) {
        if (typeof payload[3] !== 'number') return 'the render clock is malformed';
        fixedNow = payload[3];
      }
      const locals = create(null);
      if (payload.length >= 3 && payload[2] === null) {
        locals.variables = deepFreeze(payload[1][0]);
      } else if (payload.length >= 3 && typeof payload[2] === 'number') {
        // The static template API: [program, [variables], bridge-call limit].
        installApi(locals, payload[2], null, deepFreeze(payload[1][0]));
      } else if (payload.length >= 3) {
        // Bridge mode: [answers table, bridge-call limit], built by the host (trusted JSON).
        const bridge = payload[2];
        if (!isArray(bridge) || bridge.length !== 2 || typeof bridge[0] !== 'object' || bridge[0] === null ||
            isArray(bridge[0]) || typeof bridge[1] !== 'number') {
          return 'the bridge table is malformed';
        }
        installApi(locals, bridge[1], deepFreeze(bridge[0]), undefined);
      } else {
        locals.variables = deepFreeze(payload[1][0]);
      }
      api.locals = freeze(locals);
      return '';
    },
  }).prepare;
  // Step 2 (charged): compile the program and call it.
  host.start = ({
    start(limit, handed) {
      outputLimit = limit;
      state = 'running';
      const source = program;
      const tb = freeze(api);
      // `handed`: the host evaluated the program (precompiled) and handed the outcome over.
      handoffOpen = false;
      const kind = handoffKind;
      const value = handoffValue;
      handoffValue = undefined;
      let fn;
      if (handed === true) {
        if (kind === 2) {
          fail(value, 'compile');
          return bridgeMode;
        }
        if (kind !== 1) {
          fail(new TypeError('the program was not handed over'), 'run');
          return bridgeMode;
        }
        fn = value;
      } else {
        try {
          fn = indirectEval(ENTER_PREFIX + source);
        } catch (e) {
          fail(e, 'compile');
          return bridgeMode;
        }
      }
      if (typeof fn !== 'function') {
        fail(new TypeError('the program did not evaluate to a function'), 'run');
        return bridgeMode;
      }
      let result;
      try {
        result = fn(tb);
      } catch (e) {
        fail(e, 'run');
        return bridgeMode;
      }
      try {
        const p = new PromiseCtor((resolve) => resolve(result));
        apply(promiseThen, p, [succeed, (e) => fail(e, 'run')]);
      } catch (e) {
        fail(e, 'run');
      }
      return bridgeMode;
    },
  }).start;
  host.poll = ({
    poll(lazy) {
      // `lazy` (the worker's final poll): a finished render whose every piece passed the 3x
      // bound of append (nothing measured, so the total is within the limit) reports its UTF-16
      // length instead of its UTF-8 size. The worker sees in C whether the reply is ASCII (then
      // both are equal) and otherwise polls again for the exact count: the scan for non-ASCII
      // units here is a regex walk of the whole text (~20 ns a unit, ~0.1 ms for 5 KB).
      if (lazy === true && counted === 0 && partCount > 0 && state === 'done' && pendingKey === null &&
          bridgeTrip === null) {
        joinedText = apply(arrJoin, parts, ['']);
        joinedCount = partCount;
        return originalStringify({ ok: true, text: joinedText, units: joinedText.length });
      }
      settleOutput();
      // A pending lookup voids the pass whatever the template did after it; a sticky bridge
      // failure decides the render even if the template's promise never settles.
      if (pendingKey !== null) {
        return originalStringify({ ok: null, pending: pendingKey, line: pendingAt[0], column: pendingAt[1], bytes: outputBytes });
      }
      if (bridgeTrip !== null) return originalStringify({ ok: false, error: bridgeTrip, bytes: outputBytes });
      if (state === 'done') {
        return originalStringify({ ok: true, text: outputText(), bytes: outputBytes });
      }
      if (state === 'error') return originalStringify({ ok: false, error: failure, bytes: outputBytes });
      return originalStringify({ ok: null, state, bytes: outputBytes });
    },
  }).poll;
  // Bridge mode: has the pass reached its end (a lookup is pending or a bridge failure stuck)?
  host.settled = () => pendingKey !== null || bridgeTrip !== null;
  host.mark = () => currentMark;
  host.seeds = () => seeds;
  host.lazy = () => LAZY_NAMES;
  host.tied = () => LAZY_TIED;
  // The binding cannot read properties of a returned object, so the host gets one dispatcher.
  return freeze(function dispatch(op, a, b) { return host[op](a, b); });
});
