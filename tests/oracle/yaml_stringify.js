// Differential oracle: the real `yaml` 2.9.0 (what Tavern Helper bundles) writes a batch of JSON values.
//
//   stdin:  one JSON value per line
//   stdout: one JSON string per line: YAML.stringify(value, {blockQuote: 'literal'})
//
// Tavern Helper's {{format_*_variable::path}} prints a variable this way.
'use strict';
const path = require('path');
const YAML = require(path.join(__dirname, 'node_modules', 'yaml'));
const lines = require('fs').readFileSync(0, 'utf8').split('\n').filter((l) => l.length);
process.stdout.write(lines.map((l) => JSON.stringify(YAML.stringify(JSON.parse(l), { blockQuote: 'literal' }))).join('\n') + '\n');
