/* decide.h — what the two files of a decision share (engine-internal):
 * decide.c evaluates (the request's strategy, its limits, rules, lets and
 * model), decide_outcome.c chooses the outcome from what that found (the
 * six-way cascade of docs/policy.md, "How a decision is made", then the
 * candidates and the confidence floor). */
#ifndef VD_ENGINE_DECIDE_H
#define VD_ENGINE_DECIDE_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/names.h"
#include "expr/expr.h"

enum { LET_TODO = 0, LET_BUSY, LET_DONE };

/* Names resolved during this decision. What a name resolves to cannot
 * change within a decision (lets are computed once; the request and the
 * constants are fixed), so each is resolved once and kept: the evaluator's
 * own reads by binding (below), the others (the rule index's paths, names
 * of programs the strategy does not list) here, by content. Open
 * addressing on a cheap hash of the name; when the table is full, names are
 * simply resolved again. Small, because it is cleared on every decision
 * and only those other reads use it. */
#define NAME_CACHE 16

/* The values of the strategy's bindings (names.h) this decision has read:
 * the fast road for the evaluator's own lookups, by the name's pointer. */
#define MAX_BINDS NAMES_MAX_BINDS

/* Lets kept in the decision's context itself (more are allocated). */
#define LOCAL_LETS 16
enum { BIND_TODO = 0, BIND_BOUND, BIND_UNBOUND };

typedef struct dctx {
  const strategy *s;
  const name_table *names; /* s's, or NULL: scan */
  const decide_request *req;
  vd_decision *d;
  eval_ctx ectx;
  expr_activation act;
  value *let_vals; /* allocated on the first let read */
  uint8_t *let_state;
  uint32_t let_depth; /* lets being evaluated, each inside the one before */
  value request;      /* the `request` variable, built on first read */
  int have_request;
  value model; /* the `model` variable, built on first read */
  int have_model;
  const name_refs *refs;         /* s's lookup names by pointer, or NULL */
  uint8_t bind_state[MAX_BINDS]; /* BIND_* */
  uint8_t local_let_state[LOCAL_LETS];
  int uncacheable;                    /* set while resolving a name whose answer must not be kept */
  const char *cache_name[NAME_CACHE]; /* NULL: empty */
  uint32_t cache_len[NAME_CACHE];
  int8_t cache_bound[NAME_CACHE];
  value cache_val[NAME_CACHE];
  value bind_val[MAX_BINDS]; /* read where bind_state says so */
  value local_let_vals[LOCAL_LETS];
} dctx;

/* d->source: compared by address (static strings), so defined once */
extern const char SRC_RULE[], SRC_MODEL[], SRC_DEFAULT[], SRC_ERROR[];

/* What the rules and limits found, for choosing the outcome. At most one
 * of limited, matched and failed is set, or lim_failed alone; why is what
 * failed (a rule's error, a limit's), in the decision's arena. */
typedef struct decide_found {
  const policy_limit *limited, *lim_failed;
  const policy_rule *matched, *failed;
  const char *why;
  int model_says; /* run_model's answer when no rule decided and the model was asked */
} decide_found;

static inline const char *dup(vd_decision *d, const char *s) {
  return s ? arena_strndup(&d->mem, s, strlen(s)) : NULL;
}

/* a + b + c + d[0..dn) in the arena, NUL-terminated; d may be NULL.
 * dn == (size_t)-1: d is NUL-terminated. (The error paths use this rather
 * than snprintf: they are decisions too, and should cost little.) */
static inline const char *cat(arena *m, const char *a, const char *b, const char *c, const char *dd,
                              size_t dn) {
  size_t an = strlen(a), bn = strlen(b), cn = strlen(c);
  if (!dd) dn = 0;
  if (dd && dn == (size_t)-1) dn = strlen(dd);
  char *p = arena_alloc(m, an + bn + cn + dn + 1);
  if (!p) return NULL;
  memcpy(p, a, an);
  memcpy(p + an, b, bn);
  memcpy(p + an + bn, c, cn);
  if (dn) memcpy(p + an + bn + cn, dd, dn);
  p[an + bn + cn + dn] = '\0';
  return p;
}

static inline int nomem(vd_error *err) {
  return engine_error(err, VD_ENOMEM, 0, 0, NULL,
                      "the decision ran out of memory (memory_limit is per decision)");
}

/* decide_outcome.c: the outcome of the strategy x->s from what was found
 * (source, confidence, rule, reason, action), then the candidates' and the
 * confidence floor's say; mask: the strategy actions the request allows
 * (NULL: no candidates given). 0, or an error code with err filled. */
int decide_outcome(dctx *x, const uint8_t *mask, const decide_found *f, double floor,
                   vd_error *err);

#endif
