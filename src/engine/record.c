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
 * a slot of the log's queue as a raw record (record_commit, below; the
 * capture itself is record_capture.c); the log's writer thread turns each
 * capture into the JSON and the record header (the log's format hook,
 * recorder_format, calling record_format.c) before framing it.
 *
 * This file is the recorder's life cycle: opening the log, taking ids,
 * committing captures, waiting for the disk under `always`, refusals and
 * counters. What a snapshot holds is the list in record.h (SNAPSHOT_FIELDS):
 * a new field goes there, not here. tests/engine/test_record_equiv.c holds
 * the payload to an independent oracle built from a value tree, and
 * tests/engine/test_record_reference.c to the bytes it had before.
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

#include "core/json.h"
#include "engine/engine.h"
#include "engine/record.h"
#include "snapshot/snapshot.h"

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

/* The log's format hook (snapshot.h), on the writer thread: the capture the
 * deciding thread appended becomes the format-1 payload. The engine appends
 * raw records (snapshot_log_reserve_raw: rec->point NULL here), whose header
 * fields come from the capture too; a record appended with its header
 * (tests) keeps it. */
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
  if (opts->snapshot_segment_bytes) o.segment_bytes = opts->snapshot_segment_bytes;
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
  name_cache_free(&r->names);
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

void record_id(recorder *r, vd_decision *d, record_input *in) {
  snapshot_id_new_at(&r->gen, (uint64_t)(d->clock_ns / 1000000), in->id);
  snapshot_id_format(in->id, d->snapshot_id_buf);
  d->snapshot_id = d->snapshot_id_buf;
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
