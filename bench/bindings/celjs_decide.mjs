#!/usr/bin/env node
// celjs_decide.mjs REQUESTS CELJS — the JavaScript CEL lane of bench/bindings:
// the same four-rule gate (first match wins) evaluated by the npm package
// @marcbachmann/cel-js (its folder CELJS: run.sh installs it into a scratch
// folder) on the same objects {country, path, ua, score}, in process, each
// condition parsed once; prints one line like node_decide.js's:
//   {"lane":"node @marcbachmann/cel-js","ns_per_decision":N,"cpu_ns_per_decision":C,"decisions":K}
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

if (process.argv.length !== 4) {
  console.error('usage: celjs_decide.mjs REQUESTS CELJS');
  process.exit(2);
}
const pkg = JSON.parse(fs.readFileSync(path.join(process.argv[3], 'package.json'), 'utf8'));
const cel = await import(pathToFileURL(path.join(process.argv[3], pkg.exports['.'].default)));

const scanners = ['curl/8.4.0', 'python-requests/2.31.0', 'Go-http-client/1.1', 'sqlmap/1.7',
                  'masscan/1.3'];
const rules = [
  [cel.parse('country == "CN" && path.startsWith("/api/v1")'), 'allow'],
  [cel.parse(`ua in ${JSON.stringify(scanners)}`), 'deny'],
  [cel.parse('score < 0.6'), 'ask_mfa'],
];
function decide(ctx) {
  for (const [cond, action] of rules) if (cond(ctx) === true) return action;
  return 'allow';
}

const ctxs = [];
const expect = [];
for (const l of fs.readFileSync(process.argv[2], 'utf8').split('\n')) {
  if (!l.trim()) continue;
  const r = JSON.parse(l);
  ctxs.push(r.context);
  expect.push(r.expect);
}
const n = ctxs.length;
for (let i = 0; i < n; i++) { // warm-up, and the check
  const got = decide(ctxs[i]);
  if (expect[i] !== undefined && got !== expect[i]) {
    console.error(`celjs_decide.mjs: request ${i + 1}: ${got}, expected ${expect[i]}`);
    process.exit(1);
  }
}
const runs = [];
for (let k = 0; k < 3; k++) {
  const c0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < n; i++) decide(ctxs[i]);
  const wall = Number(process.hrtime.bigint() - t0) / n;
  const c = process.cpuUsage(c0);
  runs.push([wall, ((c.user + c.system) * 1000) / n]);
}
const mid = (i) => runs.map((r) => r[i]).sort((a, b) => a - b)[1];
console.log(JSON.stringify({ lane: `node ${pkg.name} ${pkg.version}`,
                             ns_per_decision: Math.round(mid(0)),
                             cpu_ns_per_decision: Math.round(mid(1)), decisions: n }));
