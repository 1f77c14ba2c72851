// requests.js — the requests of bench/bindings, made here so that every lane
// decides the same ones: N objects {country, path, ua, score} drawn from a
// mulberry32 generator seeded with 42, and the four-rule gate's answer to
// each (the policy below, first match wins):
//
//   allow    country == "CN" && path.startsWith("/api/v1")
//   deny     ua in the five scanner agents
//   ask_mfa  score < 0.6
//   allow    otherwise
//
// Draws, in this order per request: a path of nine, a country of ten ("CN"
// twice), whether to append "/<0-999>" (half) and which number, whether the
// agent is a scanner (12%) and which, else one of four ordinary agents, and
// a score with four decimals. 100,000 of them answer allow 42,131, deny
// 10,743, ask_mfa 47,126.
//
//   node requests.js [N] > requests.jsonl   one verdict request a line, with
//                                           the answer in "expect"
'use strict';

const SCANNERS = ['curl/8.4.0', 'python-requests/2.31.0', 'Go-http-client/1.1', 'sqlmap/1.7',
                  'masscan/1.3'];
const COUNTRIES = ['CN', 'US', 'DE', 'BR', 'IN', 'FR', 'JP', 'RU', 'GB', 'CN'];
const PATHS = ['/api/v1/users', '/api/v1/orders', '/api/v2/items', '/login', '/static/app.js',
               '/api/v1', '/api/v10/x', '/health', '/api/v1/search'];
const AGENTS = ['Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0',
                'Mozilla/5.0 (Macintosh) Safari/605.1.15',
                'Mozilla/5.0 (Windows NT 10.0) Chrome/126.0', 'okhttp/4.12.0'];

// mulberry32: 32 bits of state, a float in [0, 1) per call
function mulberry32(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let z = s;
    z = Math.imul(z ^ (z >>> 15), z | 1);
    z ^= z + Math.imul(z ^ (z >>> 7), z | 61);
    return ((z ^ (z >>> 14)) >>> 0) / 2 ** 32;
  };
}

function makeRequests(n = 100000, seed = 42) {
  const next = mulberry32(seed);
  const of = (list) => list[Math.floor(next() * list.length)];
  const out = new Array(n);
  for (let i = 0; i < n; i++) {
    const base = of(PATHS);
    const country = of(COUNTRIES);
    const path = next() < 0.5 ? base : `${base}/${Math.floor(next() * 1000)}`;
    const ua = next() < 0.12 ? of(SCANNERS) : of(AGENTS);
    out[i] = { country, path, ua, score: Math.floor(next() * 10000) / 10000 };
  }
  return out;
}

function expected(c) {
  if (c.country === 'CN' && c.path.startsWith('/api/v1')) return 'allow';
  if (SCANNERS.includes(c.ua)) return 'deny';
  return c.score < 0.6 ? 'ask_mfa' : 'allow';
}

// the gate as a verdict strategy (decision point peer_gate)
const POLICY = `strategy: peer_gate
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
  - name: low-score
    if: score < 0.6
    action: ask_mfa
default:
  action: allow
`;

module.exports = { SCANNERS, makeRequests, expected, POLICY };

if (require.main === module) {
  const n = Number(process.argv[2] || 100000);
  const lines = makeRequests(n).map((c) =>
    JSON.stringify({ action: 'peer_gate', context: c, expect: expected(c) }));
  process.stdout.write(lines.join('\n') + '\n');
}
