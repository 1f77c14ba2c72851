/* decide_outcome.c — a decision's outcome, chosen from what the rules,
 * limits and model found (decide.c evaluates them; decide.h has what the
 * two share). docs/policy.md ("How a decision is made") is the
 * specification; the order, first that applies:
 *   1. a limit refused: it decides as a rule would, named limits.NAME;
 *   2. a rule matched: its outcome;
 *   3. the fallback model scored: its class or threshold;
 *   4. the model missed its deadline: on_timeout, else the default;
 *   5. no rule matched, no model: the default;
 *   6. otherwise (a rule or limit failed, no default): on_error.
 * Then an answer that is not a candidate goes to on_no_candidate, and one
 * less sure than the request's confidence_floor to the review action. */
#include <assert.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtoa.h"
#include "engine/decide.h"
#include "engine/engine.h"

/* Sets the action of the decision from a strategy action index. */
static int set_action(vd_decision *d, const strategy *s, int32_t a) {
  if (a < 0) {
    d->action = NULL;
    d->allowed = false;
    d->review = false;
    return 0;
  }
  d->action = arena_strndup(&d->mem, s->actions[a].name, s->actions[a].name_len);
  d->allowed = s->actions[a].allowed;
  d->review = s->actions[a].review;
  return d->action ? 0 : -1;
}

static const char *threshold_text(double v);

/* What made the answer on_no_candidate replaces, for its message. */
static const char *answer_kind(const vd_decision *d) {
  if (d->source == SRC_ERROR) return "on_error action";
  if (d->source == SRC_MODEL)
    return d->model_run == MODEL_DEADLINE ? "on_timeout action" : "model's answer";
  return "default";
}

/* The model's thresholds reached whose actions the candidates rule out
 * (fallback.on_not_candidate: next), into d->no_candidate: the decision's
 * reason and its snapshot's trace say the next one down decided, and why.
 * 0, or -1 when out of memory. Off the usual path: only when candidates
 * exclude a threshold the score reached. */
static int excluded_note(dctx *x, const uint8_t *mask) {
  const strategy *s = x->s;
  vd_decision *d = x->d;
  char msg[512];
  size_t o = (size_t)snprintf(msg, sizeof msg, "thresholds reached but not among the candidates: ");
  int k = 0;
  for (uint32_t t = 0; t < s->nthresholds && o < sizeof msg; t++) {
    const policy_threshold *th = &s->thresholds[t];
    if (!(d->model_score >= th->min_score)) continue;
    if (th->outcome.action >= 0 && mask[th->outcome.action]) break;
    o += (size_t)snprintf(msg + o, sizeof msg - o, "%s'%s' (at least %s)", k++ ? ", " : "",
                          th->outcome.action >= 0 ? s->actions[th->outcome.action].name : "?",
                          threshold_text(th->min_score));
  }
  if (o < sizeof msg)
    snprintf(msg + o, sizeof msg - o,
             "; fallback.on_not_candidate: next (the next threshold down decides)");
  d->no_candidate = dup(d, msg);
  return d->no_candidate ? 0 : -1;
}

/* Step 5: the answer is not a candidate. Returns 0, or an error code. */
static int no_candidate(dctx *x, const uint8_t *mask, int32_t chosen, vd_error *err) {
  const strategy *s = x->s;
  vd_decision *d = x->d;
  const char *was = chosen >= 0 ? s->actions[chosen].name : "";
  char msg[512];
  switch (s->nc_mode) {
    case NC_FIRST: {
      const value *c = &x->req->candidates.items[0];
      d->action = arena_strndup(&d->mem, c->s, c->n);
      if (!d->action) return nomem(err);
      int32_t idx = strategy_action(s, c->s, c->n);
      if (idx >= 0) {
        d->allowed = s->actions[idx].allowed;
        d->review = s->actions[idx].review;
      } else {
        action_name_defaults(c->s, c->n, &d->allowed, &d->review);
      }
      snprintf(msg, sizeof msg, "'%s' (the %s) is not among the candidates; on_no_candidate: first",
               was, answer_kind(d));
      break;
    }
    case NC_ACTION:
      if (s->nc_action >= 0 && mask[s->nc_action]) {
        if (set_action(d, s, s->nc_action)) return nomem(err);
        snprintf(msg, sizeof msg, "'%s' (the %s) is not among the candidates; on_no_candidate: %s",
                 was, answer_kind(d), s->actions[s->nc_action].name);
        break;
      }
      return engine_error(err, VD_ENOCANDIDATE, 0, 0, "$.candidates",
                          "strategy '%s' answered '%s' (%s), and its on_no_candidate action "
                          "'%s' is not among the candidates either",
                          s->name, was, d->source,
                          s->nc_action >= 0 ? s->actions[s->nc_action].name : "?");
    default:
      return engine_error(err, VD_ENOCANDIDATE, 0, 0, "$.candidates",
                          "strategy '%s' answered '%s' (%s), which is not among the request's "
                          "candidates; its on_no_candidate is 'error'",
                          s->name, was, d->source);
  }
  /* Keep why the strategy answered what it did (an error's message, the
   * default's reason; what the candidates did to the model's thresholds,
   * which both hold already) before what on_no_candidate made of it. */
  const char *note = dup(d, msg);
  if (!note) return nomem(err);
  d->reason = d->reason ? cat(&d->mem, d->reason, "; ", note, NULL, 0) : note;
  d->no_candidate = d->no_candidate ? cat(&d->mem, d->no_candidate, "; ", note, NULL, 0) : note;
  return d->reason && d->no_candidate ? 0 : nomem(err);
}

