#!/usr/bin/env node
// http_decide.js REQUESTS URL [N] — the HTTP lane of bench/bindings: posts the
// first N (default 10,000) requests of REQUESTS one after the other on one
// keep-alive connection to URL/v1/decide (a `verdict serve` run.sh starts on
// loopback), checks each answer against its "expect", and prints one line:
//   {"lane":"HTTP round trip to verdict serve","ns_per_decision":N,"decisions":K}
// N is the median of three timed passes after a warm-up pass.
'use strict';

const fs = require('node:fs');
const http = require('node:http');

const [file, url, count] = process.argv.slice(2);
if (!url) {
  console.error('usage: http_decide.js REQUESTS URL [N]');
  process.exit(2);
}
const n = Number(count || 10000);
const bodies = [];
const expect = [];
for (const l of fs.readFileSync(file, 'utf8').split('\n')) {
  if (!l.trim() || bodies.length === n) continue;
  const r = JSON.parse(l);
  expect.push(r.expect);
  delete r.expect;
  bodies.push(JSON.stringify(r));
}
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
const target = new URL('/v1/decide', url);

function post(body) {
  return new Promise((resolve, reject) => {
    const req = http.request(target, { method: 'POST', agent,
                                       headers: { 'content-type': 'application/json' } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c) => { text += c; });
      res.on('end', () => (res.statusCode === 200 ? resolve(JSON.parse(text))
                                                  : reject(new Error(`${res.statusCode} ${text}`))));
    });
    req.on('error', reject);
    req.end(body);
  });
}

async function pass(check) {
  for (let i = 0; i < bodies.length; i++) {
    const d = await post(bodies[i]);
    if (check && expect[i] !== undefined && d.action !== expect[i]) {
      throw new Error(`request ${i + 1}: ${d.action}, expected ${expect[i]}`);
    }
  }
}

(async () => {
  await pass(true);
  const runs = [];
  for (let k = 0; k < 3; k++) {
    const t0 = process.hrtime.bigint();
    await pass(false);
    runs.push(Number(process.hrtime.bigint() - t0) / bodies.length);
  }
  runs.sort((a, b) => a - b);
  console.log(JSON.stringify({ lane: 'HTTP round trip to verdict serve',
                               ns_per_decision: Math.round(runs[1]), decisions: bodies.length }));
  agent.destroy();
})().catch((e) => {
  console.error(`http_decide.js: ${e.message}`);
  process.exit(1);
});
