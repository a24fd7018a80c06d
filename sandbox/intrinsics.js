// Discovery of the intrinsics the harness freezes (evaluated once per worker, in a scratch
// context where the harness was installed with an empty plan; never in a render's context).
//
// Why a plan: finding every reachable intrinsic means reading every property descriptor of
// ~600 objects, which costs ~5 ms in this engine; replaying a recorded list of property paths
// costs a fraction of that, and every render needs a fresh context.
//
// What is recorded: every object reachable from the harness's seeds (the global object and the
// hidden intrinsics such as %AsyncFunction.prototype%) through own property values, accessor
// functions and prototypes, breadth first, except built-in methods whose only own properties
// are `length` and `name`. Those ~500 plain functions carry no state any engine or harness code
// consults, and a template that adds properties to one changes nothing but its own throwaway
// context; skipping them divides the per-render freeze cost by four.
//
// Lazily frozen families: the global bindings the harness names in `lazy` (Math, Date, Map, the
// typed arrays, ...) hold intrinsics that no literal, no engine operation and no other intrinsic
// leads to. The walk first records everything reachable from the seeds without reading those
// bindings (the eager part, frozen before any template code exists), then walks from each lazy
// binding's value; whatever that finds and the eager part does not is the binding's family, and
// families that share an object are merged, and so are families the harness names as tied (the
// engine links them without a property path: a typed array's buffer is an ArrayBuffer). A fresh context freezes a family the first time one of
// its bindings is read (see the harness), before handing out any of its objects.
//
// Encoding (the strings the harness's installer takes):
//  * kinds: one letter per object: 'r' a seed (its key is the seed's index), 'p' the parent's
//    prototype, 'v'/'g'/'s' the value/getter/setter of a string key, 'V'/'G'/'S' the same under
//    a well-known symbol (its key is the name in `Symbol`);
//  * keys: the keys joined by U+0001;
//  * parents: one UTF-16 unit per object, the parent's index plus one (0 for seeds);
//    kind 'L' is a lazy binding's value (its key is the binding's name, its parent unit 0);
//  * groups: one unit per object, '.' for the eager part, 'A' + n for family n;
//  * lazy: the lazy bindings' names joined by U+0001, and lazyGroups: one unit per name, its family.
(function (seeds, lazyNames, tied) {
  'use strict';
  const symbolNames = new Map();
  for (const name of Reflect.ownKeys(Symbol)) {
    const value = Symbol[name];
    if (typeof value === 'symbol') symbolNames.set(value, name);
  }
  function isPlainFunction(o) {
    if (typeof o !== 'function') return false;
    const keys = Reflect.ownKeys(o);
    return keys.every((k) => k === 'length' || k === 'name');
  }
  const G = seeds[0];
  const lazy = new Set([...lazyNames].filter((name) => Object.prototype.hasOwnProperty.call(G, name)));
  const index = new Map();
  const groupOf = [];
  let kinds = '';
  let parentUnits = '';
  const keys = [];
  // Union-find over families: a family that reaches another family's object takes it in.
  const familyParent = [];
  function find(f) { while (familyParent[f] !== f) f = familyParent[f]; return f; }
  function walk(queue, group) {
    for (let q = 0; q < queue.length; q++) {
      const [o, parent, kind, key] = queue[q];
      if ((typeof o !== 'object' && typeof o !== 'function') || o === null) continue;
      if (index.has(o)) {
        const seen = index.get(o);
        const other = seen < 0 ? -1 : groupOf[seen];
        if (group >= 0 && other >= 0) familyParent[find(other)] = find(group);
        continue;
      }
      if (isPlainFunction(o)) {
        index.set(o, -1);
        continue;
      }
      const me = kinds.length;
      index.set(o, me);
      groupOf.push(group);
      kinds += kind;
      keys.push(key);
      parentUnits += String.fromCharCode(parent + 1);
      for (const k of Reflect.ownKeys(o)) {
        if (o === G && lazy.has(k)) continue;
        let upper = false;
        let name = k;
        if (typeof k === 'symbol') {
          if (!symbolNames.has(k)) throw new Error('tavernbox: an intrinsic has a symbol key that is not well known');
          name = symbolNames.get(k);
          upper = true;
        }
        const d = Object.getOwnPropertyDescriptor(o, k);
        if ('value' in d) queue.push([d.value, me, upper ? 'V' : 'v', name]);
        else {
          queue.push([d.get, me, upper ? 'G' : 'g', name]);
          queue.push([d.set, me, upper ? 'S' : 's', name]);
        }
      }
      queue.push([Object.getPrototypeOf(o), me, 'p', '']);
    }
  }
  const eager = [];
  for (let i = 0; i < seeds.length; i++) eager.push([seeds[i], -1, 'r', String(i)]);
  walk(eager, -1);
  const names = [...lazy];
  const familyOfName = [];
  for (let i = 0; i < names.length; i++) {
    familyParent.push(i);
    familyOfName.push(i);
    const root = G[names[i]];
    if (index.has(root) && index.get(root) >= 0 && groupOf[index.get(root)] < 0) {
      throw new Error('tavernbox: the lazy binding ' + names[i] + ' is reachable from the eager intrinsics');
    }
    walk([[root, -1, 'L', names[i]]], i);
  }
  // Bindings whose families the engine links without a property path (a typed array's `buffer` is
  // an ArrayBuffer the engine made): one family, whichever binding is read first.
  for (const [a, b] of tied || []) {
    const i = names.indexOf(a), j = names.indexOf(b);
    if (i >= 0 && j >= 0) familyParent[find(familyOfName[i])] = find(familyOfName[j]);
  }
  // Families, merged and numbered in order of first appearance.
  const number = new Map();
  let groups = '';
  for (let i = 0; i < groupOf.length; i++) {
    if (groupOf[i] < 0) { groups += '.'; continue; }
    const f = find(groupOf[i]);
    if (!number.has(f)) number.set(f, number.size);
    groups += String.fromCharCode(65 + number.get(f));
    const p = parentUnits.charCodeAt(i) - 1;
    if (p >= 0 && (groupOf[p] < 0 || find(groupOf[p]) !== f)) {
      throw new Error('tavernbox: a lazily frozen intrinsic hangs off another family');
    }
  }
  let lazyGroups = '';
  for (let i = 0; i < names.length; i++) {
    const f = find(familyOfName[i]);
    if (!number.has(f)) number.set(f, number.size);  // a binding whose value is not an object
    lazyGroups += String.fromCharCode(65 + number.get(f));
  }
  if (kinds.length > 0xd000) throw new Error('tavernbox: too many intrinsics to encode');
  return JSON.stringify([kinds, keys.join('\u0001'), parentUnits, groups, names.join('\u0001'), lazyGroups]);
});