/* A threshold's shortest digits. Thresholds are few and fixed for a
 * bundle's life, so each thread keeps the text of the ones it met, by
 * value, in a small direct-mapped table, instead of printing them on every
 * model decision. */
static const char *threshold_text(double v) {
  static _Thread_local struct {
    uint64_t bits;
    bool set;
    char text[32];
  } seen[8];
  uint64_t bits;
  memcpy(&bits, &v, sizeof bits);
  unsigned h = (unsigned)((bits * 0x9E3779B97F4A7C15ull) >> 61);
  if (!seen[h].set || seen[h].bits != bits) {
    dtoa_shortest(v, seen[h].text);
    seen[h].bits = bits;
    seen[h].set = true;
  }
  return seen[h].text;
}

/* a..g concatenated into buf (cut to fit). */
static void join(char *buf, size_t cap, const char *a, const char *b, const char *c, const char *dd,
                 const char *e, const char *f) {
  const char *parts[6] = {a, b, c, dd, e, f};
  size_t o = 0;
  for (int i = 0; i < 6 && o + 1 < cap; i++) {
    size_t n = strlen(parts[i]);
    if (n > cap - 1 - o) n = cap - 1 - o;
    memcpy(buf + o, parts[i], n);
    o += n;
  }
  buf[o] = '\0';
}

/* The caller's confidence_floor (docs/policy.md, "Confidence floor"): a
 * decision less sure than the floor takes the strategy's review action —
 * the first declared action with review: true that is a candidate, else the
 * first candidate whose meaning is review. Error decisions keep their
 * declared on_error answer, and a review answer stays. 0, or an error code
 * when no review action is there to take. */
static int decide_apply_floor(dctx *x, const uint8_t *mask, double floor, vd_error *err) {
  vd_decision *d = x->d;
  const strategy *s = x->s;
  if (!(d->confidence < floor) || d->review || !d->action || d->source == SRC_ERROR) return 0;
  const char *name = NULL;
  size_t n = 0;
  bool allowed = false;
  for (uint32_t a = 0; a < s->nactions && !name; a++)
    if (s->actions[a].review && (!mask || mask[a])) {
      name = s->actions[a].name;
      n = s->actions[a].name_len;
      allowed = s->actions[a].allowed;
    }
  for (uint32_t i = 0; i < x->req->candidates.n && !name; i++) {
    const value *c = &x->req->candidates.items[i];
    int32_t idx = strategy_action(s, c->s, c->n);
    bool al, rv;
    if (idx >= 0) {
      al = s->actions[idx].allowed;
      rv = s->actions[idx].review;
    } else {
      action_name_defaults(c->s, c->n, &al, &rv);
    }
    if (rv) {
      name = c->s;
      n = c->n;
      allowed = al;
    }
  }
  char cf[32], ff[32];
  dtoa_shortest(d->confidence, cf);
  dtoa_shortest(floor, ff);
  if (!name)
    return engine_error(err, VD_ENOCANDIDATE, 0, 0, "$.context.confidence_floor",
                        "strategy '%s' answered '%s' with confidence %s, below the request's "
                        "confidence_floor %s, and has no review action among the candidates to "
                        "answer instead",
                        s->name, d->action, cf, ff);
  d->floor_from = d->action;
  d->action = arena_strndup(&d->mem, name, n);
  d->allowed = allowed;
  d->review = true;
  char msg[512];
  snprintf(msg, sizeof msg,
           "confidence %s is below the request's confidence_floor %s: '%.*s' instead of '%s'", cf,
           ff, (int)n, name, d->floor_from);
  d->reason = d->reason ? cat(&d->mem, d->reason, "; ", msg, NULL, 0) : dup(d, msg);
  return d->action && d->reason ? 0 : nomem(err);
}

