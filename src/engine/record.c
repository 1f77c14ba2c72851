/* record.c — the decision snapshot: every decision the engine makes, written
 * down completely enough to be re-made exactly, and handed to the segment
 * log (src/snapshot/).
 *
 * The payload is compact JSON, format 1, documented field by field in
 * docs/snapshots.md ("Snapshot contents"): the request as received, what the
 * rules did (the trace, the lets and their values), the outcome, the stage
 * times, the versions, the limits the decision ran under, and `inputs` —
 * every nondeterministic value the decision read. Today that is the clock
 * reading behind `request.time`; counters and random draws do not exist yet
 * and appear as empty objects, so a reader never has to guess where they
 * will go.
 *
 * Where the work happens: the deciding thread only captures — the fields
 * raw, values and the decision's own strings copied, rule/let/feature/limit
 * names as pointers into the bundle (which the engine keeps until the writer
 * is past the record) — into a compact binary record written straight into
 * a slot of the log's queue as a raw record (record_commit; record_capture
 * builds the same in the decision's arena); the log's writer thread turns
 * each capture into the JSON and the record header (the log's format hook)
 * before framing it, names from a cache of their JSON text by address.
 * record_payload writes the same JSON directly from a decision; it is the
 * reference the formatter is held to, byte for byte
 * (tests/engine/test_record_equiv.c).
 *
 * Why by hand: the fields are written in one pass. Building the payload as
 * a value tree and serialising that would allocate the tree too and walk
 * everything twice. The request as received is copied byte for byte minus
 * the whitespace between tokens (the parser has already vouched for it), so
 * numbers keep their spelling and the payload stays one line, as JSON Lines
 * export needs.
 *
 * Not here: the log itself, ids and their ordering (src/snapshot/), reading
 * snapshots back and re-deciding them (src/replay/). */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/dtoa.h"
#include "core/json.h"
#include "core/timefmt.h"
#include "engine/engine.h"
#include "snapshot/snapshot.h"

/* The writer's cache of names as JSON: a rule, let or feature name, quoted
 * and escaped, by its address in the bundle (captures point at names:
 * "How recording works" in docs/snapshots.md), so that a name is written
 * once per bundle rather than measured, checked and copied per snapshot.
 * Open addressing on the address; the quoted texts in one buffer. */
typedef struct name_entry {
  const char *name; /* NULL: free */
  uint32_t off, len;
} name_entry;

/* The seconds part, "2026-11-29T10:00:00.", of the last time the writer
 * wrote: consecutive snapshots mostly share it. */
typedef struct time_memo {
  int64_t sec;
  size_t n; /* 0: none */
  char text[48];
} time_memo;

typedef struct name_cache {
  name_entry *tab;
  uint32_t cap, used; /* cap: a power of two, or 0 */
  char *text;
  size_t text_len, text_cap;
  time_memo time; /* and the last time's seconds, written */
} name_cache;

struct recorder {
  snapshot_log *log;
  snapshot_idgen gen;
  int always;            /* durability ALWAYS: wait for the disk */
  unsigned full_wait_ms; /* on_full BLOCK: how long an append waits for room */
  /* not recorded, and not counted by the log: the payload could not be
   * built, the log was closing, or (ALWAYS) the record never became durable */
  _Atomic uint64_t failed;
  char node[256];
  arena fmt_mem; /* the writer thread's, for record_format */
  name_cache names;
  /* bumped (recorder_forget) before a bundle is freed: the cache's keys
   * are addresses in bundles, which a later bundle may reuse */
  _Atomic uint64_t bundles_freed;
  uint64_t names_gen; /* the writer's: bundles_freed when the cache was last emptied */
};

static int format_capture(const char *capture, size_t clen, const char *id, const char *node,
                          json_buf *out, snapshot_rec *hdr, name_cache *nc);

/* The log's format hook (snapshot.h), on the writer thread: the capture the
 * deciding thread appended becomes the format-1 payload. The engine appends
 * raw records (snapshot_log_reserve_raw: rec->point NULL here), whose header
 * fields come from the capture too; a record appended with its header
 * (tests) keeps it. */
static void name_cache_clear(name_cache *nc);

static int recorder_format(void *ud, snapshot_rec *rec) {
  recorder *r = ud;
  arena_reset(&r->fmt_mem);
  json_buf b;
  json_buf_init(&b, &r->fmt_mem);
  /* Read after the record was taken from the queue: a bundle freed before
   * the record's own bundle went live is seen freed here. */
  uint64_t freed = atomic_load_explicit(&r->bundles_freed, memory_order_acquire);
  if (freed != r->names_gen) {
    name_cache_clear(&r->names);
    r->names_gen = freed;
  }
  if (!rec->point) {
    if (format_capture(rec->payload, rec->payload_len, NULL, r->node, &b, rec, &r->names) != 0)
      return -1;
    rec->payload = b.data;
    rec->payload_len = b.len;
    return 0;
  }
  char id[SNAPSHOT_ID_TEXT];
  snapshot_id_format(rec->id, id);
  if (record_format(rec->payload, rec->payload_len, id, r->node, &b) != 0) return -1;
  rec->payload = b.data;
  rec->payload_len = b.len;
  return 0;
}

int recorder_open(const char *dir, const vd_engine_opts *opts, recorder **out, vd_error *err) {
  *out = NULL;
  recorder *r = calloc(1, sizeof *r);
  if (!r) return engine_error(err, VD_ENOMEM, 0, 0, NULL, "out of memory opening snapshots");
  if (opts->node && opts->node[0]) {
    snprintf(r->node, sizeof r->node, "%s", opts->node);
  } else if (gethostname(r->node, sizeof r->node - 1) != 0 || !r->node[0]) {
    snprintf(r->node, sizeof r->node, "localhost");
  }
  snapshot_log_opts o;
  snapshot_log_opts_init(&o);
  switch (opts->snapshot_durability) {
    case VD_DURABILITY_INTERVAL:
      o.durability = SNAPSHOT_DURABLE_INTERVAL;
      break;
    case VD_DURABILITY_NONE:
      o.durability = SNAPSHOT_DURABLE_NONE;
      break;
    case VD_DURABILITY_ALWAYS:
      o.durability = SNAPSHOT_DURABLE_ALWAYS;
      r->always = 1;
      break;
    default:
      free(r);
      return engine_error(err, VD_EINVAL, 0, 0, NULL,
                          "vd_engine_open: snapshot_durability %d is not one of "
                          "VD_DURABILITY_INTERVAL, _NONE, _ALWAYS",
                          opts->snapshot_durability);
  }
  if (opts->snapshot_on_full != VD_ON_FULL_BLOCK && opts->snapshot_on_full != VD_ON_FULL_DROP) {
    free(r);
    return engine_error(err, VD_EINVAL, 0, 0, NULL,
                        "vd_engine_open: snapshot_on_full %d is not VD_ON_FULL_BLOCK or _DROP",
                        opts->snapshot_on_full);
  }
  o.on_full = opts->snapshot_on_full == VD_ON_FULL_DROP ? SNAPSHOT_FULL_DROP : SNAPSHOT_FULL_BLOCK;
  if (opts->snapshot_interval_ms) o.interval_ms = opts->snapshot_interval_ms;
  if (opts->snapshot_close_timeout_ms) o.close_timeout_ms = opts->snapshot_close_timeout_ms;
  if (opts->snapshot_queue_records) o.queue_records = opts->snapshot_queue_records;
  r->full_wait_ms = o.full_wait_ms;
  o.node = r->node;
  o.format = recorder_format;
  o.format_ud = r;
  /* An engine for one decision on one thread (an agent's hook: see
   * lazy_compile in verdict.h) writes its snapshot itself: a writer thread
   * costs such a process more than the record does. Same bytes, same
   * durability (docs/snapshots.md). */
  o.inline_writer = opts->lazy_compile != 0;
  arena_init(&r->fmt_mem, NULL, 0, 0);
  snapshot_idgen_init(&r->gen);
  char msg[SNAPSHOT_ERRLEN];
  int rc = snapshot_log_open(dir, &o, &r->log, msg, sizeof msg);
  if (rc < 0) {
    arena_free(&r->fmt_mem);
    free(r);
    if (rc == SNAPSHOT_EBUSY)
      return engine_error(err, VD_EBUSY, 0, 0, NULL,
                          "cannot record snapshots in %s: %s (one writer per folder: give "
                          "another folder, or wait for the other process)",
                          dir, msg);
    return engine_error(err, VD_ESNAPSHOT, 0, 0, NULL, "cannot record snapshots in %s: %s", dir,
                        msg);
  }
  *out = r;
  return 0;
}

static void counters_of(recorder *r, const snapshot_log_status *st, vd_engine_counters *out);

void recorder_close(recorder *r, vd_engine_counters *out) {
  if (!r) return;
  snapshot_log_status st;
  snapshot_log_close(r->log, &st); /* formats what is queued: fmt_mem after */
  if (out) counters_of(r, &st, out);
  arena_free(&r->fmt_mem);
  free(r->names.tab);
  free(r->names.text);
  free(r);
}

void recorder_forget(recorder *r) {
  if (r) atomic_fetch_add_explicit(&r->bundles_freed, 1, memory_order_release);
}

void recorder_counters(recorder *r, vd_engine_counters *out) {
  snapshot_log_status st;
  snapshot_log_status_get(r->log, &st);
  counters_of(r, &st, out);
}

