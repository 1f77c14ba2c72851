// index.js — the `verdict` package for Node.js: the decision engine in the
// caller's own process (docs/bindings.md, "Node.js"). It loads the addon
// build.sh builds (verdict.node) and gives it the classes of its errors and
// decisions.
//
// The addon is looked for in VERDICT_ADDON (a file), then beside this file
// (an installed package), then in VERDICT_BUILD_DIR/node and the repository's
// build/node (a checkout after `make bindings`).
'use strict';

const fs = require('node:fs');
const path = require('node:path');

// Every failure of the engine: code is the error's name as the CLI and the
// server print it ("request", "json", "policy"...), errno the VD_E* number,
// path the JSON path of the bad field (or null), line and column where
// malformed JSON or a policy file is wrong (1-based, else 0).
class VerdictError extends Error {
  constructor(message, code, path, line, column, errno) {
    super(message);
    this.name = 'VerdictError';
    this.code = code;
    this.errno = errno;
    this.path = path;
    this.line = line;
    this.column = column;
  }
}

// A decision: what engine.decide returns (docs/bindings.md). The addon makes
// it with its fields in this order; trace is there only when asked for.
class Decision {
  constructor(action, allowed, review, confidence, source, rule, reason, strategy, policyVersion,
              modelVersion, snapshotId, latencyUs, trace) {
    this.action = action;
    this.allowed = allowed;
    this.review = review;
    this.confidence = confidence;
    this.source = source;
    this.rule = rule;
    this.reason = reason;
    this.strategy = strategy;
    this.policyVersion = policyVersion;
    this.modelVersion = modelVersion;
    this.snapshotId = snapshotId;
    this.latencyUs = latencyUs;
    if (trace !== undefined) this.trace = trace;
  }

  // the fields as a plain object (what JSON.stringify writes)
  toJSON() {
    return { ...this };
  }
}

function addonPath() {
  const tried = [];
  const candidates = [];
  if (process.env.VERDICT_ADDON) candidates.push(process.env.VERDICT_ADDON);
  candidates.push(path.join(__dirname, 'verdict.node'));
  if (process.env.VERDICT_BUILD_DIR) {
    candidates.push(path.join(process.env.VERDICT_BUILD_DIR, 'node', 'verdict.node'));
  }
  candidates.push(path.join(__dirname, '..', '..', 'build', 'node', 'verdict.node'));
  for (const c of candidates) {
    tried.push(c);
    if (fs.existsSync(c)) return c;
  }
  throw new Error(`verdict: the addon is not built (looked in ${tried.join(', ')}); ` +
                  'build it with `make bindings` or bindings/node/build.sh BUILD_DIR');
}

const native = require(addonPath());
native.init(VerdictError, Decision);
const { Engine } = native;

// ---- decide(object): the walk in JavaScript ----
//
// An object request is walked here into a buffer of builder events (a tag
// byte each; numbers as float64, strings as a uint32 length and UTF-8) that
// the addon replays into the engine's vd_builder (verdict.c, "decisions from
// encoded requests"): the JIT makes this walk far cheaper than reading the
// object through one Node-API call a property. What the walk does not take
// (bigints, NaN, undefined in an array, class instances, a nesting deeper
// than 500...) goes to the addon's own walk, which decides it or names what
// is wrong and where: the two give the same events, so the same decisions.
const E_NULL = 0, E_FALSE = 1, E_TRUE = 2, E_NUMBER = 3, E_STRING = 4, E_MAP = 5, E_MAP_END = 6,
      E_LIST = 7, E_LIST_END = 8, E_KEY = 9, E_ACTION = 20, E_RKEY = 21, E_CANDIDATE = 22,
      E_CONTEXT = 23, E_JSON = 30;
const encoder = new TextEncoder();
let buf = new Uint8Array(1 << 16);
let view = new DataView(buf.buffer);
let pos = 0;
let walking = false;
// the answer of _decideEncoded (and, going in, out[0] the events' length and
// out[1] 1 for a trace): both buffers are registered with the addon once,
// and again when buf grows
const out = new Float64Array(11);
const strings = native.strings;
native.setBuffers(buf, out);

function room(n) {
  if (pos + n <= buf.length) return;
  let cap = buf.length * 2;
  while (cap < pos + n) cap *= 2;
  const b = new Uint8Array(cap);
  b.set(buf.subarray(0, pos));
  buf = b;
  view = new DataView(b.buffer);
  native.setBuffers(buf, out);
}

