#!/usr/bin/env node
// node_decide.js REQUESTS BUNDLE — the Node.js lanes of bench/bindings:
// decides every request of REQUESTS (one JSON request a line; an "expect"
// member, the generator's answer, is checked and not sent) with the bundle
// in BUNDLE, snapshots off, through the addon's engine.decide(object), then
// the addon's own walk of the object over Node-API (what decide falls back
// on), engine.decide(JSON string), then engine.decideAsync(object) 64 at a time,
// and prints one line a lane:
//   {"lane":"node decide(obj)","ns_per_decision":N,"cpu_ns_per_decision":C,"decisions":K}
// The requests are parsed into objects before timing; N is the median of
// three timed passes (wall clock) after a warm-up pass, C the process's CPU
// time in the same pass (all its threads: the thread pool's for decideAsync).
// The addon is the one `make bindings` builds (build/node, or
// VERDICT_BUILD_DIR/node).
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const { Engine } = require(path.join(__dirname, '..', '..', 'bindings', 'node'));

async function lane(name, n, passOnce) {
  await passOnce(); // warm-up
  const runs = [];
  for (let k = 0; k < 3; k++) {
    const c0 = process.cpuUsage();
    const t0 = process.hrtime.bigint();
    await passOnce();
    const wall = Number(process.hrtime.bigint() - t0) / n;
    const c = process.cpuUsage(c0);
    runs.push([wall, ((c.user + c.system) * 1000) / n]);
  }
  const mid = (i) => runs.map((r) => r[i]).sort((a, b) => a - b)[1];
  console.log(JSON.stringify({ lane: name, ns_per_decision: Math.round(mid(0)),
                               cpu_ns_per_decision: Math.round(mid(1)), decisions: n }));
}

async function main() {
  if (process.argv.length !== 4) {
    console.error('usage: node_decide.js REQUESTS BUNDLE');
    process.exit(2);
  }
  const reqs = [];
  const expect = [];
  for (const l of fs.readFileSync(process.argv[2], 'utf8').split('\n')) {
    if (!l.trim()) continue;
    const r = JSON.parse(l);
    expect.push(r.expect);
    delete r.expect;
    reqs.push(r);
  }
  const texts = reqs.map((r) => JSON.stringify(r));
  const e = new Engine(process.argv[3], { snapshots: false, store: false });
  reqs.forEach((r, i) => {
    const got = e.decide(r).action;
    if (expect[i] !== undefined && got !== expect[i]) {
      console.error(`node_decide.js: line ${i + 1}: ${got} for ${texts[i]}, expected ${expect[i]}`);
      process.exit(1);
    }
  });
  const n = reqs.length;
  await lane('node decide(obj)', n, () => {
    for (let i = 0; i < n; i++) e.decide(reqs[i]);
  });
  await lane('node decide(obj), read through Node-API', n, () => {
    for (let i = 0; i < n; i++) e._decideWalked(reqs[i]);
  });
  await lane('node decide(JSON string)', n, () => {
    for (let i = 0; i < n; i++) e.decide(texts[i]);
  });
  await lane('node decideAsync(obj), 64 in flight', n, async () => {
    for (let i = 0; i < n; i += 64) {
      const batch = [];
      for (let j = i; j < Math.min(n, i + 64); j++) batch.push(e.decideAsync(reqs[j]));
      await Promise.all(batch);
    }
  });
  e.close();
}

main();