static void counters_of(recorder *r, const snapshot_log_status *st_, vd_engine_counters *out) {
  const snapshot_log_status st = *st_;
  out->snapshots_on = 1;
  out->snapshots_appended = st.appended;
  out->snapshots_written = st.written;
  out->snapshots_dropped = st.dropped;
  out->snapshots_failed = st.rejected + atomic_load_explicit(&r->failed, memory_order_relaxed);
  out->snapshot_write_errors = st.write_errors;
  out->snapshot_fsyncs = st.fsyncs;
  out->snapshot_queue_depth = st.queue_depth;
  out->snapshots_refused = st.refused;
  /* under ALWAYS nothing is answered before it is on disk */
  out->snapshot_unwritten = r->always ? 0 : st.queue_depth;
  out->snapshots_lost = st.lost;
  out->snapshot_failing = st.failing;
  out->snapshot_failing_since_ns = st.failing_since_ns;
  out->snapshot_recovered_cut_records = st.cut_records;
  out->snapshot_recovered_cut_bytes = st.cut_bytes;
  snprintf(out->snapshot_last_error, sizeof out->snapshot_last_error, "%s", st.last_error);
}

int recorder_repair(recorder *r, unsigned i, vd_snapshot_repair *out) {
  const snapshot_repair *list;
  size_t n = snapshot_log_repairs(r->log, &list);
  if (i >= n) return -1;
  out->kind = snapshot_repair_kind(list[i].kind);
  out->segment = list[i].segment;
  out->bytes = list[i].bytes;
  out->records = list[i].records;
  return 0;
}

/* ---- writing the payload ----
 * Straight into a json_buf in the decision's arena, sized up front for the
 * usual case. This runs once per decision, so the small writes are inline:
 * literals with their lengths known at compile time, strings that need no
 * escaping (rule, let and action names, nearly always) copied as they are
 * after an 8-bytes-at-a-time check, numbers two digits at a time. The text
 * is NUL-terminated once, at the end (json_buf's own writers, used for what
 * needs escaping, keep it terminated too). */

/* Always inlined: the capture's small copies, which run a few hundred
 * times a decision. */
#define HOT static inline __attribute__((always_inline))

/* A value the way json_write writes it, with the common kinds inline. */
static void put_value(json_buf *b, const value *v, int lenient) {
  switch (v->kind) {
    case V_STRING:
      json_put_strn(b, v->s, v->n);
      return;
    case V_BOOL:
      json_put_bool(b, v->b);
      return;
    case V_NULL:
      JSON_PUT(b, "null");
      return;
    case V_INT:
      json_put_i64(b, v->i);
      return;
    default:
      if (json_write(b, v, lenient) != 0) JSON_PUT(b, "null");
  }
}

/* As render.c writes it, so the snapshot and the answer agree to the digit. */
static void put_confidence(json_buf *b, double c) {
  if (c == 1.0)
    JSON_PUT(b, "1.0");
  else if (c == 0.0)
    JSON_PUT(b, "0.0");
  else
    json_write_double(b, c);
}

/* JSON text the parser accepted, without the whitespace between tokens.
 * Strings are copied whole (found by their closing quote: one not preceded
 * by an odd number of backslashes); outside them only the structure and
 * the scalars remain, which are short. */
static void put_minified(json_buf *b, const char *s, size_t n) {
  if (json_room(b, n)) return;
  char *o = b->data + b->len;
  size_t i = 0;
  while (i < n) {
    char c = s[i];
    if (c == '"') {
      size_t j = i + 1;
      for (;;) {
        const char *q = memchr(s + j, '"', n - j);
        if (!q) { /* never: the text parsed */
          j = n;
          break;
        }
        size_t k = (size_t)(q - s), bs = 0;
        while (k - bs > i + 1 && s[k - bs - 1] == '\\') bs++;
        j = k + 1;
        if (!(bs & 1)) break;
      }
      memcpy(o, s + i, j - i);
      o += j - i;
      i = j;
    } else {
      if (c != ' ' && c != '\n' && c != '\r' && c != '\t') *o++ = c;
      i++;
    }
  }
  b->len = (size_t)(o - b->data);
  b->data[b->len] = '\0';
}

/* The request built in C, as the JSON request it stands for. */
static void put_c_request(json_buf *b, const vd_request *r) {
  JSON_PUT(b, "{\"action\":");
  json_put_str(b, r->action);
  if (r->ncandidates) {
    JSON_PUT(b, ",\"candidates\":[");
    for (size_t i = 0; i < r->ncandidates; i++) {
      if (i) json_put_char(b, ',');
      json_put_str(b, r->candidates[i]);
    }
    json_put_char(b, ']');
  }
  if (r->context_json) {
    JSON_PUT(b, ",\"context\":");
    size_t n = r->context_len < 0 ? strlen(r->context_json) : (size_t)r->context_len;
    put_minified(b, r->context_json, n);
  }
  if (r->key) {
    JSON_PUT(b, ",\"key\":");
    json_put_str(b, r->key);
  }
  json_put_char(b, '}');
}

/* A time as put_time writes it, the seconds' text from tm when they are
 * the last ones written (tm may be NULL). */
static void put_time_memo(json_buf *b, int64_t ns, time_memo *tm) {
  int64_t sec = ns / 1000000000, frac = ns % 1000000000;
  if (frac < 0) {
    frac += 1000000000;
    sec--;
  }
  char t[64];
  size_t n;
  if (tm && tm->n && tm->sec == sec) {
    n = tm->n;
    memcpy(t, tm->text, n);
  } else {
    n = timefmt_format_rfc3339(sec, 0, t);
    if (n < 2 || n > 40 || t[n - 1] != 'Z') {
      JSON_PUT(b, "null");
      return;
    }
    t[n - 1] = '.';
    if (tm) {
      tm->sec = sec;
      tm->n = n;
      memcpy(tm->text, t, n);
    }
  }
  for (int i = 8; i >= 0; i--, frac /= 10) t[n + (size_t)i] = (char)('0' + frac % 10);
  t[n + 9] = 'Z';
  json_put_char(b, '"');
  json_put_raw(b, t, n + 10);
  json_put_char(b, '"');
}

/* "2026-11-29T10:00:00.123456789Z": always nine fraction digits. */
static void put_time(json_buf *b, int64_t ns) { put_time_memo(b, ns, NULL); }

static void put_result(json_buf *b, uint8_t r) {
  switch (r) {
    case RR_TRUE:
      JSON_PUT(b, ",\"result\":\"true\"");
      break;
    case RR_FALSE:
      JSON_PUT(b, ",\"result\":\"false\"");
      break;
    case RR_ERROR:
      JSON_PUT(b, ",\"result\":\"error\"");
      break;
    default:
      JSON_PUT(b, ",\"result\":\"skipped-not-candidate\"");
  }
}

/* "floor": the request's confidence_floor and the action it replaced
 * (null: none), or null when the request sent none. */
static void put_floor(json_buf *b, double floor, const char *from, size_t from_n) {
  if (!(floor >= 0)) {
    JSON_PUT(b, ",\"floor\":null");
    return;
  }
  JSON_PUT(b, ",\"floor\":{\"min\":");
  json_write_double(b, floor);
  JSON_PUT(b, ",\"instead_of\":");
  json_put_strn_or_null(b, from, from_n);
  json_put_char(b, '}');
}

static void put_trace(json_buf *b, const vd_decision *d) {
  JSON_PUT(b, "{\"rules\":[");
  for (uint32_t i = 0; i < d->ntrace; i++) {
    const trace_rule *t = &d->trace[i];
    if (i) json_put_char(b, ',');
    JSON_PUT(b, "{\"rule\":");
    json_put_str(b, t->name);
    put_result(b, t->result);
    if (t->error) {
      JSON_PUT(b, ",\"error\":");
      json_put_str(b, t->error);
    }
    json_put_char(b, '}');
  }
  JSON_PUT(b, "],\"matched\":");
  json_put_str(b, d->source && strcmp(d->source, "rule") == 0 ? d->rule : NULL);
  JSON_PUT(b, ",\"rules_total\":");
  json_put_u64(b, d->rules_total);
  JSON_PUT(b, ",\"rules_considered\":");
  json_put_u64(b, d->rules_indexed);
  JSON_PUT(b, ",\"no_candidate\":");
  json_put_str(b, d->no_candidate);
  put_floor(b, d->floor, d->floor_from, d->floor_from ? strlen(d->floor_from) : 0);
  JSON_PUT(b, ",\"cost\":");
  json_put_u64(b, d->cost);
  json_put_char(b, '}');
}

/* "lets": name -> value for the lets that evaluated; "let_errors": name ->
 * message for those that failed. NaN and the infinities, which a let can
 * compute, are written as the bare tokens (readers parse leniently). */
static void put_lets(json_buf *b, const vd_decision *d) {
  JSON_PUT(b, ",\"lets\":{");
  int first = 1, errors = 0;
  for (uint32_t i = 0; i < d->nlets; i++) {
    const value *v = d->let_values ? &d->let_values[i] : NULL;
    if (v && v->kind == V_ERROR) {
      errors++;
      continue;
    }
    if (!first) json_put_char(b, ',');
    first = 0;
    json_put_str(b, d->lets[i]);
    json_put_char(b, ':');
    if (v)
      put_value(b, v, 1);
    else
      JSON_PUT(b, "null");
  }
  JSON_PUT(b, "},\"let_errors\":{");
  first = 1;
  for (uint32_t i = 0; i < d->nlets && errors; i++) {
    const value *v = &d->let_values[i];
    if (v->kind != V_ERROR) continue;
    if (!first) json_put_char(b, ',');
    first = 0;
    json_put_str(b, d->lets[i]);
    json_put_char(b, ':');
    json_put_strn(b, v->s, v->n);
  }
  json_put_char(b, '}');
}

/* A float32 feature: the fewest digits that read back to it (ftoa_shortest);
 * NaN (missing) is null. Integers, the usual feature, go the short way. */
static void put_float(json_buf *b, float f) {
  if (f != f) {
    JSON_PUT(b, "null");
    return;
  }
  if (f >= 0 && f < 1e9f && f == (float)(uint32_t)f) {
    json_put_u64(b, (uint32_t)f);
    return;
  }
  char t[32];
  size_t n = ftoa_shortest(f, t);
  json_put_raw(b, t, n);
}

/* "model": what the fallback model saw and said, or null when the
 * decision did not ask it. The feature row is the audit trail (and what
 * training/serving skew is checked against). */