function putString(tag, s, nul) {
  const len = s.length;
  room(6 + len * 3);
  buf[pos] = tag;
  const at = pos + 1;
  let p = pos + 5;
  let i = 0;
  for (; i < len; i++) {
    const c = s.charCodeAt(i);
    if (c >= 128) break;
    buf[p++] = c;
  }
  if (i < len) p += encoder.encodeInto(i ? s.slice(i) : s, buf.subarray(p)).written;
  view.setUint32(at, p - at - 4, true);
  if (nul) buf[p++] = 0;
  pos = p;
}

function putValue(v, depth) {
  switch (typeof v) {
    case 'string':
      putString(E_STRING, v, false);
      return true;
    case 'number':
      if (v !== v || v === Infinity || v === -Infinity) return false;
      room(9);
      buf[pos] = E_NUMBER;
      view.setFloat64(pos + 1, v, true);
      pos += 9;
      return true;
    case 'boolean':
      room(1);
      buf[pos++] = v ? E_TRUE : E_FALSE;
      return true;
    case 'object': {
      if (v === null) {
        room(1);
        buf[pos++] = E_NULL;
        return true;
      }
      if (depth > 500) return false;
      if (Array.isArray(v)) {
        room(1);
        buf[pos++] = E_LIST;
        for (let i = 0; i < v.length; i++) {
          const x = v[i];
          if (x === undefined || !putValue(x, depth + 1)) return false;
        }
        room(1);
        buf[pos++] = E_LIST_END;
        return true;
      }
      const proto = Object.getPrototypeOf(v);
      if (proto !== Object.prototype && proto !== null) return false;
      room(1);
      buf[pos++] = E_MAP;
      for (const k in v) {
        const x = v[k];
        if (x === undefined) continue;
        putString(E_KEY, k, false);
        if (!putValue(x, depth + 1)) return false;
      }
      room(1);
      buf[pos++] = E_MAP_END;
      return true;
    }
    default:
      return false;
  }
}

function putRequest(r) {
  const proto = Object.getPrototypeOf(r);
  if (proto !== Object.prototype && proto !== null) return false;
  pos = 0;
  for (const k in r) {
    const v = r[k];
    if (v === undefined) continue;
    if (k === 'action' || k === 'key') {
      if (typeof v !== 'string') return false;
      putString(k === 'action' ? E_ACTION : E_RKEY, v, true);
    } else if (k === 'candidates') {
      if (!Array.isArray(v)) return false;
      for (let i = 0; i < v.length; i++) {
        if (typeof v[i] !== 'string') return false;
        putString(E_CANDIDATE, v[i], true);
      }
    } else if (k === 'context') {
      if (v === null || typeof v !== 'object' || Array.isArray(v)) return false;
      room(1);
      buf[pos++] = E_CONTEXT;
      if (!putValue(v, 0)) return false;
    } else {
      return false;
    }
  }
  return true;
}

const str = (i) => (i < 0 ? null : strings[i]);
const nativeDecide = Engine.prototype.decide;
// the addon's own walk, kept reachable for the tests and bench/bindings
Object.defineProperty(Engine.prototype, '_decideWalked', { value: nativeDecide });

Object.defineProperty(Engine.prototype, 'decide', {
  configurable: true,
  writable: true,
  value: function decide(request, options) {
    // one buffer: a getter that decides while its object is being walked
    // (a decide inside a decide) takes the addon's walk instead
    if (walking) return nativeDecide.call(this, request, options);
    let encoded = false;
    if (typeof request === 'string') {
      pos = 0;
      putString(E_JSON, request, false);
      encoded = true;
    } else if (request !== null && typeof request === 'object' && !Array.isArray(request)) {
      walking = true;
      try {
        encoded = putRequest(request);
      } finally {
        walking = false;
      }
    }
    if (encoded) {
      out[0] = pos;
      out[1] = options !== null && typeof options === 'object' && options.trace ? 1 : 0;
      const id = this._decideEncoded();
      if (id === null || typeof id === 'string') {
        return new Decision(str(out[0]), out[7] === 1, out[8] === 1, out[9], str(out[1]),
                            str(out[2]), str(out[3]), str(out[4]), str(out[5]), str(out[6]), id,
                            out[10]);
      }
      if (id !== undefined) return id;
    }
    return nativeDecide.call(this, request, options);
  },
});

module.exports = {
  Engine,
  VerdictError,
  Decision,
  evaluate: native.evaluate,
  eval: native.evaluate,
  version: native.version,
};
