// Differential oracle: the real ejs 7.0.2 renders a batch of templates, one JSON object per line.
//
//   stdin:  {"template": "...", "variables": <any JSON>}            (one per line)
//   stdout: {"text": "..."}  or  {"error": {"name": "...", "message": "..."}}   (same order)
//
// Options are the ones ST-Prompt-Template passes ({async: true, outputFunctionName: "print"}),
// the data object is {variables: <variables>} (templates reach their data as `variables`), and
// `print` is made variadic as in ST's fork: the shim is one statement put before the generated
// body, so template text and error line numbers are unchanged. Always the 3-argument render.
'use strict';
const path = require('path');
const ejs = require(path.join(__dirname, 'node_modules', 'ejs'));

const generateSource = ejs.Template.prototype.generateSource;
ejs.Template.prototype.generateSource = function () {
  generateSource.call(this);
  const name = this.opts.outputFunctionName;
  if (name) {
    this.source = '    ; ' + name +
      ' = function () { for (var i = 0; i < arguments.length; i++) __append(arguments[i]); };\n' + this.source;
  }
};

const OPTIONS = { async: true, outputFunctionName: 'print' };

// A template's console.log must not write into the answer stream on stdout.
for (const name of ['log', 'info', 'debug', 'dir', 'table', 'trace']) console[name] = console.error;

// Each render gets the globals it started with: a sloppy-mode template that assigns an
// undeclared name creates a global in node, which must not leak into the next case (tavernbox
// gives every render a fresh VM).
const initialGlobals = new Set(Object.getOwnPropertyNames(globalThis));
function dropNewGlobals() {
  for (const name of Object.getOwnPropertyNames(globalThis)) {
    if (!initialGlobals.has(name)) {
      try { delete globalThis[name]; } catch (e) { /* non-configurable: nothing to do */ }
    }
  }
}

async function renderOne(line) {
  let job;
  try {
    job = JSON.parse(line);
  } catch (e) {
    return { error: { name: 'BadJob', message: String(e.message) } };
  }
  try {
    const text = await ejs.render(job.template, { variables: job.variables }, OPTIONS);
    return { text: String(text) };
  } catch (e) {
    const name = e && typeof e === 'object' && 'name' in e ? String(e.name) : typeof e;
    const message = e && typeof e === 'object' && 'message' in e ? String(e.message) : String(e);
    return { error: { name, message } };
  }
}

// Lines are answered one at a time, in order, as they arrive: a test can stream cases through one
// long-lived process, or pipe a whole batch in and read all the answers at the end.
const readline = require('readline');
const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
(async () => {
  for await (const line of rl) {
    if (line.length === 0) continue;
    const answer = await renderOne(line);
    dropNewGlobals();
    process.stdout.write(JSON.stringify(answer) + '\n');
  }
})();