static void put_model(json_buf *b, const vd_decision *d) {
  static const char *const status[] = {"value", "missing", "default", "unknown"};
  if (d->model_run != MODEL_SCORED && d->model_run != MODEL_DEADLINE) {
    JSON_PUT(b, ",\"model_version\":null,\"features\":null,\"model\":null");
    return;
  }
  JSON_PUT(b, ",\"model_version\":\"");
  json_put_raw(b, d->model_version, strlen(d->model_version));
  JSON_PUT(b, "\",\"features\":{");
  for (uint32_t i = 0; i < d->nfeatures; i++) {
    if (i) json_put_char(b, ',');
    json_put_str(b, d->feature_names[i]);
    json_put_char(b, ':');
    put_float(b, d->features[i]);
  }
  JSON_PUT(b, "},\"model\":{\"name\":");
  json_put_str(b, d->model_name);
  JSON_PUT(b, ",\"version\":\"");
  json_put_raw(b, d->model_version, strlen(d->model_version));
  JSON_PUT(b, "\",\"features_version\":\"");
  json_put_raw(b, d->features_version, strlen(d->features_version));
  JSON_PUT(b, "\",\"timeout_ms\":");
  json_put_u64(b, d->model_timeout_ms);
  JSON_PUT(b, ",\"deadline_missed\":");
  json_put_bool(b, d->model_run == MODEL_DEADLINE);
  JSON_PUT(b, ",\"feature_status\":{");
  uint32_t k = 0;
  for (uint32_t i = 0; i < d->nfeatures; i++) {
    if (!d->feature_status[i] || d->feature_status[i] > 3) continue;
    if (k++) json_put_char(b, ',');
    json_put_str(b, d->feature_names[i]);
    json_put_char(b, ':');
    json_put_str(b, status[d->feature_status[i]]);
  }
  JSON_PUT(b, "},\"feature_error\":");
  json_put_str(b, d->feature_error);
  if (d->model_run == MODEL_SCORED && d->model_class >= 0) {
    JSON_PUT(b, ",\"class\":");
    json_put_i64(b, d->model_class);
  }
  JSON_PUT(b, ",\"ns\":");
  json_put_u64(b, d->ns_model);
  json_put_char(b, '}');
}

/* inputs.counters: every limit counter the decision read, by limit name —
 * the count and penalty before the decision (what replay feeds back), and
 * whether it charged (docs/snapshots.md). */
static void put_counters(json_buf *b, const vd_decision *d) {
  json_put_char(b, '{');
  int first = 1;
  for (uint32_t i = 0; i < d->nlimit_reads && d->limits_of; i++) {
    const limit_read *lr = &d->limit_reads[i];
    if (lr->state != LIMIT_READ) continue;
    if (!first) json_put_char(b, ',');
    first = 0;
    json_put_str(b, d->limits_of->limits[i].name);
    JSON_PUT(b, ":{\"key\":");
    json_put_strn(b, lr->key, lr->key_len);
    JSON_PUT(b, ",\"count\":");
    json_put_u64(b, lr->r.count);
    JSON_PUT(b, ",\"penalized\":");
    json_put_bool(b, lr->r.penalized);
    JSON_PUT(b, ",\"charged\":");
    json_put_bool(b, lr->r.charged);
    if (lr->r.degraded) JSON_PUT(b, ",\"degraded\":true");
    json_put_char(b, '}');
  }
  json_put_char(b, '}');
}

int record_payload(vd_decision *d, const record_input *in, const char *id, const char *node,
                   const char **out, size_t *len) {
  const decide_request *req = in->req;
  json_buf b;
  json_buf_init(&b, &d->mem);
  /* Enough for the usual snapshot in one allocation. */
  json_room(&b, 1024 + in->json_len + (size_t)d->ntrace * 48 + (size_t)d->nlets * 64 +
                    (size_t)d->nfeatures * 48);
  JSON_PUT(&b, "{\"format\":1,\"id\":"); /* format 1: docs/snapshots.md */
  json_put_str(&b, id);
  JSON_PUT(&b, ",\"time\":");
  put_time(&b, d->clock_ns);
  JSON_PUT(&b, ",\"time_ns\":");
  json_put_i64(&b, d->clock_ns);
  JSON_PUT(&b, ",\"node\":");
  json_put_str(&b, node);
  JSON_PUT(&b, ",\"engine_version\":");
  json_put_str(&b, vd_version());
  JSON_PUT(&b, ",\"point\":");
  json_put_strn(&b, req->action.s, req->action.n);
  JSON_PUT(&b, ",\"request\":");
  if (in->json)
    put_minified(&b, in->json, in->json_len);
  else if (in->creq)
    put_c_request(&b, in->creq);
  else
    JSON_PUT(&b, "null");
  JSON_PUT(&b, ",\"candidates\":");
  json_put_char(&b, '[');
  for (uint32_t i = 0; i < req->candidates.n; i++) {
    if (i) json_put_char(&b, ',');
    put_value(&b, &req->candidates.items[i], 0);
  }
  json_put_char(&b, ']');
  JSON_PUT(&b, ",\"key\":");
  json_put_strn(&b, req->key.s, req->key.n);
  JSON_PUT(&b, ",\"strategy\":");
  json_put_str(&b, d->strategy);
  /* versions are 64 hex digits: nothing to escape */
  JSON_PUT(&b, ",\"policy_version\":\"");
  json_put_raw(&b, d->policy_version, strlen(d->policy_version));
  JSON_PUT(&b, "\",\"bundle_version\":\"");
  json_put_raw(&b, d->bundle_version, strlen(d->bundle_version));
  json_put_char(&b, '"');
  put_model(&b, d);
  JSON_PUT(&b, ",\"trace\":");
  put_trace(&b, d);
  put_lets(&b, d);
  if (d->model_run == MODEL_SCORED) {
    JSON_PUT(&b, ",\"model_score\":");
    json_write_double(&b, d->model_score);
    JSON_PUT(&b, ",\"model_confidence\":");
    if (d->model_confidence == d->model_confidence)
      json_write_double(&b, d->model_confidence);
    else
      JSON_PUT(&b, "null");
  } else {
    JSON_PUT(&b, ",\"model_score\":null,\"model_confidence\":null");
  }
  JSON_PUT(&b, ",\"action\":");
  json_put_str(&b, d->action);
  JSON_PUT(&b, ",\"allowed\":");
  json_put_bool(&b, d->allowed);
  JSON_PUT(&b, ",\"review\":");
  json_put_bool(&b, d->review);
  JSON_PUT(&b, ",\"confidence\":");
  put_confidence(&b, d->confidence);
  JSON_PUT(&b, ",\"source\":");
  json_put_str(&b, d->source);
  JSON_PUT(&b, ",\"reason\":{\"rule\":");
  json_put_str(&b, d->rule);
  JSON_PUT(&b, ",\"message\":");
  json_put_str(&b, d->reason);
  JSON_PUT(&b, "},\"latency_ns\":{\"parse\":");
  json_put_u64(&b, d->ns_parse);
  JSON_PUT(&b, ",\"decide\":");
  json_put_u64(&b, d->ns_decide);
  JSON_PUT(&b, ",\"render\":");
  json_put_u64(&b, d->ns_render);
  JSON_PUT(&b, ",\"total\":");
  json_put_u64(&b, d->latency_ns);
  JSON_PUT(&b, "},\"limits\":{\"cost\":");
  json_put_u64(&b, in->lim->cost_limit);
  JSON_PUT(&b, ",\"regex_match\":");
  json_put_u64(&b, in->lim->regex_match_limit);
  JSON_PUT(&b, ",\"memory\":");
  json_put_u64(&b, in->lim->memory_limit);
  JSON_PUT(&b, ",\"max_request_bytes\":");
  json_put_u64(&b, in->lim->max_request_bytes);
  JSON_PUT(&b, "},\"inputs\":{\"clock_ns\":");
  json_put_i64(&b, d->clock_ns);
  /* whether the model's deadline passed: the clock decided it, so replay
   * takes the recorded outcome instead of timing the trees again */
  JSON_PUT(&b, ",\"model_deadline_missed\":");
  if (d->model_run == MODEL_SCORED || d->model_run == MODEL_DEADLINE)
    json_put_bool(&b, d->model_run == MODEL_DEADLINE);
  else
    JSON_PUT(&b, "null");
  JSON_PUT(&b, ",\"counters\":");
  put_counters(&b, d);
  JSON_PUT(&b, ",\"random\":{}}}");
  if (json_put_end(&b)) return VD_ENOMEM;
  *out = b.data;
  *len = b.len;
  return 0;
}

/* ---- the capture: what the deciding thread hands the writer ----
 * record_payload above is the direct builder. On the deciding thread the
 * engine does less: record_capture copies what the payload needs into a
 * compact binary record (fixed fields raw, strings as a u32 length and the
 * bytes, values tagged), and record_format, on the snapshot writer's thread,
 * turns that into exactly the text record_payload would have written. The
 * capture is read back only by this process (the writer thread), so native
 * byte order and layout are fine; it never reaches the disk.
 *
 * The decision's own strings and the values are copied; rule, let, feature
 * and limit names are pointers into the bundle when the decision borrowed
 * them (the engine keeps the bundle until the writer is past the record),
 * copied otherwise. The head carries the record header's fields too (the id
 * with them): the capture goes into the queue as a raw record, and the
 * writer makes the header from it. The request as received is copied as it
 * came (minified by the writer); a request built in C is written as JSON
 * text here, since its pieces belong to the caller. */

#define CAP_NULL 0xFFFFFFFFu /* the length of a NULL string */
#define CAP_SOURCE_TEXT 0xFF /* d->source is not one of the four names: copied */

enum { CAP_REQ_NONE, CAP_REQ_JSON, CAP_REQ_TEXT };

/* Value tags: the kinds put_value writes inline, lists and string-keyed maps
 * of them (a count, then the items), and the rest as JSON text written on
 * the deciding thread by json_write, as put_value would. */
