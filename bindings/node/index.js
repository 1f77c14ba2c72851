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

module.exports = {
  Engine: native.Engine,
  VerdictError,
  Decision,
  evaluate: native.evaluate,
  eval: native.evaluate,
  version: native.version,
};
