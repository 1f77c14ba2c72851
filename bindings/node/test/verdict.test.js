// verdict.test.js — the Node.js binding as a caller uses it: decisions equal
// `verdict decide`'s on the same requests, objects and JSON strings agree
// (traces too), errors carry code, path, line and column, many concurrent
// decideAsync calls, reloads under load, close (and the finalizer of a
// forgotten engine), and a snapshot folder written from Node that
// `verdict replay` reproduces exactly.
//
// Run by bindings/node/run-tests.sh (CTest: bindings/node) with the addon
// built into BUILD/node and VERDICT_BUILD_DIR naming the build.
'use strict';

const { test, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

const verdict = require('..');
const { Engine, VerdictError } = verdict;

const TOP = path.resolve(__dirname, '..', '..', '..');
const BUILD = process.env.VERDICT_BUILD_DIR || path.join(TOP, 'build');
const VERDICT = path.join(BUILD, 'verdict');
const GATE = path.join(TOP, 'tests', 'engine', 'bundles', 'gate');
const SCRATCH = fs.mkdtempSync(path.join(os.tmpdir(), 'verdict-node-'));
after(() => fs.rmSync(SCRATCH, { recursive: true, force: true }));

const SCANNERS = ['curl/8.4.0', 'python-requests/2.31.0', 'Go-http-client/1.1', 'sqlmap/1.7',
                  'masscan/1.3'];
const POLICY_A = `strategy: peer_gate
decision_points: [peer_gate]
actions:
  allow: true
  deny: false
  ask_mfa: {allowed: false, review: true}
constants:
  scanners: ${JSON.stringify(SCANNERS)}
rules:
  - name: cn-api
    if: country == "CN" && path.startsWith("/api/v1")
    action: allow
  - name: scanners
    if: ua in scanners
    action: deny
    reason: known scanner
  - name: low-score
    if: score < 0.6
    action: ask_mfa
default:
  action: allow
`;
// the same gate with the score threshold moved: some answers change
const POLICY_B = POLICY_A.replace('score < 0.6', 'score < 0.3');

let bundles = 0;
function bundle(text = POLICY_A) {
  const d = path.join(SCRATCH, `bundle-${++bundles}`);
  fs.mkdirSync(d);
  fs.writeFileSync(path.join(d, 'gate.yaml'), text);
  return d;
}

// n gate requests {country, path, ua, score}, the same every run (xorshift32)
function requests(n, seed = 7) {
  let x = seed >>> 0 || 1;
  const rnd = () => {
    x ^= x << 13; x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5; x >>>= 0;
    return x / 4294967296;
  };
  const pick = (a) => a[Math.floor(rnd() * a.length)];
  const countries = ['CN', 'US', 'DE', 'BR', 'IN', 'FR', 'JP', 'RU', 'GB', 'CN'];
  const paths = ['/api/v1/users', '/api/v2/items', '/login', '/api/v1', '/health'];
  const uas = ['curl/8.4.0', 'sqlmap/1.7', 'Mozilla/5.0 Firefox/128.0', 'okhttp/4.12.0',
               'Mozilla/5.0 Safari/605.1.15', 'Mozilla/5.0 Chrome/126.0'];
  const out = [];
  for (let i = 0; i < n; i++) {
    const p = pick(paths);
    out.push({ action: 'peer_gate', context: {
      country: pick(countries),
      path: rnd() < 0.5 ? p : `${p}/${Math.floor(rnd() * 1000)}`,
      ua: pick(uas),
      score: Math.floor(rnd() * 10000) / 10000,
    } });
  }
  return out;
}

function expected(req) {
  const c = req.context;
  if (c.country === 'CN' && c.path.startsWith('/api/v1')) return 'allow';
  if (SCANNERS.includes(c.ua)) return 'deny';
  return c.score < 0.6 ? 'ask_mfa' : 'allow';
}

// a decision without what differs between two runs of it
function stable(d) {
  const x = { ...d };
  delete x.latencyUs;
  delete x.snapshotId;
  if (x.trace) x.trace = { ...x.trace, ns: null };
  return x;
}

function raises(fn, code, p, says) {
  let caught = null;
  try {
    fn();
  } catch (e) {
    caught = e;
  }
  assert.ok(caught, 'no error thrown');
  assert.ok(caught instanceof VerdictError, `not a VerdictError: ${caught}`);
  assert.ok(caught instanceof Error);
  assert.equal(caught.code, code, caught.message);
  if (p !== undefined) assert.equal(caught.path, p, caught.message);
  if (says !== undefined) assert.ok(caught.message.includes(says), caught.message);
  return caught;
}

const GATE_CONTEXTS = [
  { path: '/admin/x', headers: { 'user-agent': 'Firefox' }, body_size: 1, env: { country: 'US' } },
  { path: '/api/v1', headers: { 'user-agent': 'SQLMap/1.7' }, body_size: 2.5, env: { country: 'CN' } },
  { path: '/p', headers: { 'user-agent': 'été "q"\n' }, body_size: 2 ** 63, env: { country: 'DE' },
    tags: [1, 2.5, true, null, [], {}] },
  { path: '/api/x', headers: { 'user-agent': 'x' }, body_size: 1e30, env: { country: 'CN' } },
  { probe: 1, path: '/', headers: { 'user-agent': 'y' }, body_size: -0, env: {} },
  { path: '/api/v1/a', headers: { 'user-agent': 'z' }, body_size: 5, env: { country: 'FR' } },
];

function gateRequests() {
  const out = [];
  for (const ctx of GATE_CONTEXTS) {
    out.push({ action: 'gate', context: ctx });
    out.push({ action: 'gate', context: ctx, candidates: ['route_eu', 'allow'], key: 'vip-1' });
    out.push({ action: 'http_request', context: ctx, key: 'vip-2' });
  }
  return out;
}

test('decisions equal verdict decide on the same requests', () => {
  const reqs = gateRequests();
  const lines = reqs.map((r) => JSON.stringify(r)).join('\n') + '\n';
  const cli = spawnSync(VERDICT, ['decide', '-p', GATE, '--jsonl', '--trace', '--no-snapshots',
                                  '--no-store'], { input: lines, encoding: 'utf8' });
  assert.equal(cli.status, 0, cli.stderr);
  const want = cli.stdout.trim().split('\n').map((l) => JSON.parse(l));
  assert.equal(want.length, reqs.length);
  const e = new Engine(GATE, { store: false, snapshots: false });
  try {
    reqs.forEach((r, i) => {
      const d = e.decide(r, { trace: true });
      const w = want[i];
      const got = {
        action: d.action, allowed: d.allowed, review: d.review, confidence: d.confidence,
        source: d.source, rule: d.rule, reason: d.reason, strategy: d.strategy,
        policy_version: d.policyVersion, model_version: d.modelVersion,
      };
      const exp = {
        action: w.action, allowed: w.allowed, review: w.review, confidence: w.confidence,
        source: w.source, rule: w.reason ? w.reason.rule : null,
        reason: w.reason ? w.reason.message : null, strategy: w.strategy,
        policy_version: w.policy_version, model_version: w.model_version,
      };
      assert.deepEqual(got, exp, JSON.stringify(r));
      assert.deepEqual({ ...d.trace, ns: null }, { ...w.trace, ns: null }, JSON.stringify(r));
    });
  } finally {
    e.close();
  }
});

test('objects and JSON strings decide alike', () => {
  const e = new Engine(GATE, { store: false });
  try {
    for (const r of gateRequests()) {
      const a = e.decide(r, { trace: true });
      const b = e.decide(JSON.stringify(r), { trace: true });
      assert.deepEqual(stable(a), stable(b), JSON.stringify(r));
    }
    const d = e.decide({ action: 'gate', context: GATE_CONTEXTS[0] });
    assert.deepEqual([d.action, d.allowed, d.review, d.source, d.rule],
                     ['ask_mfa', false, true, 'rule', 'admin']);
    assert.equal(d.reason, 'admin area needs a second factor');
    assert.equal(d.strategy, 'gate');
    assert.equal(d.confidence, 1);
    assert.equal(d.policyVersion.length, 64);
    assert.equal(d.modelVersion, null);
    assert.equal(d.snapshotId, null);
    assert.ok(d.latencyUs > 0);
    assert.equal(d.trace, undefined);
    assert.ok(d instanceof verdict.Decision);
    const j = JSON.parse(JSON.stringify(d));
    assert.ok(!('trace' in j) && !('toJSON' in j) && j.action === 'ask_mfa');
    assert.deepEqual(d.toJSON(), j);
    assert.equal(e.policyVersion.length, 64);
    // undefined members are left out, as JSON.stringify leaves them
    const u = e.decide({ action: 'gate', key: undefined,
                         context: { ...GATE_CONTEXTS[0], extra: undefined } });
    assert.deepEqual(stable(u), stable(d));
    // a bigint is an integer
    const big = e.decide({ action: 'gate', context: { ...GATE_CONTEXTS[0], body_size: 5000n } });
    assert.equal(big.rule, 'admin');
    const small = { ...GATE_CONTEXTS[5], body_size: 5000n };
    assert.equal(e.decide({ action: 'gate', context: small }).rule, 'body-too-big');
  } finally {
    e.close();
  }
});

test('the JavaScript walk of decide and the addon\'s walk of decideAsync agree', async () => {
  // decide(object) walks the object in JavaScript (index.js), decideAsync in C
  const e = new Engine(GATE, { store: false });
  try {
    const odd = Object.create(null);
    odd['ключ'] = 'значение — ☃ \ud83d\ude00'; // (JSON text refuses a lone surrogate)
    odd['a"b\\c\n'] = [[], {}, [[[1]]], -0, 2 ** 63, 2 ** 64, 1e300, 5e-324, -1.5, 9007199254740993];
    odd.long = 'x'.repeat(70000) + 'é';
    odd.nested = { deeper: { list: [true, false, null, 'mixé ascii'], n: 0 } };
    const ctxs = [...GATE_CONTEXTS, { ...GATE_CONTEXTS[0], odd }, { odd, ...GATE_CONTEXTS[1] }];
    for (const ctx of ctxs) {
      for (const extra of [{}, { candidates: ['route_eu', 'allow', 'é'], key: 'vip-1' }]) {
        const r = { action: 'gate', context: ctx, ...extra };
        const a = e.decide(r, { trace: true });
        const b = await e.decideAsync(r, { trace: true });
        const c = e.decide(JSON.stringify(r), { trace: true });
        assert.deepEqual(stable(a), stable(b), JSON.stringify(r).slice(0, 200));
        assert.deepEqual(stable(a), stable(c), JSON.stringify(r).slice(0, 200));
        assert.deepEqual(stable(e.decide(r)), stable(await e.decideAsync(r)));
        assert.deepEqual(stable(e.decide(r)), stable(e._decideWalked(r)));
      }
    }
    // a getter that decides while its own request is walked
    const inner = { action: 'gate', context: GATE_CONTEXTS[1] };
    const outer = { action: 'gate', context: { ...GATE_CONTEXTS[0] } };
    let innerAction = null;
    Object.defineProperty(outer.context, 'zz', {
      enumerable: true,
      get() {
        innerAction = e.decide(inner).action;
        return 'z';
      },
    });
    const plainOuter = { action: 'gate', context: { ...GATE_CONTEXTS[0], zz: 'z' } };
    assert.deepEqual(stable(e.decide(outer, { trace: true })),
                     stable(e.decide(plainOuter, { trace: true })));
    assert.equal(innerAction, e.decide(inner).action);
    const throwing = { action: 'gate', context: { get boom() { throw new Error('boom'); } } };
    assert.throws(() => e.decide(throwing), /boom/);
    assert.equal(e.decide(inner).action, innerAction); // and the next decide is as before
    // a lone surrogate: both walks read it as U+FFFD, as Node writes UTF-8
    const lone = { action: 'gate', context: { ...GATE_CONTEXTS[0], s: 'a\ud800b', [`k\udc00`]: 1 } };
    const swapped = { action: 'gate', context: { ...GATE_CONTEXTS[0], s: 'a\ufffdb', 'k\ufffd': 1 } };
    assert.deepEqual(stable(e.decide(lone, { trace: true })),
                     stable(await e.decideAsync(lone, { trace: true })));
    assert.deepEqual(stable(e.decide(lone, { trace: true })),
                     stable(e.decide(JSON.stringify(swapped), { trace: true })));
  } finally {
    e.close();
  }
});

test('errors carry code, path, line and column', () => {
  const e = new Engine(GATE, { store: false });
  try {
    raises(() => e.decide({ context: {} }), 'request', '$.action', 'no $.action');
    raises(() => e.decide({ action: 5 }), 'request', '$.action', 'must be a string');
    raises(() => e.decide({ action: 'gate', contxt: {} }), 'request', '$',
           'unknown request key "contxt"');
    raises(() => e.decide({ action: 'gate', context: [] }), 'request', '$.context',
           'must be an object');
    raises(() => e.decide({ action: 'gate', candidates: ['allow', 3] }), 'request',
           '$.candidates[1]');
    raises(() => e.decide({ action: 'gate', candidates: 'allow' }), 'request', '$.candidates');
    raises(() => e.decide({ action: 'nope' }), 'not_found', '$.action');
    raises(() => e.decide({ action: 'gate', context: { a: { b: [1, new Map()] } } }), 'request',
           '$.context.a.b[1]', 'not a plain object');
    raises(() => e.decide({ action: 'gate', context: { when: new Date() } }), 'request',
           '$.context.when', 'a Date');
    raises(() => e.decide({ action: 'gate', context: { f: () => 1 } }), 'request', '$.context.f',
           'a function');
    raises(() => e.decide({ action: 'gate', context: { l: [1, undefined] } }), 'request',
           '$.context.l[1]', 'undefined');
    raises(() => e.decide({ action: 'gate', context: { x: NaN } }), 'request', '$.context.x',
           'NaN');
    raises(() => e.decide({ action: 'gate', context: { x: -Infinity } }), 'request',
           '$.context.x');
    raises(() => e.decide({ action: 'gate', context: { n: 2n ** 70n } }), 'request',
           '$.context.n', 'past 64 bits');
    let deep = [];
    for (let i = 0; i < 600; i++) deep = [deep];
    raises(() => e.decide({ action: 'gate', context: { d: deep } }), 'limit', undefined,
           '511 levels');
    const loop = [];
    loop.push(loop);
    raises(() => e.decide({ action: 'gate', context: { loop } }), 'limit');
    const j = raises(() => e.decide('{"action": "gate",\n  "context": {"a": tru}}'), 'json',
                     '$.context.a');
    assert.deepEqual([j.line, j.column], [2, 20]);
    assert.ok(j.errno < 0);
    assert.ok(String(j).includes('not valid JSON'));
    raises(() => e.decide(42), 'invalid');
    raises(() => e.decide([1]), 'invalid');
    raises(() => e.decide(), 'invalid');
  } finally {
    e.close();
  }
  const p = raises(() => new Engine(path.join(TOP, 'tests', 'engine', 'bundles', 'broken'),
                                    { store: false }), 'policy');
  assert.ok(p.line > 0 && p.column > 0, p.message);
  raises(() => new Engine(bundle(), { durability: 'sometimes' }), 'invalid', 'durability');
  raises(() => new Engine(bundle(), { snapshots: 3 }), 'invalid', 'snapshots');
  raises(() => new Engine(bundle(), { maxRequestBytes: -1 }), 'invalid', 'maxRequestBytes');
  raises(() => new Engine(3), 'invalid', 'path');
  const small = new Engine(bundle(), { store: false, maxRequestBytes: 64 });
  try {
    raises(() => small.decide(JSON.stringify({ action: 'peer_gate',
                                               context: { pad: 'x'.repeat(100) } })), 'limit');
  } finally {
    small.close();
  }
  const s = raises(() => verdict.evaluate('1 +'), 'syntax');
  assert.ok(s.line === 1 && s.column > 0);
  raises(() => verdict.evaluate('a / 0', { a: 1 }), 'eval');
});

test('evaluate', () => {
  assert.equal(verdict.evaluate('a + 1', { a: 2 }), 3);
  assert.equal(verdict.evaluate("x.startsWith('/api')", { x: '/api/v1' }), true);
  assert.deepEqual(verdict.eval('[1, 2].map(i, i * 2)'), [2, 4]);
  assert.deepEqual(verdict.evaluate("{'k': v}", { v: null }), { k: null });
});

test('many concurrent decideAsync calls answer as decide does', async () => {
  const reqs = requests(4000);
  const e = new Engine(bundle(), { store: false });
  try {
    const sync = reqs.map((r) => e.decide(r).action);
    assert.deepEqual(sync, reqs.map(expected));
    const all = await Promise.all(reqs.map((r, i) => e.decideAsync(i % 2 ? r : JSON.stringify(r))));
    assert.deepEqual(all.map((d) => d.action), sync);
    const t = await e.decideAsync(reqs[0], { trace: true });
    assert.deepEqual(stable(t), stable(e.decide(reqs[0], { trace: true })));
    await assert.rejects(e.decideAsync({ action: 'nope' }),
                         (x) => x instanceof VerdictError && x.code === 'not_found');
    assert.throws(() => e.decideAsync({ action: 7 }),
                  (x) => x instanceof VerdictError && x.path === '$.action');
    await assert.rejects(e.decideAsync('{"action": '), (x) => x.code === 'json' && x.line === 1);
  } finally {
    e.close();
  }
});

test('reload under load', async () => {
  const dir = bundle();
  const file = path.join(dir, 'gate.yaml');
  const reqs = requests(500);
  const e = new Engine(dir, { store: false });
  try {
    const v1 = e.policyVersion;
    let stop = false;
    const seen = new Set();
    const errors = [];
    const load = async () => {
      while (!stop) {
        const ds = await Promise.all(reqs.slice(0, 50).map((r) => e.decideAsync(r).catch((x) => {
          errors.push(x);
          return null;
        })));
        for (const d of ds) if (d) seen.add(d.policyVersion);
        for (const r of reqs.slice(50, 60)) seen.add(e.decide(r).policyVersion);
      }
    };
    const loads = [load(), load(), load(), load()];
    const tick = () => new Promise((resolve) => setImmediate(resolve));
    await tick();
    fs.writeFileSync(file, POLICY_B);
    const v2 = e.reload();
    await tick();
    fs.writeFileSync(file, 'strategy: [broken');
    raises(() => e.reload(), 'policy');
    assert.equal(e.policyVersion, v2); // the loaded bundle keeps serving
    for (let i = 0; i < 20; i++) {
      fs.writeFileSync(file, i % 2 ? POLICY_A : POLICY_B);
      e.reload();
      await tick();
    }
    stop = true;
    await Promise.all(loads);
    assert.deepEqual(errors, []);
    assert.notEqual(v1, v2);
    assert.equal(seen.size, 2); // the strategy's two versions, both served
    fs.writeFileSync(file, POLICY_A);
    e.reload();
    assert.deepEqual(reqs.map((r) => e.decide(r).action), reqs.map(expected));
  } finally {
    e.close();
  }
});

test('decisions after a reload carry the new version\'s names', () => {
  // the answer's strings come from a cache the addon fills and index.js
  // reads by index: renamed rules, actions and reasons must show at once
  const dir = bundle();
  const file = path.join(dir, 'gate.yaml');
  const reqs = requests(200);
  const e = new Engine(dir, { store: false, snapshots: false });
  try {
    const before = reqs.map((r) => e.decide(r));
    const renamed = POLICY_A.replace(/\bdeny\b/g, 'refuse').replace('name: scanners', 'name: bots')
      .replace('known scanner', 'a known bot').replace('name: low-score', 'name: weak-score');
    fs.writeFileSync(file, renamed);
    e.reload();
    for (let i = 0; i < reqs.length; i++) {
      const d = e.decide(reqs[i]);
      const viaText = e.decide(JSON.stringify(reqs[i]));
      const walked = e._decideWalked(reqs[i]);
      assert.notEqual(d.policyVersion, before[i].policyVersion);
      assert.deepEqual(stable(d), stable(walked));
      assert.deepEqual(stable(viaText), stable(walked));
      const old = before[i];
      assert.equal(d.action, old.action === 'deny' ? 'refuse' : old.action);
      assert.equal(d.rule, { scanners: 'bots', 'low-score': 'weak-score' }[old.rule] ?? old.rule);
      assert.equal(d.reason, old.reason === 'known scanner' ? 'a known bot' : old.reason);
    }
    assert.ok(reqs.some((r, i) => before[i].action === 'deny'));
  } finally {
    e.close();
  }
});

test('close', async () => {
  const dir = bundle();
  const e = new Engine(dir, { store: false });
  assert.equal(e.closed, false);
  e.decide(requests(1)[0]);
  e.close();
  assert.equal(e.closed, true);
  e.close(); // again: nothing to do
  assert.equal(e.policyVersion, null);
  raises(() => e.decide(requests(1)[0]), 'invalid', undefined, 'the engine is closed');
  // the engine's own fast entry, even taken away from it, knows it is closed
  const fast = e._decideEncoded;
  raises(() => fast(), 'invalid', undefined, 'the engine is closed');
  raises(() => e.decide(JSON.stringify(requests(1)[0])), 'invalid', undefined, 'closed');
  raises(() => e.decideAsync(requests(1)[0]), 'invalid', undefined, 'the engine is closed');
  raises(() => e.reload(), 'invalid', undefined, 'the engine is closed');
  raises(() => e.stats(), 'invalid', undefined, 'the engine is closed');

  // closing with decisions queued and running: each either answers or is
  // refused as closed, and close returns once none runs
  const snaps = path.join(SCRATCH, 'close-snaps');
  const f = new Engine(dir, { store: false, snapshots: snaps, durability: 'none' });
  const reqs = requests(2000);
  const pending = reqs.map((r) => f.decideAsync(r).then((d) => d.action, (x) => x));
  await new Promise((resolve) => setImmediate(resolve));
  f.close();
  const out = await Promise.all(pending);
  let answered = 0;
  out.forEach((o, i) => {
    if (o instanceof Error) {
      assert.ok(o instanceof VerdictError && o.message === 'the engine is closed', String(o));
    } else {
      assert.equal(o, expected(reqs[i]));
      answered++;
    }
  });
  // the snapshots of the ones answered were all written by close
  const g = new Engine(dir, { store: false, snapshots: snaps });
  try {
    assert.equal(g.stats().snapshotsOn, 1);
  } finally {
    g.close();
  }
  const rep = spawnSync(VERDICT, ['replay', '--snapshots', snaps, '--json'], { encoding: 'utf8' });
  assert.equal(rep.status, 0, rep.stdout + rep.stderr);
  const report = JSON.parse(rep.stdout);
  assert.equal(report.replayed, answered, rep.stdout);
  assert.equal(report.reproduced, answered, rep.stdout);
});

test('a forgotten engine is closed by its finalizer', () => {
  // in a child: an engine left unclosed holds its snapshot folder (a second
  // one there is refused as busy) until it is garbage-collected
  const snaps = path.join(SCRATCH, 'forgotten');
  const dir = bundle();
  const script = `
    const { Engine } = require(${JSON.stringify(path.join(__dirname, '..'))});
    const dir = ${JSON.stringify(dir)}, snaps = ${JSON.stringify(snaps)};
    (function () {
      const e = new Engine(dir, { store: false, snapshots: snaps });
      e.decide({ action: 'peer_gate', context: { country: 'CN', path: '/', ua: 'x', score: 1 } });
    })();
    let busy = null;
    try { new Engine(dir, { store: false, snapshots: snaps }); } catch (x) { busy = x.code; }
    const tries = async () => {
      for (let i = 0; i < 200; i++) {
        global.gc();
        await new Promise((r) => setTimeout(r, 10));
        try {
          const again = new Engine(dir, { store: false, snapshots: snaps });
          again.close();
          return i;
        } catch (x) {
          if (x.code !== 'busy') throw x;
        }
      }
      return -1;
    };
    tries().then((i) => { console.log(JSON.stringify({ busy, freed: i >= 0 })); });
    // and one left open at exit is closed too: its decision is written
    const last = new Engine(dir, { store: false, snapshots: snaps + '-exit', durability: 'none' });
    last.decide({ action: 'peer_gate', context: { country: 'US', path: '/', ua: 'x', score: 0.1 } });
  `;
  const r = spawnSync(process.execPath, ['--expose-gc', '-e', script], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stdout + r.stderr);
  assert.deepEqual(JSON.parse(r.stdout.trim()), { busy: 'busy', freed: true });
  for (const d of [snaps, `${snaps}-exit`]) {
    const rep = spawnSync(VERDICT, ['replay', '--snapshots', d, '--json'], { encoding: 'utf8' });
    assert.equal(rep.status, 0, rep.stdout + rep.stderr);
    const report = JSON.parse(rep.stdout);
    assert.equal(report.reproduced, 1, rep.stdout);
  }
});

test('a snapshot folder written from Node replays exactly', async () => {
  const snaps = path.join(SCRATCH, 'snaps');
  const reqs = requests(300);
  const ids = [];
  const e = new Engine(bundle(), { snapshots: snaps, durability: 'always' });
  try {
    for (let i = 0; i < reqs.length; i++) {
      let r = reqs[i];
      let d;
      if (i % 3 === 0) {
        d = e.decide(JSON.stringify(r));
      } else if (i % 3 === 1) {
        r = { ...r, candidates: ['allow', 'deny', 'ask_mfa'], key: `k-${i}` };
        d = e.decide(r);
      } else {
        d = await e.decideAsync(r);
      }
      assert.equal(d.action, expected(reqs[i]));
      assert.equal(d.snapshotId.length, 36);
      ids.push(d.snapshotId);
    }
    // odd values too: unicode, big and negative numbers, bigints, nesting, empty containers
    const d = e.decide({ action: 'peer_gate', context: {
      country: 'CN', path: '/api/v1/é', ua: 'x"y\\z\n\u2028', score: 0.1,
      n: [2 ** 63, 2 ** 64, -(2 ** 63), 1e30, 1.5, -0, 1e-300, 2n ** 64n - 1n, -(2n ** 63n)],
      m: { '': {}, 'a b': [], 0: null },
    } });
    ids.push(d.snapshotId);
    // the same without bigints: walked in JavaScript (the bigints go to the addon's walk)
    const j = e.decide({ action: 'peer_gate', key: 'ключ', candidates: ['deny', 'allow'], context: {
      country: 'CN', path: '/api/v1/é☃', ua: 'x"y\\z\n\u2028', score: 0.1,
      n: [2 ** 63, 2 ** 64, -(2 ** 63), 1e30, 1.5, -0, 1e-300, 9007199254740993],
      m: { '': {}, 'a b': [], 0: null, nested: [[{ t: true, f: false }]] },
    } });
    ids.push(j.snapshotId);
    assert.ok(e.stats().snapshotsWritten >= ids.length);
  } finally {
    e.close();
  }
  assert.equal(new Set(ids).size, ids.length);
  const rep = spawnSync(VERDICT, ['replay', '--snapshots', snaps, '--json'], { encoding: 'utf8' });
  assert.equal(rep.status, 0, rep.stdout + rep.stderr);
  const report = JSON.parse(rep.stdout);
  assert.equal(report.replayed, ids.length, rep.stdout);
  assert.equal(report.reproduced, ids.length, rep.stdout);
});

test('snapshots off, and the version store', () => {
  const dir = bundle();
  const e = new Engine(dir, { snapshots: false, store: false });
  try {
    assert.equal(e.decide(requests(1)[0]).snapshotId, null);
    assert.equal(e.stats().snapshotsOn, 0);
  } finally {
    e.close();
  }
  assert.ok(!fs.existsSync(path.join(dir, '.verdict')));
  const kept = path.join(SCRATCH, 'kept');
  const k = new Engine(dir, { store: kept });
  k.decide(requests(1)[0]);
  k.close();
  assert.ok(!fs.existsSync(path.join(dir, '.verdict')));
  assert.ok(fs.readdirSync(kept).length > 0);
  const def = new Engine(dir);
  def.decide(requests(1)[0]);
  def.close();
  assert.ok(fs.readdirSync(path.join(dir, '.verdict', 'versions')).length > 0);
  raises(() => new Engine(dir, { store: 3 }), 'invalid', 'store');
});