enum {
  CV_NULL,
  CV_FALSE,
  CV_TRUE,
  CV_INT,
  CV_STRING,
  CV_DOUBLE,
  CV_JSON,
  CV_ERROR,
  CV_ABSENT,
  CV_LIST,
  CV_MAP,
};

/* Whether a let's value in the raw array is whole there (nothing of it
 * follows the array): null, a boolean, an integer, a double, an empty list
 * or map. */
#define RAW_WHOLE ((1u << V_NULL) | (1u << V_BOOL) | (1u << V_INT) | (1u << V_DOUBLE))
#define RAW_EMPTY ((1u << V_LIST) | (1u << V_MAP))

static inline int raw_whole(const value *v) {
  uint32_t k = v->kind < 32 ? 1u << v->kind : 0;
  return (k & RAW_WHOLE) || ((k & RAW_EMPTY) && !v->n);
}

/* The trace's result byte: the rule_result, and whether an error follows. */
#define CAP_RULE_ERROR 0x80

typedef struct cap_head {
  uint8_t id[16]; /* the record's id: the writer makes the record header from the head */
  int64_t clock_ns;
  uint64_t ns_parse, ns_decide, ns_render, latency_ns, cost, ns_model;
  uint64_t lim_cost, lim_regex, lim_memory, lim_max_request;
  double confidence, model_score, model_confidence;
  double floor; /* the request's confidence_floor, or -1 */
  int32_t model_class;
  uint32_t model_timeout_ms, rules_total, rules_indexed;
  uint32_t ntrace, nlets, nfeatures, ncandidates, ncounters;
  uint8_t allowed, review, model_run, request, matched_rule;
  uint8_t borrowed; /* names as pointers into the bundle (cap_name) */
  uint8_t source;   /* snapshot_source of d->source, or CAP_SOURCE_TEXT */
  uint8_t raw_lets; /* the let values as an array of value (capture_into) */
} cap_head;

static inline void cap_u8(json_buf *c, uint8_t v) { json_put_char(c, (char)v); }
static inline void cap_u32(json_buf *c, uint32_t v) { json_put_raw(c, (const char *)&v, 4); }
static inline void cap_u64(json_buf *c, uint64_t v) { json_put_raw(c, (const char *)&v, 8); }

/* n bytes, inline when there are at most 16 (most strings a capture holds
 * are: names, actions, short let values): two overlapping loads and stores
 * within the n bytes, instead of a call. */
HOT void copy_bytes(char *o, const char *s, size_t n) {
  uint64_t a, b;
  uint32_t x, y;
  if (n > 16) {
    memcpy(o, s, n);
  } else if (n >= 8) {
    memcpy(&a, s, 8);
    memcpy(&b, s + n - 8, 8);
    memcpy(o, &a, 8);
    memcpy(o + n - 8, &b, 8);
  } else if (n >= 4) {
    memcpy(&x, s, 4);
    memcpy(&y, s + n - 4, 4);
    memcpy(o, &x, 4);
    memcpy(o + n - 4, &y, 4);
  } else {
    for (size_t i = 0; i < n; i++) o[i] = s[i];
  }
}

static inline void cap_strn(json_buf *c, const char *s, size_t n) {
  if (json_room(c, 4 + n)) return;
  uint32_t l = (uint32_t)n;
  memcpy(c->data + c->len, &l, 4);
  copy_bytes(c->data + c->len + 4, s, n);
  c->len += 4 + n;
}

static inline void cap_str(json_buf *c, const char *s) {
  if (s)
    cap_strn(c, s, strlen(s));
  else
    cap_u32(c, CAP_NULL);
}

/* A rule's error text: off the usual path. */
static __attribute__((noinline)) void cap_error(json_buf *c, const char *s) { cap_str(c, s); }

/* A rule, let, feature or limit name: when the capture borrows (the engine
 * keeps the bundle until the writer has formatted the record), the pointer
 * alone; otherwise the bytes, as cap_str. */
static inline void cap_name(json_buf *c, const char *s, int borrowed) {
  if (borrowed)
    json_put_raw(c, (const char *)&s, sizeof s);
  else
    cap_str(c, s);
}

/* Room for a u32 length now, filled in by cap_end once the text is written. */
static size_t cap_begin(json_buf *c) {
  cap_u32(c, 0);
  return c->len;
}

static void cap_end(json_buf *c, size_t at) {
  if (c->oom || at < 4) return;
  uint32_t l = (uint32_t)(c->len - at);
  memcpy(c->data + at - 4, &l, 4);
}

/* The kinds most lets hold, written with one reservation; 0 when v is not
 * one of them (the caller then uses cap_value). */
HOT int cap_scalar(json_buf *c, const value *v) {
  size_t n = v->kind == V_STRING ? v->n : 0;
  if (json_room(c, 13 + n)) return 1;
  char *o = c->data + c->len;
  switch (v->kind) {
    case V_BOOL:
      o[0] = v->b ? CV_TRUE : CV_FALSE;
      c->len += 1;
      return 1;
    case V_NULL:
      o[0] = CV_NULL;
      c->len += 1;
      return 1;
    case V_INT:
      o[0] = CV_INT;
      memcpy(o + 1, &v->i, 8);
      c->len += 9;
      return 1;
    case V_STRING: {
      uint32_t l = (uint32_t)n;
      o[0] = CV_STRING;
      memcpy(o + 1, &l, 4);
      copy_bytes(o + 5, v->s, n);
      c->len += 5 + n;
      return 1;
    }
    case V_DOUBLE: /* raw: the formatter writes NaN and infinities per context */
      o[0] = CV_DOUBLE;
      memcpy(o + 1, &v->d, 8);
      c->len += 9;
      return 1;
    case V_LIST: /* empty (many lets are): as cap_tagged writes it */
    case V_MAP:
      if (v->n) return 0;
      o[0] = v->kind == V_LIST ? CV_LIST : CV_MAP;
      memset(o + 1, 0, 4);
      c->len += 5;
      return 1;
    default:
      return 0;
  }
}

/* A list or map as tags, in one pass: 1, or 0 when something in it is not
 * a kind json_write writes the way the tags do (another kind, a map key
 * that is not a string, NaN unless lenient, nesting past 9) — the caller
 * then drops what was written and captures the JSON text instead. */
static int cap_tagged(json_buf *c, const value *v, int lenient, int depth) {
  switch (v->kind) {
    case V_DOUBLE:
      if (!lenient && v->d - v->d != 0) return 0;
      cap_u8(c, CV_DOUBLE);
      json_put_raw(c, (const char *)&v->d, 8);
      return 1;
    case V_LIST:
      if (depth > 8) return 0;
      cap_u8(c, CV_LIST);
      cap_u32(c, v->n);
      for (const value *it = v->items, *end = it + v->n; it < end; it++) {
        if (it->kind != V_DOUBLE && cap_scalar(c, it)) continue; /* the usual item */
        if (!cap_tagged(c, it, lenient, depth + 1)) return 0;
      }
      return 1;
    case V_MAP:
      if (depth > 8) return 0;
      cap_u8(c, CV_MAP);
      cap_u32(c, v->n);
      for (uint32_t i = 0; i < v->n; i++) {
        if (v->entries[i].key.kind != V_STRING) return 0;
        cap_strn(c, v->entries[i].key.s, v->entries[i].key.n);
        if (!cap_tagged(c, &v->entries[i].val, lenient, depth + 1)) return 0;
      }
      return 1;
    default:
      return cap_scalar(c, v);
  }
}

static void cap_value(json_buf *c, const value *v, int lenient) {
  switch (v->kind) {
    case V_STRING:
      cap_u8(c, CV_STRING);
      cap_strn(c, v->s, v->n);
      return;
    case V_BOOL:
      cap_u8(c, v->b ? CV_TRUE : CV_FALSE);
      return;
    case V_NULL:
      cap_u8(c, CV_NULL);
      return;
    case V_INT:
      cap_u8(c, CV_INT);
      cap_u64(c, (uint64_t)v->i);
      return;
    case V_DOUBLE:
      cap_u8(c, CV_DOUBLE);
      json_put_raw(c, (const char *)&v->d, 8);
      return;
    case V_LIST:
    case V_MAP: {
      size_t at = c->len;
      if (cap_tagged(c, v, lenient, 0)) return;
      c->len = at;
    }
      /* fall through */
    default: {
      cap_u8(c, CV_JSON);
      size_t at = cap_begin(c);
      if (json_write(c, v, lenient) != 0) JSON_PUT(c, "null");
      cap_end(c, at);
    }
  }
}

/* The snapshot source of d->source ("rule", "model", "default", "error"),
 * byte by byte (a mismatch stops before the string's NUL is passed). */
static uint8_t source_code(const char *s) {
  switch (s ? s[0] : 0) { /* the first letter tells them apart */
    case 'r':
      if (s[1] == 'u' && s[2] == 'l' && s[3] == 'e' && !s[4]) return SNAPSHOT_SRC_RULE;
      break;
    case 'm':
      if (s[1] == 'o' && s[2] == 'd' && s[3] == 'e' && s[4] == 'l' && !s[5])
        return SNAPSHOT_SRC_MODEL;
      break;
    case 'd':
      if (!strcmp(s + 1, "efault")) return SNAPSHOT_SRC_DEFAULT;
      break;
  }
  return SNAPSHOT_SRC_ERROR;
}

/* Room enough for the usual capture of d (a larger one still works: the
 * capture grows, or moves out of the queue's slot into d's arena). */
static size_t capture_guess(const vd_decision *d, const record_input *in) {
  return 512 + in->json_len + (size_t)d->ntrace * 40 + (size_t)d->nlets * 40 +
         (size_t)d->nfeatures * 24 + (size_t)in->req->candidates.n * 16 +
         (size_t)d->nlimit_reads * 64;
}