/* 1. A limit refused. */
static int outcome_limited(dctx *x, const policy_limit *limited, int32_t *chosen, vd_error *err) {
  vd_decision *d = x->d;
  const limit_read *lr = &d->limit_reads[limited - x->s->limits];
  char buf[200];
  snprintf(buf, sizeof buf, "%s (limit '%s': %s)",
           limited->reason ? limited->reason : "rate limited", limited->name,
           lr->r.degraded    ? "the counter store failed; state_on_error decided"
           : lr->r.penalized ? "penalty running"
                             : "budget used up");
  d->source = SRC_RULE;
  d->confidence = 1.0;
  d->rule = cat(&d->mem, "limits.", limited->name, "", NULL, 0);
  d->reason = dup(d, buf);
  if (!d->rule || !d->reason) return nomem(err);
  *chosen = limited->action;
  return 0;
}

/* 3. The model scored: its class, or the first threshold reached whose
 * action the request allows (with on_not_candidate: on_no_candidate, the
 * first reached, whatever it is), or below. */
static int outcome_model(dctx *x, const uint8_t *mask, int32_t *chosen, vd_error *err) {
  vd_decision *d = x->d;
  const strategy *s = x->s;
  const policy_outcome *o = NULL;
  uint32_t excluded = 0; /* thresholds reached whose actions are not candidates */
  char buf[256];
  d->source = SRC_MODEL;
  d->confidence = d->model_confidence == d->model_confidence ? d->model_confidence : 1.0;
  if (s->nclasses) {
    *chosen = d->model_class >= 0 && (uint32_t)d->model_class < s->nclasses
                  ? s->classes[d->model_class]
                  : -1;
    snprintf(buf, sizeof buf, "model '%s': class %d, p=%.4g", s->fallback_model,
             (int)d->model_class, d->model_score);
  } else {
    uint32_t t = 0;
    while (t < s->nthresholds && (!(d->model_score >= s->thresholds[t].min_score) ||
                                  (mask && (s->thresholds[t].outcome.action < 0 ||
                                            !mask[s->thresholds[t].outcome.action])))) {
      if (d->model_score >= s->thresholds[t].min_score) {
        excluded++;
        if (s->threshold_nc) break;
      }
      t++;
    }
    /* the candidates ruled out what the thresholds chose: say so */
    if (excluded && !s->threshold_nc && excluded_note(x, mask)) return nomem(err);
    /* (no printf on the decision path: shortest digits of a decimal double
     * take a few multiplications, %g a few thousand instructions) */
    char sc[32];
    dtoa_shortest(d->model_score, sc);
    if (t < s->nthresholds) {
      o = &s->thresholds[t].outcome;
      join(buf, sizeof buf, "model '", s->fallback_model, "' scored ", sc, ", at least ",
           threshold_text(s->thresholds[t].min_score));
    } else {
      o = &s->below;
      join(buf, sizeof buf, "model '", s->fallback_model, "' scored ", sc,
           excluded ? ", below every threshold whose action is a candidate"
                    : ", below every threshold",
           "");
    }
    *chosen = o->action;
  }
  /* below's reason speaks of a score under every threshold: not when the
   * candidates ruled out the ones it reached */
  if (o == &s->below && excluded) o = NULL;
  d->reason = o && o->reason ? cat(&d->mem, o->reason, " (", buf, ")", (size_t)-1) : dup(d, buf);
  if (d->reason && d->no_candidate)
    d->reason = cat(&d->mem, d->reason, "; ", d->no_candidate, NULL, 0);
  return d->reason ? 0 : nomem(err);
}

/* 4. The model ran out of time (while a rule read it, or deciding itself):
 * the strategy's declared answer for that, on_timeout or its default. */
