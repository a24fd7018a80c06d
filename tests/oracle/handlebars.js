// Differential oracle: the real handlebars 4.7.10 (what SillyTavern 1.18.0 bundles) renders story
// strings, one JSON object per line.
//
//   stdin:  {"template": "...", "data": <any JSON>}                 (one per line)
//   stdout: {"text": "..."}  or  {"error": {"kind": "syntax" | "runtime", "message": "..."}}
//
// Compiled as SillyTavern's renderStoryString compiles a story string ({noEscape: true}), in an
// environment with SillyTavern's two helpers: `trim` answers "{{trim}}", and `helperMissing`
// answers for any name nothing else resolves. SillyTavern's helperMissing runs its macro
// substitution over "{{name}}"; here it answers "<name>", which the tests' callback mirrors.
'use strict';
const path = require('path');
const Handlebars = require(path.join(__dirname, 'node_modules', 'handlebars'));

const env = Handlebars.create();
env.registerHelper('trim', () => '{{trim}}');
env.registerHelper('helperMissing', function () {
  const options = arguments[arguments.length - 1];
  return '<' + options.name + '>';
});

// The helper `log` and the prototype-access warnings write to the console: keep stdout for answers.
for (const name of ['log', 'info', 'debug', 'warn', 'error', 'dir', 'table', 'trace']) console[name] = () => {};

function renderOne(line) {
  let job;
  try {
    job = JSON.parse(line);
  } catch (e) {
    return { error: { kind: 'job', message: String(e.message) } };
  }
  let ast;
  try {
    ast = env.parse(job.template);
  } catch (e) {
    return { error: { kind: 'syntax', message: String(e && e.message) } };
  }
  // compile() is lazy: precompiling first tells the compiler's refusals from the render's
  try {
    env.precompile(ast, { noEscape: true });
  } catch (e) {
    return { error: { kind: 'compile', message: String(e && e.message) } };
  }
  try {
    const out = env.compile(ast, { noEscape: true })(job.data);
    return { text: out == null ? '' : String(out) };
  } catch (e) {
    return { error: { kind: 'runtime', message: String(e && e.message) } };
  }
}

const readline = require('readline');
const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
rl.on('line', (line) => {
  process.stdout.write(JSON.stringify(renderOne(line)) + '\n');
});