/* The capture, appended to c: c may be a slot in the log's queue, with d's
 * arena behind it: what does not fit moves the whole capture there (c.data
 * then changes). 0, or VD_ENOMEM. */
static int capture_into(vd_decision *d, const record_input *in, json_buf *cb, uint8_t source,
                        size_t action_n) {
  const decide_request *req = in->req;
  json_buf c = *cb;
  int model = d->model_run == MODEL_SCORED || d->model_run == MODEL_DEADLINE;
  uint32_t ncounters = 0;
  for (uint32_t i = 0; i < d->nlimit_reads && d->limits_of; i++)
    ncounters += d->limit_reads[i].state == LIMIT_READ;
  cap_head h;
  memset(&h, 0, sizeof h); /* the padding too: the capture is copied whole */
  memcpy(h.id, in->id, sizeof h.id);
  h.clock_ns = d->clock_ns;
  h.ns_parse = d->ns_parse;
  h.ns_decide = d->ns_decide;
  h.ns_render = d->ns_render;
  h.latency_ns = d->latency_ns;
  h.cost = d->cost;
  h.ns_model = d->ns_model;
  h.lim_cost = in->lim->cost_limit;
  h.lim_regex = in->lim->regex_match_limit;
  h.lim_memory = in->lim->memory_limit;
  h.lim_max_request = in->lim->max_request_bytes;
  h.confidence = d->confidence;
  h.floor = d->floor;
  h.model_score = d->model_score;
  h.model_confidence = d->model_confidence;
  h.model_class = d->model_class;
  h.model_timeout_ms = d->model_timeout_ms;
  h.rules_total = d->rules_total;
  h.rules_indexed = d->rules_indexed;
  h.ntrace = d->ntrace;
  h.nlets = d->nlets;
  h.nfeatures = model ? d->nfeatures : 0;
  h.ncandidates = req->candidates.n;
  h.ncounters = ncounters;
  h.allowed = d->allowed;
  h.review = d->review;
  h.model_run = d->model_run;
  h.request = in->json ? CAP_REQ_JSON : in->creq ? CAP_REQ_TEXT : CAP_REQ_NONE;
  h.source = source; /* source_code(d->source): one of the four names, or the text */
  if (h.source == SNAPSHOT_SRC_ERROR && (!d->source || strcmp(d->source, "error") != 0))
    h.source = CAP_SOURCE_TEXT;
  h.matched_rule = h.source == SNAPSHOT_SRC_RULE;
  int borrowed = d->trace_borrow;
  h.borrowed = (uint8_t)borrowed;
  h.raw_lets = borrowed && d->let_values;
  /* in the payload's order, except that the outcome's strings come before
   * the model, the trace needing two of them */
  json_put_raw(&c, (const char *)&h, sizeof h);
  cap_strn(&c, req->action.s, req->action.n);
  if (in->json) {
    cap_strn(&c, in->json, in->json_len);
  } else if (in->creq) {
    size_t at = cap_begin(&c);
    put_c_request(&c, in->creq);
    cap_end(&c, at);
  }
  for (uint32_t i = 0; i < req->candidates.n; i++)
    if (!cap_scalar(&c, &req->candidates.items[i])) cap_value(&c, &req->candidates.items[i], 0);
  cap_strn(&c, req->key.s, req->key.n);
  cap_str(&c, d->strategy);
  json_put_raw(&c, d->policy_version, 64); /* 64 hex digits, or fewer and a NUL */
  json_put_raw(&c, d->bundle_version, 64);
  if (d->action) /* action_n: strlen(d->action), which the caller has measured */
    cap_strn(&c, d->action, action_n);
  else
    cap_u32(&c, CAP_NULL);
  if (h.source == CAP_SOURCE_TEXT) cap_str(&c, d->source);
  cap_str(&c, d->rule);
  cap_str(&c, d->reason);
  cap_str(&c, d->no_candidate);
  cap_str(&c, d->floor_from);
  if (model) {
    cap_str(&c, d->model_version);
    cap_str(&c, d->features_version);
    cap_str(&c, d->model_name);
    cap_str(&c, d->feature_error);
    if (borrowed) { /* the three arrays as they are */
      json_put_raw(&c, (const char *)d->feature_names, d->nfeatures * sizeof *d->feature_names);
      json_put_raw(&c, (const char *)d->features, d->nfeatures * sizeof *d->features);
      json_put_raw(&c, (const char *)d->feature_status, d->nfeatures);
    }
    for (uint32_t i = 0; i < d->nfeatures && !borrowed; i++) {
      cap_str(&c, d->feature_names[i]);
      json_put_raw(&c, (const char *)&d->features[i], 4);
      cap_u8(&c, d->feature_status[i]);
    }
  }
  if (borrowed) { /* the array as it is, then the (rare) error's text */
    json_put_raw(&c, (const char *)d->trace, d->ntrace * sizeof *d->trace);
    /* Only the last rule tried can have failed: a failing rule ends the
     * rules (decide.c). Were that to change, the formatter, which reads a
     * text for every entry with an error, would run short and refuse the
     * record (counted in `rejected`) rather than write a wrong one. */
    if (d->ntrace && d->trace[d->ntrace - 1].error) cap_error(&c, d->trace[d->ntrace - 1].error);
  }
  for (uint32_t i = 0; i < d->ntrace && !borrowed; i++) { /* the usual rule: one write */
    const trace_rule *t = &d->trace[i];
    size_t n = t->name ? strlen(t->name) : 0;
    if (json_room(&c, n + 5)) break;
    char *o = c.data + c.len;
    uint32_t l = t->name ? (uint32_t)n : CAP_NULL;
    memcpy(o, &l, 4);
    if (n) memcpy(o + 4, t->name, n);
    o[4 + n] = (char)(t->result | (t->error ? CAP_RULE_ERROR : 0));
    c.len += 5 + n;
    if (t->error) cap_str(&c, t->error);
  }
  if (borrowed) json_put_raw(&c, (const char *)d->lets, d->nlets * sizeof *d->lets);
  const value *lv = d->let_values;
  if (borrowed && lv) { /* the usual case: the names are already in */
    /* the values as they are (one copy), then what they point at: a
     * string's or an error's bytes, a list or map or another kind as
     * cap_value writes it; null, booleans, integers and doubles are whole
     * in the array (fmt_lets_raw reads it back) */
    json_put_raw(&c, (const char *)lv, d->nlets * sizeof *lv);
    for (const value *v = lv, *end = lv + d->nlets; v < end; v++) {
      if (raw_whole(v)) continue;
      if (v->kind == V_STRING || v->kind == V_ERROR)
        cap_strn(&c, v->s, v->n);
      else
        cap_value(&c, v, 1);
    }
  }
  for (uint32_t i = 0; i < d->nlets && !(borrowed && lv); i++) {
    if (!borrowed) cap_str(&c, d->lets[i]);
    const value *v = lv ? &lv[i] : NULL;
    if (lv && cap_scalar(&c, v)) continue;
    if (!v) {
      cap_u8(&c, CV_ABSENT);
    } else if (v->kind == V_ERROR) {
      cap_u8(&c, CV_ERROR);
      cap_strn(&c, v->s, v->n);
    } else {
      cap_value(&c, v, 1);
    }
  }
  for (uint32_t i = 0; i < d->nlimit_reads && d->limits_of; i++) {
    const limit_read *lr = &d->limit_reads[i];
    if (lr->state != LIMIT_READ) continue;
    cap_name(&c, d->limits_of->limits[i].name, borrowed);
    cap_strn(&c, lr->key, lr->key_len);
    cap_u64(&c, lr->r.count);
    cap_u8(&c, lr->r.penalized);
    cap_u8(&c, lr->r.charged);
    cap_u8(&c, lr->r.degraded);
  }
  *cb = c;
  return c.oom ? VD_ENOMEM : 0;
}

int record_capture(vd_decision *d, const record_input *in, const char **out, size_t *len) {
  json_buf c;
  json_buf_init(&c, &d->mem);
  json_room(&c, capture_guess(d, in));
  size_t action_n = d->action ? strlen(d->action) : 0;
  if (capture_into(d, in, &c, source_code(d->source), action_n) != 0) return VD_ENOMEM;
  *out = c.data;
  *len = c.len;
  return 0;
}

/* Reading a capture back: every read checks the bounds (a capture that
 * runs short sets bad, and the record is not written). */
typedef struct cap_cur {
  const char *p, *end;
  int bad;
} cap_cur;

static int cur_take(cap_cur *c, void *to, size_t n) {
  if ((size_t)(c->end - c->p) < n) {
    c->bad = 1;
    memset(to, 0, n);
    return -1;
  }
  memcpy(to, c->p, n);
  c->p += n;
  return 0;
}

static uint8_t get_u8(cap_cur *c) {
  uint8_t v;
  cur_take(c, &v, 1);
  return v;
}

static uint64_t get_u64(cap_cur *c) {
  uint64_t v;
  cur_take(c, &v, 8);
  return v;
}

/* A string: NULL for a NULL one (and when the capture runs short). */
static const char *get_str(cap_cur *c, size_t *n) {
  uint32_t l;
  *n = 0;
  if (cur_take(c, &l, 4) || l == CAP_NULL) return NULL;
  if ((size_t)(c->end - c->p) < l) {
    c->bad = 1;
    return NULL;
  }
  const char *s = c->p;
  c->p += l;
  *n = l;
  return s;
}

/* A name as cap_name wrote it. */
static const char *get_name(cap_cur *c, int borrowed, size_t *n) {
  if (!borrowed) return get_str(c, n);
  const char *s;
  cur_take(c, &s, sizeof s);
  *n = s ? strlen(s) : 0;
  return s;
}

static void name_cache_clear(name_cache *nc) {
  if (nc->used) memset(nc->tab, 0, nc->cap * sizeof *nc->tab);
  nc->used = 0;
  nc->text_len = 0;
}

static inline uint32_t cache_slot(const name_cache *nc, const char *s) {
  return (uint32_t)(((uintptr_t)s * 0x9E3779B97F4A7C15ull) >> 32) & (nc->cap - 1);
}

