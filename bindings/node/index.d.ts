// index.d.ts — TypeScript declarations of the `verdict` package
// (docs/bindings.md, "Node.js").

/** A value a request's context may hold (as JSON would carry it, plus bigint). */
export type Value = null | boolean | number | bigint | string | Value[] | { [key: string]: Value | undefined };

/** A request: only `action` (the decision point) is required. */
export interface Request {
  action: string;
  context?: { [key: string]: Value | undefined };
  candidates?: string[];
  key?: string;
}

export interface EngineOptions {
  /** A folder to record every decision in; false or absent: off. */
  snapshots?: false | string;
  /** When snapshots reach the disk (default "interval": fsync every 100 ms). */
  durability?: 'interval' | 'none' | 'always';
  /** Where rate-limit counters live: "local" (default) or "redis://HOST:PORT[/DB]". */
  state?: string;
  /** Keeps local counters in this file across restarts. */
  stateFile?: string;
  /** This node's name in snapshots (default: the host name). */
  node?: string;
  /** The largest request JSON accepted, in bytes (0: 1 MiB). */
  maxRequestBytes?: number;
  /** The policy version store: a folder, false for none, absent for the default. */
  store?: false | string;
}

export interface DecideOptions {
  /** Add `trace`: the rules tried, the one that matched, the lets computed. */
  trace?: boolean;
}

export class Decision {
  /** The action, or null for an error decision with no action. */
  readonly action: string | null;
  readonly allowed: boolean;
  readonly review: boolean;
  readonly confidence: number;
  readonly source: 'rule' | 'model' | 'default' | 'error';
  readonly rule: string | null;
  readonly reason: string | null;
  readonly strategy: string | null;
  /** The deciding strategy's version (hex SHA-256). */
  readonly policyVersion: string | null;
  /** The model's version when the decision ran it, else null. */
  readonly modelVersion: string | null;
  /** The id of its snapshot (a UUIDv7), or null with snapshots off. */
  readonly snapshotId: string | null;
  readonly latencyUs: number;
  /** With {trace: true} only. */
  readonly trace?: { [key: string]: unknown };
  /** The fields as a plain object (what JSON.stringify writes). */
  toJSON(): { [key: string]: unknown };
}

export interface EngineStats {
  snapshotsAppended: number;
  snapshotsWritten: number;
  snapshotsDropped: number;
  snapshotsFailed: number;
  snapshotsRefused: number;
  snapshotsOn: number;
}

export class Engine {
  /** Loads and compiles the bundle in `path`; throws VerdictError (code "policy") when it does not. */
  constructor(path: string, options?: EngineOptions);
  /** Decides on the calling thread. `request` is an object, or the same request as JSON. */
  decide(request: Request | string, options?: DecideOptions): Decision;
  /** Decides on libuv's thread pool; the request is read before this returns. */
  decideAsync(request: Request | string, options?: DecideOptions): Promise<Decision>;
  /** Recompiles the folder and swaps the new bundle in; returns its version. */
  reload(): string;
  /** Waits for the decisions running, writes the queued snapshots, frees the engine. */
  close(): void;
  stats(): EngineStats;
  /** The live bundle's version, or null once closed. */
  readonly policyVersion: string | null;
  readonly closed: boolean;
}

export class VerdictError extends Error {
  /** The error's name: "request", "json", "limit", "not_found", "policy", "invalid"... */
  readonly code: string;
  /** The VD_E* number (negative). */
  readonly errno: number;
  /** The JSON path of the bad field, or null. */
  readonly path: string | null;
  /** Where malformed JSON or a policy file is wrong (1-based), else 0. */
  readonly line: number;
  readonly column: number;
}

/** The value of a CEL expression over the variables of an object. */
export function evaluate(expr: string, bindings?: { [key: string]: unknown }): unknown;
export { evaluate as eval };
export const version: string;
