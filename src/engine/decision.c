/* decision.c — the vd_decision object: its lifecycle, its accessors, its
 * clock reading (request.time). Errors are filled by core/error.h.
 *
 * A vd_decision is meant to be reused: each decision resets its arena, which
 * keeps its largest chunk, so that once a decision object has seen the
 * biggest request of a workload it decides without touching malloc. A new
 * decision object starts with one chunk large enough for typical requests. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "engine/engine.h"

/* Sized so that a typical request, its decision and its JSON fit in the
 * first chunk; the arena grows (once) for bigger ones. */
#define DECISION_WARM_BYTES 16000

vd_decision *vd_decision_new(void) {
  vd_decision *d = calloc(1, sizeof *d);
  if (!d) return NULL;
  arena_init(&d->mem, NULL, 0, DECIDE_DEFAULT_MEMORY_LIMIT);
  /* Allocate once and reset: the reset keeps the chunk for the first decision. */
  if (!arena_alloc(&d->mem, DECISION_WARM_BYTES)) {
    free(d);
    return NULL;
  }
  arena_reset(&d->mem);
  d->floor = -1;
  return d;
}

void vd_decision_free(vd_decision *d) {
  if (!d) return;
  arena_free(&d->mem);
  free(d->limit_room);
  free(d);
}

void vd_decision_set_trace(vd_decision *d, int on) {
  if (d) d->trace_on = on != 0;
}

void decision_reset(vd_decision *d) {
  arena_reset(&d->mem);
  int trace_on = d->trace_on;
  arena mem = d->mem;
  void *room = d->limit_room; /* the limits' readings: kept (decide.c) */
  uint32_t room_n = d->limit_room_n;
  memset(d, 0, sizeof *d);
  d->mem = mem;
  d->trace_on = trace_on;
  d->limit_room = room;
  d->limit_room_n = room_n;
  d->floor = -1; /* no confidence_floor until a request sends one */
}

size_t decision_arena_mallocs(const vd_decision *d) { return d->mem.mallocs; }

const char *vd_decision_action(const vd_decision *d) { return d && d->decided ? d->action : NULL; }
int vd_decision_allowed(const vd_decision *d) { return d && d->decided && d->allowed; }
int vd_decision_review(const vd_decision *d) { return d && d->decided && d->review; }
double vd_decision_confidence(const vd_decision *d) {
  return d && d->decided ? d->confidence : 0.0;
}
const char *vd_decision_source(const vd_decision *d) { return d && d->decided ? d->source : NULL; }
const char *vd_decision_rule(const vd_decision *d) { return d && d->decided ? d->rule : NULL; }
const char *vd_decision_reason(const vd_decision *d) { return d && d->decided ? d->reason : NULL; }
const char *vd_decision_strategy(const vd_decision *d) {
  return d && d->decided ? d->strategy : NULL;
}
const char *vd_decision_policy_version(const vd_decision *d) {
  return d && d->decided ? d->policy_version : NULL;
}
const char *vd_decision_model_version(const vd_decision *d) {
  return d && d->decided && (d->model_run == MODEL_SCORED || d->model_run == MODEL_DEADLINE)
             ? d->model_version
             : NULL;
}
double vd_decision_model_score(const vd_decision *d) {
  return d && d->decided && d->model_run == MODEL_SCORED ? d->model_score : NAN;
}
double vd_decision_latency_us(const vd_decision *d) {
  return d && d->decided ? d->latency_us : 0.0;
}
const char *vd_decision_snapshot_id(const vd_decision *d) {
  return d && d->decided ? d->snapshot_id : NULL;
}

value decision_time(vd_decision *d) {
  if (!d->clock_set) {
    d->clock_ns = clock_wall_ns();
    d->clock_set = true;
  }
  /* Floor division: a (test's) time before 1970 keeps nanos in [0, 1e9). */
  int64_t sec = d->clock_ns / 1000000000, ns = d->clock_ns % 1000000000;
  if (ns < 0) {
    ns += 1000000000;
    sec--;
  }
  return value_timestamp(sec, (int32_t)ns);
}