/* Room for one more name: the table at most half full (a bundle has a
 * few thousand names at most; past 64k the cache starts over). 0, or -1. */
static int name_cache_room(name_cache *nc, size_t text) {
  if (nc->used >= 65536) name_cache_clear(nc);
  if (nc->text_len + text > nc->text_cap) {
    size_t cap = nc->text_cap ? nc->text_cap * 2 : 16384;
    while (cap < nc->text_len + text) cap *= 2;
    char *t = realloc(nc->text, cap);
    if (!t) return -1;
    nc->text = t;
    nc->text_cap = cap;
  }
  if ((nc->used + 1) * 2 <= nc->cap) return 0;
  uint32_t cap = nc->cap ? nc->cap * 2 : 1024;
  name_entry *old = nc->tab, *tab = calloc(cap, sizeof *tab);
  if (!tab) return -1;
  uint32_t ocap = nc->cap;
  nc->tab = tab;
  nc->cap = cap;
  for (uint32_t i = 0; i < ocap; i++) {
    if (!old[i].name) continue;
    uint32_t k = cache_slot(nc, old[i].name);
    while (tab[k].name) k = (k + 1) & (cap - 1);
    tab[k] = old[i];
  }
  free(old);
  return 0;
}

/* A name in a bundle (not NULL), as put_strn writes it: from the cache, or
 * written and then kept (nc NULL: written). */
static void put_name(json_buf *b, name_cache *nc, const char *s) {
  if (nc && nc->cap) {
    for (uint32_t k = cache_slot(nc, s); nc->tab[k].name; k = (k + 1) & (nc->cap - 1))
      if (nc->tab[k].name == s) {
        if (json_room(b, nc->tab[k].len)) return;
        copy_bytes(b->data + b->len, nc->text + nc->tab[k].off, nc->tab[k].len);
        b->len += nc->tab[k].len;
        return;
      }
  }
  size_t at = b->len;
  json_put_strn(b, s, strlen(s));
  if (!nc || b->oom || name_cache_room(nc, b->len - at) != 0) return;
  uint32_t k = cache_slot(nc, s);
  while (nc->tab[k].name) k = (k + 1) & (nc->cap - 1);
  nc->tab[k].name = s;
  nc->tab[k].off = (uint32_t)nc->text_len;
  nc->tab[k].len = (uint32_t)(b->len - at);
  memcpy(nc->text + nc->text_len, b->data + at, b->len - at);
  nc->text_len += b->len - at;
  nc->used++;
}

/* A name as put_str writes it (NULL: null). */
static void fmt_name(json_buf *b, cap_cur *c, int borrowed) {
  size_t n;
  const char *s = get_name(c, borrowed, &n);
  json_put_strn_or_null(b, s, n);
}

/* Let i's name: from the names' array when the capture borrows (checked
 * by the caller), else the next string. */
static const char *let_name(cap_cur *c, int borrowed, const char *names, uint32_t i, size_t *n) {
  if (!borrowed) return get_str(c, n);
  const char *s;
  memcpy(&s, names + (size_t)i * sizeof s, sizeof s);
  *n = s ? strlen(s) : 0;
  return s;
}

/* A string as put_str writes it (NULL: null). */
static void fmt_str(json_buf *b, cap_cur *c) {
  size_t n;
  const char *s = get_str(c, &n);
  json_put_strn_or_null(b, s, n);
}

/* A version, written between quotes as it is: 64 bytes, 64 hex digits or
 * fewer and a NUL. */
static void fmt_version(json_buf *b, cap_cur *c) {
  if ((size_t)(c->end - c->p) < 64) {
    c->bad = 1;
    return;
  }
  json_put_raw(b, c->p, strnlen(c->p, 64));
  c->p += 64;
}

static void fmt_value(json_buf *b, cap_cur *c, int lenient) {
  size_t n;
  const char *s;
  uint32_t k;
  switch (get_u8(c)) {
    case CV_LIST:
      cur_take(c, &k, 4);
      json_put_char(b, '[');
      for (uint32_t i = 0; i < k && !c->bad; i++) {
        if (i) json_put_char(b, ',');
        fmt_value(b, c, lenient);
      }
      json_put_char(b, ']');
      return;
    case CV_MAP:
      cur_take(c, &k, 4);
      json_put_char(b, '{');
      for (uint32_t i = 0; i < k && !c->bad; i++) {
        if (i) json_put_char(b, ',');
        s = get_str(c, &n);
        json_put_strn(b, s ? s : "", n);
        json_put_char(b, ':');
        fmt_value(b, c, lenient);
      }
      json_put_char(b, '}');
      return;
    case CV_NULL:
    case CV_ABSENT:
      JSON_PUT(b, "null");
      return;
    case CV_FALSE:
      JSON_PUT(b, "false");
      return;
    case CV_TRUE:
      JSON_PUT(b, "true");
      return;
    case CV_INT:
      json_put_i64(b, (int64_t)get_u64(c));
      return;
    case CV_STRING:
      s = get_str(c, &n);
      json_put_strn(b, s ? s : "", n);
      return;
    case CV_DOUBLE: {
      double x;
      cur_take(c, &x, 8);
      value v = value_double(x);
      if (json_write(b, &v, lenient) != 0) JSON_PUT(b, "null");
      return;
    }
    case CV_JSON:
      s = get_str(c, &n);
      if (s) json_put_raw(b, s, n);
      return;
    default: /* CV_ERROR is not a value; anything else is damage */
      c->bad = 1;
  }
}

/* Steps over a value without writing it. */
static void skip_value(cap_cur *c) {
  size_t n;
  switch (get_u8(c)) {
    case CV_INT:
    case CV_DOUBLE:
      get_u64(c);
      return;
    case CV_STRING:
    case CV_JSON:
    case CV_ERROR:
      get_str(c, &n);
      return;
    case CV_LIST:
    case CV_MAP: {
      uint32_t k;
      int map = c->p[-1] == CV_MAP;
      cur_take(c, &k, 4);
      for (uint32_t i = 0; i < k && !c->bad; i++) {
        if (map) get_str(c, &n);
        skip_value(c);
      }
      return;
    }
    case CV_NULL:
    case CV_ABSENT:
    case CV_FALSE:
    case CV_TRUE:
      return;
    default:
      c->bad = 1;
  }
}

/* "lets" and "let_errors" from a capture that borrows names and holds the
 * values as an array (cap_head.raw_lets): the names' array, the values'
 * array, then what the values point at, in their order. */
static void fmt_lets_raw(json_buf *b, cap_cur *c, uint32_t nlets, name_cache *nc) {
  const char *names = c->p, *vals = c->p + (size_t)nlets * sizeof(char *);
  if ((size_t)(c->end - c->p) / (sizeof(char *) + sizeof(value)) < nlets) {
    c->bad = 1;
    return;
  }
  c->p = vals + (size_t)nlets * sizeof(value);
  const char *rest = c->p;
  JSON_PUT(b, ",\"lets\":{");
  int first = 1, errors = 0;
  size_t n;
  const char *s;
  for (uint32_t i = 0; i < nlets && !c->bad; i++) {
    value v;
    const char *name;
    memcpy(&v, vals + (size_t)i * sizeof v, sizeof v);
    memcpy(&name, names + (size_t)i * sizeof name, sizeof name);
    if (v.kind >= V_KIND_COUNT) { /* damage */
      c->bad = 1;
      return;
    }
    if (v.kind == V_ERROR) {
      get_str(c, &n);
      errors++;
      continue;
    }
    if (!first) json_put_char(b, ',');
    first = 0;
    if (name)
      put_name(b, nc, name);
    else
      JSON_PUT(b, "null");
    json_put_char(b, ':');
    switch (v.kind) {
      case V_NULL:
        JSON_PUT(b, "null");
        break;
      case V_BOOL:
        json_put_bool(b, v.b);
        break;
      case V_INT:
        json_put_i64(b, v.i);
        break;
      case V_DOUBLE: {
        value d = value_double(v.d);
        if (json_write(b, &d, 1) != 0) JSON_PUT(b, "null");
        break;
      }
      case V_STRING:
        s = get_str(c, &n);
        json_put_strn(b, s ? s : "", n);
        break;
      case V_LIST:
      case V_MAP:
        if (!v.n) {
          if (v.kind == V_LIST)
            JSON_PUT(b, "[]");
          else
            JSON_PUT(b, "{}");
          break;
        }
        /* fall through */
      default:
        fmt_value(b, c, 1);
    }
  }
  JSON_PUT(b, "},\"let_errors\":{");
  cap_cur r = {rest, c->end, 0};
  first = 1;
  for (uint32_t i = 0; i < nlets && errors && !r.bad; i++) {
    value v;
    memcpy(&v, vals + (size_t)i * sizeof v, sizeof v);
    if (raw_whole(&v)) continue;
    if (v.kind == V_STRING) {
      get_str(&r, &n);
    } else if (v.kind == V_ERROR) {
      const char *name;
      memcpy(&name, names + (size_t)i * sizeof name, sizeof name);
      s = get_str(&r, &n);
      if (!first) json_put_char(b, ',');
      first = 0;
      if (name)
        json_put_strn(b, name, strlen(name));
      else
        JSON_PUT(b, "null");
      json_put_char(b, ':');
      json_put_strn(b, s ? s : "", n);
    } else {
      skip_value(&r);
    }
  }
  json_put_char(b, '}');
}

int record_format(const char *capture, size_t clen, const char *id, const char *node,
                  json_buf *out) {
  return format_capture(capture, clen, id, node, out, NULL, NULL);
}

/* record_format, and with hdr the record header's fields from the capture
 * (its strings point into the capture); id NULL: the id text from the
 * capture's head. */
