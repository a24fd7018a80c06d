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
// Encoding (the three strings the harness's installer takes):
//  * kinds: one letter per object: 'r' a seed (its key is the seed's index), 'p' the parent's
//    prototype, 'v'/'g'/'s' the value/getter/setter of a string key, 'V'/'G'/'S' the same under
//    a well-known symbol (its key is the name in `Symbol`);
//  * keys: the keys joined by U+0001;
//  * parents: one UTF-16 unit per object, the parent's index plus one (0 for seeds).
(function (seeds) {
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
  const index = new Map();
  const queue = [];
  let kinds = '';
  let parentUnits = '';
  const keys = [];
  for (let i = 0; i < seeds.length; i++) queue.push([seeds[i], -1, 'r', String(i)]);
  for (let q = 0; q < queue.length; q++) {
    const [o, parent, kind, key] = queue[q];
    if ((typeof o !== 'object' && typeof o !== 'function') || o === null || index.has(o)) continue;
    if (isPlainFunction(o)) {
      index.set(o, -1);
      continue;
    }
    const me = kinds.length;
    index.set(o, me);
    kinds += kind;
    keys.push(key);
    parentUnits += String.fromCharCode(parent + 1);
    for (const k of Reflect.ownKeys(o)) {
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
  if (kinds.length > 0xd000) throw new Error('tavernbox: too many intrinsics to encode');
  return JSON.stringify([kinds, keys.join('\u0001'), parentUnits]);
});
