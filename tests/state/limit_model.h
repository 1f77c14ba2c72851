/* limit_model.h — the rule of src/state/state.h written a second way, for
 * the tests to check both stores against: the stores keep a GCRA time (the
 * "virtual scheduling" form), this keeps a leaky bucket — how full it is,
 * as of the last charge (the "continuous-state" form) — and counts by
 * subtracting the spacing rather than dividing. Both must give the same
 * reading for every hit. Also the guarantee the docs state: at most
 * budget + floor(L / T) charges in any span of length L. */
#ifndef VD_TESTS_LIMIT_MODEL_H
#define VD_TESTS_LIMIT_MODEL_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "state/state.h"

typedef struct limit_model {
  int64_t level; /* µs of spacing still to drain, as of `last` */
  int64_t last;  /* µs: the last charge */
  int64_t penalty_until;
} limit_model;

/* window / budget, rounded up to a whole microsecond, at least 1 */
static int64_t model_spacing(const limit_spec *sp) {
  int64_t w = sp->window_ns / 1000, t = w / sp->budget;
  if (t * (int64_t)sp->budget < w) t++;
  return t < 1 ? 1 : t;
}

static limit_reading model_hit(limit_model *m, const limit_spec *sp, int64_t now_ns, bool charge) {
  limit_reading r;
  memset(&r, 0, sizeof r);
  int64_t now = now_ns / 1000, t = model_spacing(sp);
  int64_t level = m->level - (now - m->last);
  if (level < 0) level = 0;
  for (int64_t left = level; left > 0; left -= t) r.count++;
  r.penalized = now < m->penalty_until;
  r.exceeded = r.penalized || r.count >= sp->budget;
  r.charged = charge && !r.exceeded;
  if (r.charged) {
    m->level = level + t;
    m->last = now;
    if (r.count + 1 >= sp->budget && sp->penalty_ns > 0)
      m->penalty_until = now + sp->penalty_ns / 1000;
  }
  return r;
}

/* The documented bound over a list of charge times (ns, in order): the
 * number of pairs i < j with more than budget + floor((t_j - t_i) / T)
 * charges from i to j — 0 when the bound holds. */
static int model_bound_violations(const int64_t *times, size_t n, const limit_spec *sp) {
  int64_t t = model_spacing(sp);
  int bad = 0;
  for (size_t i = 0; i < n; i++)
    for (size_t j = i; j < n && j < i + 4 * sp->budget; j++)
      if ((int64_t)(j - i + 1) > sp->budget + (times[j] / 1000 - times[i] / 1000) / t) bad++;
  return bad;
}

#endif