static int format_capture(const char *capture, size_t clen, const char *id, const char *node,
                          json_buf *out, snapshot_rec *hdr, name_cache *nc) {
  cap_cur c = {capture, capture + clen, 0};
  cap_head h;
  if (cur_take(&c, &h, sizeof h)) return VD_EINVAL;
  char idtext[SNAPSHOT_ID_TEXT];
  if (!id) id = snapshot_id_format(h.id, idtext);
  json_buf *b = out;
  size_t n;
  const char *s;
  json_room(b,
            1024 + clen + (size_t)h.ntrace * 24 + (size_t)h.nlets * 24 + (size_t)h.nfeatures * 16);
  JSON_PUT(b, "{\"format\":1,\"id\":");
  json_put_str(b, id);
  JSON_PUT(b, ",\"time\":");
  put_time_memo(b, h.clock_ns, nc ? &nc->time : NULL);
  JSON_PUT(b, ",\"time_ns\":");
  json_put_i64(b, h.clock_ns);
  JSON_PUT(b, ",\"node\":");
  json_put_str(b, node);
  JSON_PUT(b, ",\"engine_version\":");
  json_put_str(b, vd_version());
  JSON_PUT(b, ",\"point\":");
  s = get_str(&c, &n);
  json_put_strn(b, s ? s : "", n);
  if (hdr) {
    memcpy(hdr->id, h.id, 16);
    hdr->time_ns = h.clock_ns;
    hdr->allowed = h.allowed;
    hdr->review = h.review;
    hdr->source = h.source == CAP_SOURCE_TEXT ? SNAPSHOT_SRC_ERROR : h.source;
    hdr->confidence = (float)h.confidence;
    hdr->point = s ? s : "";
    hdr->point_len = n;
  }
  const char *request = NULL;
  size_t request_len = 0;
  if (h.request != CAP_REQ_NONE) request = get_str(&c, &request_len);
  JSON_PUT(b, ",\"request\":");
  if (h.request == CAP_REQ_JSON && request)
    put_minified(b, request, request_len);
  else if (h.request == CAP_REQ_TEXT && request)
    json_put_raw(b, request, request_len);
  else
    JSON_PUT(b, "null");
  JSON_PUT(b, ",\"candidates\":[");
  for (uint32_t i = 0; i < h.ncandidates && !c.bad; i++) {
    if (i) json_put_char(b, ',');
    fmt_value(b, &c, 0);
  }
  JSON_PUT(b, "],\"key\":");
  s = get_str(&c, &n);
  json_put_strn(b, s ? s : "", n);
  JSON_PUT(b, ",\"strategy\":");
  fmt_str(b, &c);
  JSON_PUT(b, ",\"policy_version\":\"");
  if (hdr && (size_t)(c.end - c.p) >= 64) {
    hdr->policy_version = c.p;
    hdr->policy_version_len = strnlen(c.p, 64);
  }
  fmt_version(b, &c);
  JSON_PUT(b, "\",\"bundle_version\":\"");
  fmt_version(b, &c);
  json_put_char(b, '"');
  size_t action_n, source_n, rule_n, reason_n;
  const char *action = get_str(&c, &action_n), *source;
  if (hdr) {
    hdr->action = action ? action : "";
    hdr->action_len = action_n;
  }
  if (h.source == CAP_SOURCE_TEXT) {
    source = get_str(&c, &source_n);
  } else {
    source = snapshot_source_name(h.source);
    source_n = source ? strlen(source) : 0;
  }
  const char *rule = get_str(&c, &rule_n), *reason = get_str(&c, &reason_n);
  size_t nc_n, ff_n;
  const char *no_candidate = get_str(&c, &nc_n);
  const char *floor_from = get_str(&c, &ff_n);
  if (h.model_run == MODEL_SCORED || h.model_run == MODEL_DEADLINE) {
    static const char *const status[] = {"value", "missing", "default", "unknown"};
    size_t mv_n, fv_n;
    const char *mv = get_str(&c, &mv_n), *fv = get_str(&c, &fv_n);
    JSON_PUT(b, ",\"model_version\":\"");
    json_put_raw(b, mv ? mv : "", mv_n);
    JSON_PUT(b, "\",\"features\":{");
    size_t name_n, ferr_n;
    const char *name = get_str(&c, &name_n), *ferr = get_str(&c, &ferr_n);
    /* the rows, written twice (values, then statuses): by pointer, three
     * arrays (names, values, statuses); copied, one row after another */
    const char *feat = c.p;
    size_t nf = h.nfeatures;
    if (h.borrowed && (size_t)(c.end - c.p) / 13 < nf) c.bad = 1;
    for (uint32_t i = 0; i < h.nfeatures && !c.bad; i++) {
      if (i) json_put_char(b, ',');
      float f;
      if (h.borrowed) {
        const char *fname;
        memcpy(&fname, feat + 8 * i, 8);
        if (fname)
          put_name(b, nc, fname);
        else
          JSON_PUT(b, "null");
        memcpy(&f, feat + 8 * nf + 4 * i, 4);
      } else {
        fmt_str(b, &c);
        cur_take(&c, &f, 4);
        get_u8(&c);
      }
      json_put_char(b, ':');
      put_float(b, f);
    }
    if (h.borrowed && !c.bad) c.p += 13 * nf;
    JSON_PUT(b, "},\"model\":{\"name\":");
    if (name)
      json_put_strn(b, name, name_n);
    else
      JSON_PUT(b, "null");
    JSON_PUT(b, ",\"version\":\"");
    json_put_raw(b, mv ? mv : "", mv_n);
    JSON_PUT(b, "\",\"features_version\":\"");
    json_put_raw(b, fv ? fv : "", fv_n);
    JSON_PUT(b, "\",\"timeout_ms\":");
    json_put_u64(b, h.model_timeout_ms);
    JSON_PUT(b, ",\"deadline_missed\":");
    json_put_bool(b, h.model_run == MODEL_DEADLINE);
    JSON_PUT(b, ",\"feature_status\":{");
    cap_cur r = {feat, c.end, 0};
    uint32_t k = 0;
    for (uint32_t i = 0; i < h.nfeatures && !r.bad && !c.bad; i++) {
      const char *fname;
      size_t fname_n;
      uint8_t st;
      if (h.borrowed) {
        memcpy(&fname, feat + 8 * i, 8);
        fname_n = fname ? strlen(fname) : 0;
        st = (uint8_t)feat[12 * nf + i];
      } else {
        fname = get_str(&r, &fname_n);
        float f;
        cur_take(&r, &f, 4);
        st = get_u8(&r);
      }
      if (!st || st > 3) continue;
      if (k++) json_put_char(b, ',');
      if (fname)
        json_put_strn(b, fname, fname_n);
      else
        JSON_PUT(b, "null");
      json_put_char(b, ':');
      json_put_str(b, status[st]);
    }
    JSON_PUT(b, "},\"feature_error\":");
    if (ferr)
      json_put_strn(b, ferr, ferr_n);
    else
      JSON_PUT(b, "null");
    if (h.model_run == MODEL_SCORED && h.model_class >= 0) {
      JSON_PUT(b, ",\"class\":");
      json_put_i64(b, h.model_class);
    }
    JSON_PUT(b, ",\"ns\":");
    json_put_u64(b, h.ns_model);
    json_put_char(b, '}');
  } else {
    JSON_PUT(b, ",\"model_version\":null,\"features\":null,\"model\":null");
  }
  JSON_PUT(b, ",\"trace\":{\"rules\":[");
  const char *trace = c.p; /* by pointer: the array, then the errors' text */
  if (h.borrowed) {
    if ((size_t)(c.end - c.p) / sizeof(trace_rule) < h.ntrace)
      c.bad = 1;
    else
      c.p += h.ntrace * sizeof(trace_rule);
  }
  for (uint32_t i = 0; i < h.ntrace && !c.bad; i++) {
    if (i) json_put_char(b, ',');
    JSON_PUT(b, "{\"rule\":");
    uint8_t r;
    if (h.borrowed) {
      trace_rule t;
      memcpy(&t, trace + i * sizeof t, sizeof t);
      if (t.name)
        put_name(b, nc, t.name);
      else
        JSON_PUT(b, "null");
      r = (uint8_t)(t.result | (t.error ? CAP_RULE_ERROR : 0));
    } else {
      fmt_str(b, &c);
      r = get_u8(&c);
    }
    put_result(b, r & ~CAP_RULE_ERROR);
    if (r & CAP_RULE_ERROR) {
      s = get_str(&c, &n);
      JSON_PUT(b, ",\"error\":");
      json_put_strn(b, s ? s : "", n);
    }
    json_put_char(b, '}');
  }
  JSON_PUT(b, "],\"matched\":");
  if (h.matched_rule && rule)
    json_put_strn(b, rule, rule_n);
  else
    JSON_PUT(b, "null");
  JSON_PUT(b, ",\"rules_total\":");
  json_put_u64(b, h.rules_total);
  JSON_PUT(b, ",\"rules_considered\":");
  json_put_u64(b, h.rules_indexed);
  JSON_PUT(b, ",\"no_candidate\":");
  json_put_strn_or_null(b, no_candidate, nc_n);
  put_floor(b, h.floor, floor_from, ff_n);
  JSON_PUT(b, ",\"cost\":");
  json_put_u64(b, h.cost);
  json_put_char(b, '}');
  /* lets, then (a second pass over the same captures) let_errors */
  if (h.raw_lets) {
    fmt_lets_raw(b, &c, h.nlets, nc);
    goto after_lets;
  }
  JSON_PUT(b, ",\"lets\":{");
  const char *let_names = c.p; /* by pointer: the names' array, then the values */
  if (h.borrowed) {
    if ((size_t)(c.end - c.p) / sizeof(char *) < h.nlets)
      c.bad = 1;
    else
      c.p += h.nlets * sizeof(char *);
  }
  const char *lets = c.p;
  int first = 1, errors = 0;
  for (uint32_t i = 0; i < h.nlets && !c.bad; i++) {
    const char *name;
    size_t name_n = 0;
    if (h.borrowed) /* the name's length only when it is written */
      memcpy(&name, let_names + (size_t)i * sizeof name, sizeof name);
    else
      name = let_name(&c, 0, let_names, i, &name_n);
    if (c.p < c.end && (uint8_t)*c.p == CV_ERROR) {
      c.p++;
      get_str(&c, &n);
      errors++;
      continue;
    }
    if (!first) json_put_char(b, ',');
    first = 0;
    if (name && h.borrowed)
      put_name(b, nc, name);
    else if (name)
      json_put_strn(b, name, name_n);
    else
      JSON_PUT(b, "null");
    json_put_char(b, ':');
    fmt_value(b, &c, 1);
  }
  JSON_PUT(b, "},\"let_errors\":{");
  cap_cur r = {lets, c.end, 0};
  first = 1;
  for (uint32_t i = 0; i < h.nlets && errors && !r.bad; i++) {
    const char *name = let_name(&r, h.borrowed, let_names, i, &n);
    size_t name_n = n;
    if (r.p < r.end && (uint8_t)*r.p == CV_ERROR) {
      r.p++;
      s = get_str(&r, &n);
      if (!first) json_put_char(b, ',');
      first = 0;
      if (name)
        json_put_strn(b, name, name_n);
      else
        JSON_PUT(b, "null");
      json_put_char(b, ':');
      json_put_strn(b, s ? s : "", n);
    } else {
      skip_value(&r);
    }
  }
  json_put_char(b, '}');
after_lets:
  if (h.model_run == MODEL_SCORED) {
    JSON_PUT(b, ",\"model_score\":");
    json_write_double(b, h.model_score);
    JSON_PUT(b, ",\"model_confidence\":");
    if (h.model_confidence == h.model_confidence)
      json_write_double(b, h.model_confidence);
    else
      JSON_PUT(b, "null");
  } else {
    JSON_PUT(b, ",\"model_score\":null,\"model_confidence\":null");
  }
  JSON_PUT(b, ",\"action\":");
  json_put_strn_or_null(b, action, action_n);
  JSON_PUT(b, ",\"allowed\":");
  json_put_bool(b, h.allowed);
  JSON_PUT(b, ",\"review\":");
  json_put_bool(b, h.review);
  JSON_PUT(b, ",\"confidence\":");
  put_confidence(b, h.confidence);
  JSON_PUT(b, ",\"source\":");
  json_put_strn_or_null(b, source, source_n);
  JSON_PUT(b, ",\"reason\":{\"rule\":");
  json_put_strn_or_null(b, rule, rule_n);
  JSON_PUT(b, ",\"message\":");
  json_put_strn_or_null(b, reason, reason_n);
  JSON_PUT(b, "},\"latency_ns\":{\"parse\":");
  json_put_u64(b, h.ns_parse);
  JSON_PUT(b, ",\"decide\":");
  json_put_u64(b, h.ns_decide);
  JSON_PUT(b, ",\"render\":");
  json_put_u64(b, h.ns_render);
  JSON_PUT(b, ",\"total\":");
  json_put_u64(b, h.latency_ns);
  JSON_PUT(b, "},\"limits\":{\"cost\":");
  json_put_u64(b, h.lim_cost);
  JSON_PUT(b, ",\"regex_match\":");
  json_put_u64(b, h.lim_regex);
  JSON_PUT(b, ",\"memory\":");
  json_put_u64(b, h.lim_memory);
  JSON_PUT(b, ",\"max_request_bytes\":");
  json_put_u64(b, h.lim_max_request);
  JSON_PUT(b, "},\"inputs\":{\"clock_ns\":");
  json_put_i64(b, h.clock_ns);
  JSON_PUT(b, ",\"model_deadline_missed\":");
  if (h.model_run == MODEL_SCORED || h.model_run == MODEL_DEADLINE)
    json_put_bool(b, h.model_run == MODEL_DEADLINE);
  else
    JSON_PUT(b, "null");
  JSON_PUT(b, ",\"counters\":{");
  for (uint32_t i = 0; i < h.ncounters && !c.bad; i++) {
    if (i) json_put_char(b, ',');
    fmt_name(b, &c, h.borrowed);
    JSON_PUT(b, ":{\"key\":");
    s = get_str(&c, &n);
    json_put_strn(b, s ? s : "", n);
    JSON_PUT(b, ",\"count\":");
    json_put_u64(b, get_u64(&c));
    JSON_PUT(b, ",\"penalized\":");
    json_put_bool(b, get_u8(&c));
    JSON_PUT(b, ",\"charged\":");
    json_put_bool(b, get_u8(&c));
    if (get_u8(&c)) JSON_PUT(b, ",\"degraded\":true");
    json_put_char(b, '}');
  }
  JSON_PUT(b, "},\"random\":{}}}");
  if (c.bad || c.p != c.end) return VD_EINVAL;
  if (json_put_end(b)) return VD_ENOMEM;
  return 0;
}