static int outcome_timeout(dctx *x, const policy_rule *failed, int32_t *chosen, vd_error *err) {
  vd_decision *d = x->d;
  const strategy *s = x->s;
  const policy_outcome *o = s->on_timeout.action >= 0 ? &s->on_timeout : &s->default_outcome;
  char buf[200];
  snprintf(buf, sizeof buf, "model '%s' missed its %u ms deadline; fallback.%s", s->fallback_model,
           s->fallback_timeout_ms,
           s->on_timeout.action >= 0 ? "on_timeout" : "on_timeout unset: default");
  d->source = SRC_MODEL;
  d->confidence = 0.0;
  d->rule = failed ? dup(d, failed->name) : NULL;
  d->reason = o->reason ? cat(&d->mem, o->reason, " (", buf, ")", (size_t)-1) : dup(d, buf);
  if (!d->reason) return nomem(err);
  *chosen = o->action;
  return 0;
}

/* 6. on_error: a rule or a limit failed, or nothing decided. */
static int outcome_error(dctx *x, const decide_found *f, int32_t *chosen, vd_error *err) {
  vd_decision *d = x->d;
  const strategy *s = x->s;
  const char *why = f->why;
  if (!f->failed && !f->lim_failed) {
    if (s->fallback_model)
      why = cat(&d->mem, "no rule matched, and the fallback model '", s->fallback_model,
                d->model_run == MODEL_DEADLINE ? "' missed its deadline" : "' is not loaded", NULL,
                0);
    else
      why = dup(d, "no rule matched, and the strategy has no default");
  }
  d->source = SRC_ERROR;
  d->confidence = 0.0;
  d->rule = f->failed       ? dup(d, f->failed->name)
            : f->lim_failed ? cat(&d->mem, "limits.", f->lim_failed->name, "", NULL, 0)
                            : NULL;
  /* The strategy's on_error reason first, then what failed. */
  d->reason = why && s->on_error.reason
                  ? cat(&d->mem, s->on_error.reason, " (", why, ")", (size_t)-1)
                  : why;
  if (!d->reason) return nomem(err);
  *chosen = s->on_error.action;
  return 0;
}

int decide_outcome(dctx *x, const uint8_t *mask, const decide_found *f, double floor,
                   vd_error *err) {
  vd_decision *d = x->d;
  const strategy *s = x->s;
  /* What decide.c found can be one thing only: a limit refused (and the
   * rules did not run), a limit failed (likewise), a rule matched, or a
   * rule failed — or nothing. */
  assert(!(f->limited && f->lim_failed));
  assert(!((f->limited || f->lim_failed) && (f->matched || f->failed)));
  assert(!(f->matched && f->failed));
  /* A matched rule's action is a candidate by construction: the rules
   * whose actions are not are passed over unevaluated. */
  assert(!f->matched || !mask || (f->matched->action >= 0 && mask[f->matched->action]));
  int32_t chosen = -1;
  int rc;
  if (f->limited) {
    rc = outcome_limited(x, f->limited, &chosen, err);
  } else if (f->matched) {
    d->source = SRC_RULE;
    d->confidence = f->matched->confidence;
    d->rule = dup(d, f->matched->name);
    d->reason = dup(d, f->matched->reason);
    chosen = f->matched->action;
    rc = 0;
  } else if (f->model_says == MODEL_SCORED) {
    rc = outcome_model(x, mask, &chosen, err);
  } else if (d->model_run == MODEL_DEADLINE &&
             (s->on_timeout.action >= 0 || s->default_outcome.action >= 0)) {
    rc = outcome_timeout(x, f->failed, &chosen, err);
  } else if (!f->failed && !f->lim_failed && !s->fallback_model && s->default_outcome.action >= 0) {
    d->source = SRC_DEFAULT;
    d->confidence = 1.0;
    d->reason = dup(d, s->default_outcome.reason);
    chosen = s->default_outcome.action;
    rc = 0;
  } else {
    rc = outcome_error(x, f, &chosen, err);
  }
  if (rc) return rc;
  if (set_action(d, s, chosen)) return nomem(err);
  d->strategy = dup(d, s->name);
  memcpy(d->policy_version, s->version, sizeof d->policy_version);
  d->policy_version[sizeof d->policy_version - 1] = '\0';
  d->cost = x->ectx.cost;
  if (!d->strategy) return nomem(err);

  /* Step 5. An error decision without an action stays one. */
  if (mask && chosen >= 0 && !mask[chosen]) {
    rc = no_candidate(x, mask, chosen, err);
    if (rc) return rc;
  }
  if (floor >= 0) {
    rc = decide_apply_floor(x, mask, floor, err);
    if (rc) return rc;
  }
  d->decided = 1;
  return 0;
}