void record_build(recorder *r, vd_decision *d, record_input *in) {
  snapshot_id_new_at(&r->gen, (uint64_t)(d->clock_ns / 1000000), in->id);
  snapshot_id_format(in->id, d->snapshot_id_buf);
  d->snapshot_id = d->snapshot_id_buf;

  /* The render stage, timed on this decision's own answer (kept: rendering
   * it again for the caller would only cost the same again). */
  uint64_t t0 = engine_now_ns();
  const char *ans;
  size_t alen;
  if (decision_render(d, 0, &ans, &alen) == 0) {
    d->answer = ans;
    d->answer_len = alen;
  }
  d->ns_render = engine_now_ns() - t0;
  in->payload = NULL; /* the capture is made by record_commit */
}

int record_wait(recorder *r, vd_decision *d, record_input *in) {
  if (!r->always || !d->snapshot_id) return 0;
  int rc = snapshot_log_wait_durable(r->log, in->ticket);
  if (rc == 0) return 0;
  /* Not durable: under ALWAYS that is not an answer (the log counted a
   * refusal; a log closed under it is counted here). */
  if (rc != SNAPSHOT_EREFUSED) atomic_fetch_add_explicit(&r->failed, 1, memory_order_relaxed);
  in->refused = 2;
  d->snapshot_id = NULL;
  d->answer = NULL;
  return VD_ESNAPSHOT;
}

int record_refusal(recorder *r, const record_input *in, vd_error *err) {
  snapshot_log_status st;
  snapshot_log_status_get(r->log, &st);
  const char *why = st.failing && st.last_error[0] ? st.last_error : NULL;
  if (in->refused == 2)
    return engine_error(err, VD_ESNAPSHOT, 0, 0, NULL,
                        "not answered: the decision's snapshot could not be made durable "
                        "(durability always)%s%s",
                        why ? ": " : "", why ? why : "");
  if (why)
    return engine_error(err, VD_ESNAPSHOT, 0, 0, NULL,
                        "not answered: the snapshot queue is full and the disk does not take "
                        "writes (%s); with on_full block a decision is refused rather than "
                        "answered unrecorded",
                        why);
  return engine_error(err, VD_ESNAPSHOT, 0, 0, NULL,
                      "not answered: the snapshot queue stayed full for %u ms (the disk is "
                      "slower than the decisions); with on_full block a decision is refused "
                      "rather than answered unrecorded",
                      r->full_wait_ms);
}

uint64_t recorder_mark(recorder *r) { return snapshot_log_mark(r->log); }
int recorder_past(recorder *r, uint64_t mark) { return snapshot_log_taken(r->log, mark); }

/* The capture goes straight into a slot of the log's queue (no copy), as a
 * raw record: the writer takes the record header's fields (id, time,
 * outcome, point, action, policy version) from the capture when it formats
 * it, so nothing else is encoded here. When the capture outgrows the slot,
 * or the slot cannot be had because the record would be too big for the
 * queue, it is built in d's arena and appended, which copies it (and
 * refuses what is too big, counted). */
int record_commit(recorder *r, vd_decision *d, record_input *in) {
  in->ticket = 0;
  /* What the record header cannot hold (as snapshot_log_append refuses it) */
  size_t action_n = d->action ? strlen(d->action) : 0;
  if (in->req->action.n > SNAPSHOT_MAX_STRING || action_n > SNAPSHOT_MAX_STRING) goto failed;
  uint8_t source = source_code(d->source);
  snapshot_slot slot;
  int rc = snapshot_log_reserve_raw(r->log, capture_guess(d, in), &slot);
  if (rc == 0) {
    json_buf c = {.data = slot.payload, .len = 0, .cap = slot.cap, .arena = &d->mem, .oom = 0};
    int cr = capture_into(d, in, &c, source, action_n);
    if (cr == 0 && c.data == slot.payload) {
      snapshot_log_commit(r->log, &slot, c.len, &in->ticket);
      return 0;
    }
    snapshot_log_cancel(r->log, &slot);
    if (cr != 0) goto failed;
    in->payload = c.data; /* it grew out of the slot: append it from d's arena */
    in->payload_len = c.len;
  } else if (rc == SNAPSHOT_ETOOBIG) {
    if (record_capture(d, in, &in->payload, &in->payload_len) != 0) goto failed;
  } else {
    goto refused;
  }
  rc = snapshot_log_append_raw(r->log, in->payload, in->payload_len, &in->ticket);
refused:
  if (rc == SNAPSHOT_EREFUSED) { /* BLOCK and no room: not an answer (the log counted it) */
    in->refused = 1;
    d->snapshot_id = NULL;
    d->answer = NULL;
    return VD_ESNAPSHOT;
  }
  if (rc == SNAPSHOT_EFULL || rc == SNAPSHOT_ETOOBIG || rc == SNAPSHOT_EINVAL) goto not_recorded;
  if (rc != 0) goto failed;
  return 0;
failed:
  atomic_fetch_add_explicit(&r->failed, 1, memory_order_relaxed);
not_recorded: /* the log counted it (dropped, or rejected) */
  d->snapshot_id = NULL;
  d->answer = NULL;
  return 0;
}
