/* decide.c — one decision: a compiled strategy run over one request.
 *
 * docs/policy.md ("How a decision is made") is the specification; in short:
 *   1. the request's action picks the strategy (none: VD_ENOTFOUND);
 *   2. rules run in order; a rule whose action is not a candidate is passed
 *      over unevaluated; the first condition that is true decides;
 *   3. a condition that fails or is not a bool stops the run: on_error;
 *   4. no rule matched: default;
 *   5. an answer that is not a candidate: on_no_candidate.
 * The rule index (policy's rule_index_candidates) narrows step 2 to the rules
 * that can match, in the same order, so a big strategy costs about what a
 * small one does.
 *
 * Variables, in the order a name is resolved: the strategy's `let`s
 * (computed on first use, at most once per decision, cached here), its
 * constants, `context`, `request` and `model`, then the context's own
 * fields. `model` runs the strategy's fallback model on first read (features
 * extracted, trees scored, under the fallback's deadline); a decision no
 * rule decides runs it too, and maps its score to an action. Whatever a
 * name resolves to is kept for the rest of the decision: the evaluator's
 * reads by the name's binding (names.h), other reads by content.
 *
 * In a lazy bundle (vd_engine_opts.lazy_compile) a rule's condition or a
 * let is compiled the first time a decision reaches it; one that does not
 * compile fails there, as an erroring rule or let does.
 *
 * All memory comes from the decision's arena; strings the decision keeps are
 * copied there, because the bundle may be freed by a reload once the caller
 * leaves its RCU read section. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/bytes.h"
#include "core/clock.h"
#include "core/dtoa.h"
#include "core/json.h"
#include "engine/decide.h"
#include "engine/engine.h"
#include "engine/names.h"
#include "expr/expr.h"
#include "model/model.h"
#include "state/local_fast.h"

const char SRC_RULE[] = "rule", SRC_MODEL[] = "model", SRC_DEFAULT[] = "default",
           SRC_ERROR[] = "error";

static int name_is(const char *s, size_t n, const char *lit, size_t litn) {
  return n == litn && memcmp(s, lit, n) == 0;
}

void action_name_defaults(const char *name, size_t n, bool *allowed, bool *review) {
#define IS(lit) name_is(name, n, lit, sizeof(lit) - 1)
#define STARTS(lit) (n > sizeof(lit) - 1 && memcmp(name, lit, sizeof(lit) - 1) == 0)
  *allowed = true;
  *review = false;
  if (IS("block") || IS("deny") || IS("reject") || IS("drop") || IS("refuse") || STARTS("block_") ||
      STARTS("deny_")) {
    *allowed = false;
  } else if (IS("ask") || IS("challenge") || IS("review") || STARTS("ask_") || STARTS("review_")) {
    *allowed = false;
    *review = true;
  }
#undef IS
#undef STARTS
}

static value request_value(dctx *x) {
  if (x->have_request) return x->request;
  map_entry *e = arena_alloc(x->ectx.arena, 5 * sizeof *e);
  if (!e) return VALUE_ERR("memory limit exceeded during evaluation");
  e[0].key = value_str("action", 6);
  e[0].val = x->req->action;
  e[1].key = value_str("candidates", 10);
  e[1].val = x->req->candidates;
  e[2].key = value_str("key", 3);
  e[2].val = x->req->key;
  e[3].key = value_str("context", 7);
  e[3].val = x->req->context;
  e[4].key = value_str("time", 4); /* the decision's clock reading (record.c records it) */
  e[4].val = decision_time(x->d);
  for (int i = 0; i < 5; i++) e[i].key.flags |= VF_ASCII;
  x->request = value_map(e, 5);
  x->have_request = 1;
  return x->request;
}

/* Runs the strategy's model once per decision: extracts the features with
 * the decision's own name resolution, scores them under the deadline, and
 * keeps everything the snapshot and the answer need in the decision. */
static int run_model(dctx *x) {
  vd_decision *d = x->d;
  if (d->model_run != MODEL_NOT_RUN) return d->model_run;
  const strategy *s = x->s;
  const bundle_model *m = s->model;
  if (!m) return d->model_run = MODEL_MISSING;
  uint64_t t0 = clock_mono_ns(); /* the deadline covers extraction and scoring */
  arena *a = &d->mem;
  uint32_t nf = features_count(m->features), k = gbdt_num_outputs(m->gbdt);
  float *row = arena_alloc(a, (nf ? nf : 1) * sizeof *row);
  uint8_t *st = arena_alloc(a, nf ? nf : 1);
  float *margins = arena_alloc(a, k * sizeof *margins), *probs = arena_alloc(a, k * sizeof *probs);
  const char **names = arena_alloc(a, (nf ? nf : 1) * sizeof *names);
  d->model_name = arena_strndup(a, m->name, strlen(m->name));
  if (!row || !st || !margins || !probs || !names || !d->model_name)
    return d->model_run = MODEL_MISSING;
  memcpy(d->model_version, m->version, sizeof d->model_version);
  memcpy(d->features_version, m->features_version, sizeof d->features_version);
  d->model_timeout_ms = s->fallback_timeout_ms;
  { /* the names outlive the bundle: copied in one piece */
    size_t blen;
    const uint32_t *at;
    const char *blob = features_names_packed(m->features, &blen, &at);
    const char *copy = d->trace_borrow || !nf ? blob : arena_memdup(a, blob, blen);
    if (!copy) return d->model_run = MODEL_MISSING;
    for (uint32_t i = 0; i < nf; i++) names[i] = copy + at[i];
  }
  features_extract(m->features, &x->act, &x->ectx, row, st, &d->feature_error);
  d->nfeatures = nf;
  d->features = row;
  d->feature_status = st;
  d->feature_names = names;
  int rc;
  if (d->model_replay == 1) {
    rc = GBDT_ETIMEOUT; /* replay: the recorded run missed its deadline */
  } else if (d->model_replay == 0) {
    rc = gbdt_predict(m->gbdt, row, margins, probs, NULL);
  } else {
    gbdt_deadline dl = {.at_ns = t0 + (uint64_t)s->fallback_timeout_ms * 1000000u, .every = 0};
    rc = gbdt_predict(m->gbdt, row, margins, probs, &dl);
  }
  d->ns_model = clock_mono_ns() - t0;
  if (rc != GBDT_OK) return d->model_run = MODEL_DEADLINE;
  /* Scores are float32; as doubles they are the decimals people read
   * (0.9f is 0.9, so `model.score >= 0.9` holds for it), and they print
   * short in answers and snapshots. */
  d->model_class = -1;
  if (k > 1) {
    d->model_class = (int32_t)gbdt_argmax(m->gbdt, probs);
    d->model_score = float_decimal(probs[d->model_class]);
  } else {
    d->model_score = float_decimal(probs[0]);
  }
  d->model_confidence = float_decimal(gbdt_confidence(m->gbdt, probs));
  return d->model_run = MODEL_SCORED;
}

/* The `model` variable: {name, version, score, confidence[, class]}, or an
 * error value naming why there is no score. */
static value model_value(dctx *x) {
  if (x->have_model) return x->model;
  vd_decision *d = x->d;
  int st = run_model(x);
  value v;
  if (st == MODEL_SCORED) {
    map_entry *e = arena_alloc(x->ectx.arena, 5 * sizeof *e);
    if (!e) return VALUE_ERR("memory limit exceeded during evaluation");
    uint32_t n = 0;
    e[n].key = value_str("name", 4);
    e[n++].val = value_str(d->model_name, (uint32_t)strlen(d->model_name));
    e[n].key = value_str("version", 7);
    e[n++].val = value_str(d->model_version, 64);
    e[n].key = value_str("score", 5);
    e[n++].val = value_double(d->model_score);
    e[n].key = value_str("confidence", 10);
    e[n++].val = value_double(d->model_confidence);
    if (d->model_class >= 0) {
      e[n].key = value_str("class", 5);
      e[n++].val = value_int(d->model_class);
    }
    for (uint32_t i = 0; i < n; i++) e[i].key.flags |= VF_ASCII;
    v = value_map(e, n);
  } else if (st == MODEL_DEADLINE) {
    v = value_errorf(x->ectx.arena, "model '%s' did not finish within its %u ms deadline",
                     x->s->fallback_model, x->s->fallback_timeout_ms);
  } else {
    v = value_errorf(x->ectx.arena, "model '%s' is not loaded",
                     x->s->fallback_model ? x->s->fallback_model : "?");
  }
  x->model = v;
  x->have_model = 1;
  return v;
}

/* ---- limits (docs/policy.md, "Limits") ----
 * A limit's counter is read at most once per decision: by the limits stage
 * (which may charge it) or, for a limit the stage did not reach, by the
 * first rule that reads `limits.NAME` (which never charges). The reading is
 * kept in d->limit_reads for the rest of the decision and for the snapshot;
 * replay and `verdict test` give the readings instead of the store. */

/* The caller's identity as text: a string as it is; a number or bool in
 * decimal or true/false; a list of those joined by U+001F. 0, or -1 (with
 * *why) when the value is of another kind. */
static int key_text(const value *v, char *buf, size_t cap, size_t *len, const char **why) {
  switch (v->kind) {
    case V_STRING:
      if (v->n >= cap - *len) break;
      memcpy(buf + *len, v->s, v->n);
      *len += v->n;
      return 0;
    case V_INT:
      *len += (size_t)snprintf(buf + *len, cap - *len, "%lld", (long long)v->i);
      return *len < cap ? 0 : -1;
    case V_UINT:
      *len += (size_t)snprintf(buf + *len, cap - *len, "%llu", (unsigned long long)v->u);
      return *len < cap ? 0 : -1;
    case V_BOOL:
      *len += (size_t)snprintf(buf + *len, cap - *len, "%s", v->b ? "true" : "false");
      return *len < cap ? 0 : -1;
    case V_LIST:
      for (uint32_t i = 0; i < v->n; i++) {
        if (i) {
          if (*len + 1 >= cap) break;
          buf[(*len)++] = '\x1f';
        }
        if (v->items[i].kind == V_LIST) {
          *why = "a key list holds strings, numbers or bools, not lists";
          return -1;
        }
        if (key_text(&v->items[i], buf, cap, len, why)) return -1;
      }
      if (*len < cap) return 0;
      break;
    default:
      *why = "the key must be a string, a number, a bool or a list of those";
      return -1;
  }
  if (!*why) *why = "the key is longer than 512 bytes";
  return -1;
}

/* The counter of limit i, fed back or from the store (NULL store: empty). */
static void counter_in(dctx *x, const policy_limit *pl, const limit_spec *sp, const char *skey,
                       size_t sklen, bool charge, limit_reading *r) {
  vd_decision *d = x->d;
  if (d->state && !d->counters_in) { /* the store fills *r */
    state_hit(d->state, skey, sklen, sp, d->clock_ns, charge, r);
    return;
  }
  memset(r, 0, sizeof *r);
  if (d->counters_in) {
    const value *c = d->counters_in->kind == V_MAP
                         ? value_map_get(d->counters_in, pl->name, pl->name_len)
                         : NULL;
    const value *n = c && c->kind == V_MAP ? value_map_get(c, "count", 5) : c;
    const value *p = c && c->kind == V_MAP ? value_map_get(c, "penalized", 9) : NULL;
    if (n && n->kind == V_INT && n->i > 0)
      r->count = n->i > UINT32_MAX ? UINT32_MAX : (uint32_t)n->i;
    if (n && n->kind == V_UINT) r->count = n->u > UINT32_MAX ? UINT32_MAX : (uint32_t)n->u;
    r->penalized = p && p->kind == V_BOOL && p->b;
    state_apply(sp, charge, r);
  } else {
    state_apply(sp, charge, r);
  }
}

/* `limits.NAME` for a reading: {key, count, budget, remaining, exceeded,
 * penalized, charged}; count includes this decision's own charge. */
static value limit_map(dctx *x, const policy_limit *pl, const limit_read *lr) {
  map_entry *e = arena_alloc(x->ectx.arena, 7 * sizeof *e);
  if (!e) return VALUE_ERR("memory limit exceeded during evaluation");
  uint32_t count = lr->r.count + (lr->r.charged ? 1 : 0);
  e[0].key = value_str("key", 3);
  e[0].val = value_str(lr->key, lr->key_len);
  e[1].key = value_str("count", 5);
  e[1].val = value_int(count);
  e[2].key = value_str("budget", 6);
  e[2].val = value_int(pl->budget);
  e[3].key = value_str("remaining", 9);
  e[3].val = value_int(count >= pl->budget ? 0 : (int64_t)(pl->budget - count));
  e[4].key = value_str("exceeded", 8);
  e[4].val = value_bool(lr->r.exceeded);
  e[5].key = value_str("penalized", 9);
  e[5].val = value_bool(lr->r.penalized);
  e[6].key = value_str("charged", 7);
  e[6].val = value_bool(lr->r.charged);
  for (int i = 0; i < 7; i++) e[i].key.flags |= VF_ASCII;
  return value_map(e, 7);
}

static int lookup(void *user, const char *name, size_t len, value *out);

/* The context field of a LIMIT_KEY_FIELD key, as context_field finds it,
 * looked for first where it was found last time. A request's keys are
 * unique (the JSON reader refuses duplicates), so a field found there is
 * the one context_field would find. */
static const value *limit_field(const value *ctx, const limit_key *lk) {
  uint32_t *at = (uint32_t *)&lk->field_at; /* the guess is the one thing written */
  uint32_t j = __atomic_load_n(at, __ATOMIC_RELAXED);
  const map_entry *e = ctx->entries;
#define FIELD_IS(k) \
  ((k).kind == V_STRING && (k).n == lk->var_len && bytes_same((k).s, lk->var, lk->var_len))
  if (j < ctx->n && FIELD_IS(e[j].key)) return &e[j].val;
  for (j = 0; j < ctx->n; j++)
    if (FIELD_IS(e[j].key)) {
      __atomic_store_n(at, j, __ATOMIC_RELAXED);
      return &e[j].val;
    }
#undef FIELD_IS
  return NULL;
}

/* The value of a plain key (names.h, limit_key_is_plain): the request's
 * key, or the context field — kept as the variable's value, as lookup
 * would keep it, for the rules that read it next. NULL: no such field. */
static inline __attribute__((always_inline)) const value *limit_key_plain(dctx *x,
                                                                          const limit_key *lk) {
  if (lk->how == LIMIT_KEY_REQUEST) return &x->req->key;
  if (x->bind_state[lk->var_bind] == BIND_BOUND) return &x->bind_val[lk->var_bind];
  const value *f = limit_field(&x->req->context, lk);
  if (f) {
    x->bind_state[lk->var_bind] = BIND_BOUND;
    x->bind_val[lk->var_bind] = *f;
  }
  return f;
}

/* A key of one of the shapes names.h reads directly: what expr_eval would
 * answer, without it. 0: evaluate the program instead (an unbound name, a
 * decision past its cost limit: the evaluator says so in its own words). */
static inline __attribute__((always_inline)) int limit_key_direct(dctx *x, const limit_key *lk,
                                                                  value *out) {
  const value *f;
  if (limit_key_is_plain(lk) && (f = limit_key_plain(x, lk))) {
    *out = *f;
  } else if ((lk->how != LIMIT_KEY_VAR && lk->how != LIMIT_KEY_FIELD) ||
             lookup(x, lk->var, lk->var_len, out) != 0) {
    return 0;
  }
  *out = value_error_text(x->ectx.arena, *out); /* as expr_eval returns errors */
  return !(x->ectx.cost_limit && x->ectx.cost > x->ectx.cost_limit);
}

/* Whether the decision's store is a local one, whose keys start with a
 * limit's id rather than its names (names.h). */
static inline bool limit_head_id(const vd_decision *d) {
  return d->state && state_local_only(d->state);
}

/* limit_take for keys other than a string with a prebuilt head: the head
 * built here, a number, bool or list written as text (key_text). */
__attribute__((noinline)) static limit_read *limit_take_slow(dctx *x, uint32_t i, limit_read *lr,
                                                             const value *k, bool charge) {
  vd_decision *d = x->d;
  const strategy *s = x->s;
  const policy_limit *pl = &s->limits[i];
  const limit_key *lk = x->refs ? &x->refs->limit_keys[i] : NULL;
  const char *why = NULL;
  char buf[600];
  size_t sn = strlen(s->name);
  size_t hdr = lk && lk->prefix ? lk->prefix_len : sn + pl->name_len + 2;
  if (hdr >= 80) {
    why = "the strategy and limit names are too long";
  } else if (limit_head_id(d)) { /* a local store: the limit's id */
    if (lk && lk->prefix)
      memcpy(buf, lk->id, 8);
    else
      state_limit_id(s->name, sn, pl->name, pl->name_len, buf);
    hdr = 8;
  } else if (lk && lk->prefix) {
    memcpy(buf, lk->prefix, hdr);
  } else {
    memcpy(buf, s->name, sn);
    buf[sn] = '\x1f';
    memcpy(buf + sn + 1, pl->name, pl->name_len);
    buf[hdr - 1] = '\x1f';
  }
  size_t len = hdr;
  if (why || key_text(k, buf, hdr + 512, &len, &why)) {
    lr->v = value_errorf(x->ectx.arena, "limit '%s': key: %s", pl->name, why ? why : "?");
    return lr;
  }
  if (!(lr->key = arena_strndup(&d->mem, buf + hdr, len - hdr))) return NULL;
  lr->key_len = (uint32_t)(len - hdr);
  limit_spec sp = {.window_ns = pl->window_ns, .budget = pl->budget, .penalty_ns = pl->penalty_ns};
  counter_in(x, pl, lk ? &lk->spec : &sp, buf, len, charge, &lr->r);
  lr->state = LIMIT_READ;
  return lr;
}

/* memcpy for the few bytes of a key, without the call (two word moves
 * that may overlap, as bytes_same reads). */
static inline void key_copy(char *dst, const char *src, size_t n) {
  if (n >= 8 && n <= 16) {
    uint64_t a, b;
    memcpy(&a, src, 8);
    memcpy(&b, src + n - 8, 8);
    memcpy(dst, &a, 8);
    memcpy(dst + n - 8, &b, 8);
  } else if (n) {
    memcpy(dst, src, n);
  }
}

/* Each limit is read at most once a decision, so the readings come with a
 * room of this many bytes each for the store's key, which the usual key
 * (a limit's head — its id, or its names for Redis — and an API key or an
 * address) fits. */
#define LIMIT_KEY_ROOM 64

/* The decision's room for the readings and their keys made bigger (it is
 * kept across decisions: see limit_reads_get); NULL out of memory. */
__attribute__((noinline)) static limit_read *limit_room_grow(dctx *x) {
  vd_decision *d = x->d;
  uint32_t n = x->s->nlimits;
  void *room = malloc((size_t)n * (sizeof *d->limit_reads + (size_t)LIMIT_KEY_ROOM));
  if (!room) return NULL;
  free(d->limit_room);
  d->limit_room = room;
  d->limit_room_n = n;
  return room;
}

/* The readings, then a key room for each (LIMIT_KEY_ROOM), in the
 * decision's limit_room, which outlives decision_reset: a decision with
 * limits allocates nothing for them once its decision object has seen its
 * strategy. Only each reading's state starts over; the rest of a reading is
 * written when it is read (limit_take), before anything reads it. */
static inline limit_read *limit_reads_get(dctx *x) {
  vd_decision *d = x->d;
  const strategy *s = x->s;
  if (d->limit_reads) return d->limit_reads;
  limit_read *r = d->limit_room_n >= s->nlimits ? d->limit_room : limit_room_grow(x);
  if (!r) return NULL;
  uint32_t n = s->nlimits;
  r[0].state = LIMIT_UNREAD; /* n >= 1; the usual one or two without a loop */
  if (n > 1) r[1].state = LIMIT_UNREAD;
  for (uint32_t j = 2; j < n; j++) r[j].state = LIMIT_UNREAD;
  d->limit_reads = r;
  d->nlimit_reads = n;
  d->limits_of = s;
  return r;
}

/* Limit i's key room (LIMIT_KEY_ROOM bytes after the readings). */
static inline char *limit_key_room(dctx *x, uint32_t i) {
  return (char *)(x->d->limit_reads + x->s->nlimits) + (size_t)i * LIMIT_KEY_ROOM;
}

/* The store's key for a limit and the caller k, a string: the limit's head
 * (hdr bytes: its id for a local store, else "STRATEGY\x1fLIMIT\x1f"; names.h)
 * and the caller, built once, in the limit's key room p, or in the arena
 * when it does not fit (the snapshot's key is its tail). NULL out of
 * memory. */
static inline __attribute__((always_inline)) char *limit_store_key(dctx *x, char *p,
                                                                   const char *head, size_t hdr,
                                                                   const value *k) {
  size_t len = hdr + k->n;
  if (len > LIMIT_KEY_ROOM && !(p = arena_alloc(&x->d->mem, len))) return NULL;
  if (hdr == 8) /* an id (or a head of 8 bytes): one word */
    memcpy(p, head, 8);
  else
    key_copy(p, head, hdr);
  key_copy(p + hdr, k->s, k->n); /* (no NUL: keys go with their lengths) */
  return p;
}

/* limit_take, any key, any source of counters. */
__attribute__((noinline)) static limit_read *limit_take_any(dctx *x, uint32_t i, bool charge) {
  vd_decision *d = x->d;
  const strategy *s = x->s;
  limit_read *lr = &d->limit_reads[i];
  if (lr->state != LIMIT_UNREAD) return lr;
  const policy_limit *pl = &s->limits[i];
  const limit_key *lk = x->refs ? &x->refs->limit_keys[i] : NULL;
  lr->state = LIMIT_FAILED;
  lr->v = value_null(); /* until it says why, or the reading (limit_value) */
  value k;
  if (!lk || !limit_key_direct(x, lk, &k)) k = expr_eval(pl->key, &x->act, &x->ectx);
  if (k.kind == V_ERROR) {
    char why[300];
    lr->v = value_errorf(x->ectx.arena, "limit '%s': key: %s", pl->name,
                         json_quote_text(why, sizeof why, k.s, k.n, 280));
    return lr;
  }
  if (!lk || !lk->prefix || k.kind != V_STRING || k.n >= 512)
    return limit_take_slow(x, i, lr, &k, charge);
  bool id = limit_head_id(d);
  size_t hdr = id ? 8 : lk->prefix_len;
  char *p = limit_store_key(x, limit_key_room(x, i), id ? lk->id : lk->prefix, hdr, &k);
  if (!p) return NULL;
  size_t len = hdr + k.n;
  lr->key = p + hdr;
  lr->key_len = k.n;
  if (d->state && !d->counters_in) /* the live store: counter_in's usual case, without the call */
    state_hit(d->state, p, len, &lk->spec, d->clock_ns, charge, &lr->r);
  else
    counter_in(x, pl, &lk->spec, p, len, charge, &lr->r);
  lr->state = LIMIT_READ; /* lr->v is built when a rule reads it (limit_value) */
  return lr;
}

/* A local store's charge (local_fast.h) in one call, instead of state_hit's
 * and local_hit's two. Inlined into the general limits stage, it would crowd
 * the stage's registers (measured: more instructions, not fewer); the plain
 * stage (run_limits_plain) has room for it and inlines it. */
__attribute__((noinline)) static void limit_charge_local(local_store *ls, const char *key,
                                                         size_t klen, const limit_spec *sp,
                                                         int64_t now_us, bool charge,
                                                         limit_reading *r) {
  local_charge(ls, key, klen, sp, now_us, charge, r);
}

/* Reads limit i once per decision (charging when `charge`) from the live
 * store, its reading being lr: evaluates its key, then the counter. NULL
 * only when out of memory. The usual case — a key read directly (names.h)
 * that is a string — is done here, in a few lines inlined where the limits
 * stage calls it; anything else by limit_take_any. ls: the store when it
 * is a local one (state_local_only), charged by limit_charge_local at
 * now_us (the decision's clock in microseconds); NULL: by state_hit. */
static inline __attribute__((always_inline)) limit_read *limit_take_live(
    dctx *x, uint32_t i, limit_read *lr, char *room, bool charge, local_store *ls, int64_t now_us) {
  if (lr->state != LIMIT_UNREAD) return lr;
  vd_decision *d = x->d;
  const limit_key *lk = &x->refs->limit_keys[i];
  const value *k;
  if (!limit_key_is_plain(lk) || !(k = limit_key_plain(x, lk))) return limit_take_any(x, i, charge);
  if (k->kind != V_STRING || k->n >= 512 || /* (a key read directly has a prefix: names.c) */
      (x->ectx.cost_limit && x->ectx.cost > x->ectx.cost_limit))
    return limit_take_any(x, i, charge);
  size_t hdr = ls ? 8 : lk->prefix_len;
  char *p = limit_store_key(x, room, ls ? lk->id : lk->prefix, hdr, k);
  if (!p) return NULL;
  lr->key = p + hdr;
  lr->key_len = k->n;
  lr->v.kind = V_NULL; /* built when a rule reads it (limit_value) */
  if (ls)
    limit_charge_local(ls, p, hdr + k->n, &lk->spec, now_us, charge, &lr->r);
  else
    state_hit(d->state, p, hdr + k->n, &lk->spec, d->clock_ns, charge, &lr->r);
  lr->state = LIMIT_READ;
  return lr;
}

/* Reads limit i once per decision (charging when `charge`), from wherever
 * the decision's counters come. NULL only when out of memory. */
static limit_read *limit_take(dctx *x, uint32_t i, bool charge) {
  limit_read *lr = limit_reads_get(x);
  if (!lr) return NULL;
  if (!x->refs || !x->d->state || x->d->counters_in) return limit_take_any(x, i, charge);
  return limit_take_live(x, i, lr + i, limit_key_room(x, i), charge, state_local_only(x->d->state),
                         x->d->clock_ns / 1000);
}

/* `limits.NAME` as rules see it: the map, built on the first read. */
static value limit_value(dctx *x, uint32_t i, limit_read *lr) {
  if (!lr) return VALUE_ERR("memory limit exceeded during evaluation");
  if (lr->state == LIMIT_READ && lr->v.kind == V_NULL) lr->v = limit_map(x, &x->s->limits[i], lr);
  return lr->v;
}

/* Whether the strategy has a let or a constant named `limits` (which
 * `limits` then reads instead of the limits). */
static int limits_shadowed(const dctx *x) {
  const strategy *s = x->s;
  if (x->names) return name_table_find(x->names, "limits", 6) != NULL;
  for (uint32_t i = 0; i < s->nlets; i++)
    if (s->lets[i].name_len == 6 && memcmp(s->lets[i].name, "limits", 6) == 0) return 1;
  return s->constants.kind == V_MAP && value_map_get(&s->constants, "limits", 6) != NULL;
}

/* `limits` — every limit, read — or `limits.NAME`: that limit alone, read
 * (policy programs ask for it as one name: the compiler's options claim
 * `limits`, expr.h). `limits.NAME` is unbound (-1) when NAME is no limit of
 * the strategy, or when `limits` is a let or a constant: the evaluator then
 * reads `limits` and selects NAME, which says what is wrong. */
static int limits_value(dctx *x, const char *name, size_t len, value *out) {
  const strategy *s = x->s;
  if (len == 6) {
    map_entry *e = arena_alloc(x->ectx.arena, s->nlimits * sizeof *e);
    if (!e) {
      *out = VALUE_ERR("memory limit exceeded during evaluation");
      return 0;
    }
    for (uint32_t i = 0; i < s->nlimits; i++) {
      e[i].key = value_str(s->limits[i].name, s->limits[i].name_len);
      e[i].val = limit_value(x, i, limit_take(x, i, false));
    }
    *out = value_map(e, s->nlimits);
    return 0;
  }
  const char *nm = name + 7;
  size_t nl = len - 7;
  if (memchr(nm, '.', nl) || limits_shadowed(x)) return -1; /* limits.NAME.field: NAME next */
  for (uint32_t i = 0; i < s->nlimits; i++)
    if (s->limits[i].name_len == nl && memcmp(s->limits[i].name, nm, nl) == 0) {
      *out = limit_value(x, i, limit_take(x, i, false));
      return 0;
    }
  return -1;
}

/* A limit's `when` and `charge`: 1 when `when` is false (the limit is
 * passed over), 0 with *charge, or -1 when one of them failed (*failed,
 * *why; *why NULL out of memory). Out of the stage's loop: the usual limit
 * has neither. */
__attribute__((noinline)) static int limit_conds(dctx *x, const policy_limit *pl, bool *charge,
                                                 const policy_limit **failed, const char **why) {
  const expr_program *conds[2] = {pl->when, pl->charge};
  for (int c = 0; c < 2; c++) {
    if (!conds[c]) continue;
    value v = expr_eval(conds[c], &x->act, &x->ectx);
    if (v.kind == V_BOOL) {
      if (c == 0 && !v.b) return 1;
      if (c == 1) *charge = v.b;
      continue;
    }
    *failed = pl;
    *why = v.kind == V_ERROR ? cat(&x->d->mem, "limit '", pl->name,
                                   c ? "' charge failed: " : "' when failed: ", v.s, v.n)
                             : cat(&x->d->mem, "limit '", pl->name, c ? "' charge" : "' when",
                                   " is not a bool", (size_t)-1);
    return -1;
  }
  return 0;
}

/* The limits stage when every limit is plain (names.h, limits_plain), the
 * request names no candidates and the counters are a local store's: the
 * usual gate, in one loop that tests nothing else (run_limits's loop with
 * limit_take_live inlined tests the rest and calls the charge: about 140
 * instructions more a decision with two limits). Each key is read directly, its store key built in
 * its room and charged. A key that is not a string shorter than 512 bytes, or a field the context
 * lacks, goes the general way (limit_take_any), which says what is wrong. The stage is the
 * decision's first reader of its limits, and nothing is evaluated before a key fails (so the
 * decision's cost is 0 here and needs no check). Returns 0, or -1 out of memory. */
static int run_limits_plain(dctx *x, limit_read *lr, local_store *ls, const policy_limit **limited,
                            const policy_limit **failed, const char **why) {
  const strategy *s = x->s;
  uint32_t n = s->nlimits;
  const limit_key *lk = x->refs->limit_keys;
  char *room = (char *)(lr + n);
  int64_t now_us = x->d->clock_ns / 1000;
  for (uint32_t i = 0; i < n; i++, lr++, lk++, room += LIMIT_KEY_ROOM) {
    const value *k = limit_key_plain(x, lk);
    if (__builtin_expect(k && k->kind == V_STRING && k->n < 512, 1)) {
      char *p = limit_store_key(x, room, lk->id, 8, k);
      if (!p) return -1;
      lr->key = p + 8;
      lr->key_len = k->n;
      lr->v.kind = V_NULL; /* built when a rule reads it (limit_value) */
      local_charge(ls, p, 8 + k->n, &lk->spec, now_us, true, &lr->r); /* inlined: -46 */
      lr->state = LIMIT_READ;
    } else if (!limit_take_any(x, i, true)) {
      return -1;
    } else if (lr->state == LIMIT_FAILED) {
      *failed = &s->limits[i];
      *why = cat(&x->d->mem, "", "", "", lr->v.s, lr->v.n);
      return *why ? 0 : -1;
    }
    if (lr->r.exceeded && s->limits[i].action >= 0) {
      *limited = &s->limits[i];
      return 0;
    }
  }
  return 0;
}

/* The limits stage: each limit in order, passed over when its action is not
 * a candidate or its `when` is false; the first one that refuses and has an
 * action decides (*limited). A `when`, `charge` or `key` that fails stops
 * the stage (*failed, *why). Returns 0, or -1 out of memory. */
static int run_limits(dctx *x, const uint8_t *mask, const policy_limit **limited,
                      const policy_limit **failed, const char **why) {
  const strategy *s = x->s;
  vd_decision *d = x->d;
  uint32_t n = s->nlimits;
  limit_read *reads = limit_reads_get(x);
  if (!reads) return -1;
  bool live = x->refs && d->state && !d->counters_in; /* the same for every limit */
  local_store *ls = live ? state_local_only(d->state) : NULL;
  if (ls && !mask && x->refs->limits_plain)
    return run_limits_plain(x, reads, ls, limited, failed, why);
  char *rooms = (char *)(reads + n); /* the key rooms (limit_key_room) */
  int64_t now_us = d->clock_ns / 1000;
  for (uint32_t i = 0; i < n; i++) {
    const policy_limit *pl = &s->limits[i];
    if (mask && pl->action >= 0 && !mask[pl->action]) continue;
    bool charge = true;
    if (pl->when || pl->charge) {
      int rc = limit_conds(x, pl, &charge, failed, why);
      if (rc > 0) continue;
      if (rc < 0) return *why ? 0 : -1;
    }
    limit_read *lr = live ? limit_take_live(x, i, reads + i, rooms + (size_t)i * LIMIT_KEY_ROOM,
                                            charge, ls, now_us)
                          : limit_take_any(x, i, charge);
    if (!lr) return -1;
    if (lr->state == LIMIT_FAILED) {
      *failed = pl;
      *why = cat(&d->mem, "", "", "", lr->v.s, lr->v.n);
      return *why ? 0 : -1;
    }
    if (lr->r.exceeded && pl->action >= 0) {
      *limited = pl;
      return 0;
    }
  }
  return 0;
}

static value let_value(dctx *x, uint32_t i) {
  const strategy *s = x->s;
  if (!x->let_state) {
    if (s->nlets <= LOCAL_LETS) { /* the usual strategy: no allocation */
      x->let_vals = x->local_let_vals;
      x->let_state = x->local_let_state;
    } else {
      x->let_vals = arena_alloc(x->ectx.arena, s->nlets * sizeof *x->let_vals);
      x->let_state = arena_zalloc(x->ectx.arena, s->nlets);
    }
    if (!x->let_vals || !x->let_state) {
      x->let_state = NULL;
      return VALUE_ERR("memory limit exceeded during evaluation");
    }
    if (x->d->trace_on) { /* one allocation: the values, then the names */
      value *vals = arena_alloc(x->ectx.arena, s->nlets * (sizeof *vals + sizeof *x->d->lets));
      if (!vals) return VALUE_ERR("memory limit exceeded during evaluation");
      x->d->let_values = vals;
      x->d->lets = (const char **)(void *)(vals + s->nlets);
    }
  }
  switch (x->let_state[i]) {
    case LET_DONE:
      return x->let_vals[i];
    case LET_BUSY:
      x->uncacheable = 1; /* once the let is done, its name reads its value */
      return value_errorf(x->ectx.arena, "let '%s' depends on itself", s->lets[i].name);
    default:
      break;
  }
  /* Load checks keep a strategy's chains of lets that read lets within
   * this (policy.h); whatever was checked, a let read deeper in such a chain
   * is an error, not a deeper C stack. It is not kept: read from a
   * shallower place, the let still evaluates. */
  if (x->let_depth >= POLICY_MAX_EVAL_DEPTH / POLICY_LET_READ_DEPTH) {
    x->uncacheable = 1;
    return value_errorf(x->ectx.arena, "let '%s' is read through more than %d lets that read lets",
                        s->lets[i].name, POLICY_MAX_EVAL_DEPTH / POLICY_LET_READ_DEPTH);
  }
  x->let_state[i] = LET_BUSY;
  x->let_depth++;
  const char *why = NULL;
  const expr_program *p =
      s->lets[i].prog ? s->lets[i].prog : strategy_let_program(s, i, x->ectx.arena, &why);
  value v = p ? expr_eval(p, &x->act, &x->ectx)
              : value_errorf(x->ectx.arena, "%s", why ? why : "does not compile");
  x->let_depth--;
  if (v.kind == V_ERROR)
    v = value_errorf(x->ectx.arena, "let '%s': %.*s", s->lets[i].name, (int)v.n, v.s);
  x->let_vals[i] = v;
  x->let_state[i] = LET_DONE;
  vd_decision *d = x->d;
  if (d->lets) { /* set (above) only when trace_on */
    uint32_t n = d->nlets;
    d->let_values[n] = v;
    const char *nm = d->trace_borrow
                         ? s->lets[i].name
                         : arena_strndup(x->ectx.arena, s->lets[i].name, s->lets[i].name_len);
    d->lets[n] = nm ? nm : "?";
    d->nlets = n + 1;
  }
  return v;
}

static int is_type_name(const char *s, size_t n) {
  static const char *const types[] = {"int",   "uint", "double", "bool",      "string",
                                      "bytes", "list", "map",    "null_type", "type"};
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
    if (strlen(types[i]) == n && memcmp(types[i], s, n) == 0) return 1;
  return 0;
}

static uint32_t name_hash(const char *s, size_t n) {
  uint32_t h = (uint32_t)n * 0x9e3779b1u;
  if (n)
    h ^= (uint32_t)(unsigned char)s[0] * 0x85ebca6bu ^
         (uint32_t)(unsigned char)s[n - 1] * 0xc2b2ae35u ^ (uint32_t)(unsigned char)s[n / 2];
  return h ^ (h >> 16);
}

/* A context field by name (the context is a map with string keys). */
static const value *context_field(const value *ctx, const char *name, size_t len) {
  for (uint32_t i = 0; i < ctx->n; i++) {
    const value *k = &ctx->entries[i].key;
    if (k->kind == V_STRING && k->n == len && bytes_same(k->s, name, len))
      return &ctx->entries[i].val;
  }
  return NULL;
}

/* A name that is not the strategy's own (a let or a constant): `context`,
 * `request` or a context field. */
static int resolve_request(dctx *x, const char *name, size_t len, value *out) {
  if (name_is(name, len, "context", 7)) {
    *out = x->req->context;
    return 0;
  }
  if (name_is(name, len, "request", 7)) {
    *out = request_value(x);
    return 0;
  }
  if (name_is(name, len, "model", 5) && x->s->fallback_model) {
    *out = model_value(x);
    return 0;
  }
  if (len >= 6 && memcmp(name, "limits", 6) == 0 && (len == 6 || name[6] == '.')) {
    if (x->s->nlimits) return limits_value(x, name, len, out);
    if (len > 6) return -1; /* no limits: `limits` is an ordinary name, its fields fields */
  }
  const value *f = context_field(&x->req->context, name, len);
  if (f) {
    *out = *f;
    return 0;
  }
  /* An absent context field reads as a missing key, as docs/policy.md
   * says. Dotted names are left unbound (the evaluator then tries the
   * shorter name, "env" for "env.country"), and so are type names, which the
   * evaluator resolves itself when no variable has them. */
  if (memchr(name, '.', len) || is_type_name(name, len)) return -1;
  *out = value_error_lazy(VE_NO_SUCH_FIELD, name, (uint32_t)len); /* formatted if read */
  return 0;
}

/* Resolves one name the slow way (see lookup). */
__attribute__((noinline)) static int resolve(dctx *x, const char *name, size_t len, value *out) {
  const strategy *s = x->s;
  if (x->names) {
    const name_slot *n = name_table_find(x->names, name, len);
    if (n) {
      *out = n->let >= 0 ? let_value(x, (uint32_t)n->let) : *n->constant;
      return 0;
    }
  } else {
    for (uint32_t i = 0; i < s->nlets; i++)
      if (s->lets[i].name_len == len && memcmp(s->lets[i].name, name, len) == 0) {
        *out = let_value(x, i);
        return 0;
      }
    if (s->constants.kind == V_MAP && s->constants.n) {
      const value *c = value_map_get(&s->constants, name, len);
      if (c) {
        *out = *c;
        return 0;
      }
    }
  }
  return resolve_request(x, name, len, out);
}

/* A name the cache does not hold (yet): probes on from slot h, then
 * resolves and remembers it. */
__attribute__((noinline)) static int lookup_miss(dctx *x, const char *name, size_t len, value *out,
                                                 uint32_t h) {
  for (uint32_t probes = 0; probes < NAME_CACHE; probes++, h = (h + 1) & (NAME_CACHE - 1)) {
    const char *c = x->cache_name[h];
    if (!c) break;
    if (x->cache_len[h] == len && (c == name || bytes_same(c, name, len))) {
      if (!x->cache_bound[h]) return -1;
      *out = x->cache_val[h];
      return 0;
    }
  }
  int saved = x->uncacheable;
  x->uncacheable = 0;
  int rc = resolve(x, name, len, out);
  /* the first empty slot (resolving a let may have filled the one found above) */
  uint32_t probes = 0;
  while (x->cache_name[h] && probes++ < NAME_CACHE) h = (h + 1) & (NAME_CACHE - 1);
  if (!x->uncacheable && !x->cache_name[h] && len <= UINT32_MAX) {
    x->cache_name[h] = name;
    x->cache_len[h] = (uint32_t)len;
    x->cache_bound[h] = rc == 0;
    if (rc == 0) x->cache_val[h] = *out;
  }
  x->uncacheable = saved; /* a name read along the way does not make this one uncacheable */
  return rc;
}

/* A binding (names.h) read for the first time in this decision. */
__attribute__((noinline)) static int bind_miss(dctx *x, const name_bind *b, const char *name,
                                               size_t len, value *out) {
  int saved = x->uncacheable;
  x->uncacheable = 0;
  int rc = 0;
  if (b->let >= 0)
    *out = let_value(x, (uint32_t)b->let);
  else if (b->constant)
    *out = *b->constant;
  else
    rc = resolve_request(x, name, len, out);
  if (!x->uncacheable) {
    x->bind_state[b->id] = rc == 0 ? BIND_BOUND : BIND_UNBOUND;
    if (rc == 0) x->bind_val[b->id] = *out;
  }
  x->uncacheable = saved;
  return rc;
}

/* The activation: resolves one name for the evaluator. A name from one of
 * the strategy's programs is found by its pointer (names.h); any other (the
 * rule index asks too) goes through the cache by content. */
static int lookup(void *user, const char *name, size_t len, value *out) {
  dctx *x = user;
  const name_bind *b;
  if (x->refs && (b = name_refs_find(x->refs, name)) && b->id < MAX_BINDS) {
    switch (x->bind_state[b->id]) {
      case BIND_BOUND:
        *out = x->bind_val[b->id];
        return 0;
      case BIND_UNBOUND:
        return -1;
      default:
        return bind_miss(x, b, name, len, out);
    }
  }
  uint32_t h = name_hash(name, len) & (NAME_CACHE - 1);
  const char *c = x->cache_name[h];
  if (c && x->cache_len[h] == len && (c == name || bytes_same(c, name, len))) {
    if (!x->cache_bound[h]) return -1;
    *out = x->cache_val[h];
    return 0;
  }
  return lookup_miss(x, name, len, out, h);
}

/* Lists the decision points of b into buf, for "no strategy" messages. */
static void list_points(const policy_bundle *b, char *buf, size_t cap) {
  size_t o = 0;
  buf[0] = '\0';
  for (uint32_t i = 0; i < b->nstrategies && o + 1 < cap; i++)
    for (uint32_t j = 0; j < b->strategies[i].ndecision_points && o + 1 < cap; j++)
      o += (size_t)snprintf(buf + o, cap - o, "%s'%s'", o ? ", " : "",
                            b->strategies[i].decision_points[j]);
  if (o >= cap && cap > 4) memcpy(buf + cap - 4, "...", 4);
}

/* The request's context.confidence_floor into *floor (-1: none). 0, or an
 * error code for a value that is not a number from 0 to 1. */
static int read_floor(const decide_request *req, double *floor, vd_error *err) {
  *floor = -1;
  const value *v = req->context.kind == V_MAP && req->context.n
                       ? value_map_get(&req->context, "confidence_floor", 16)
                       : NULL;
  if (!v) return 0;
  double f = v->kind == V_DOUBLE ? v->d
             : v->kind == V_INT  ? (double)v->i
             : v->kind == V_UINT ? (double)v->u
                                 : -1;
  if (!(f >= 0 && f <= 1))
    return engine_error(err, VD_EREQUEST, 0, 0, "$.context.confidence_floor",
                        "$.context.confidence_floor must be a number from 0 to 1 (the lowest "
                        "confidence the caller acts on without asking)");
  *floor = f;
  return 0;
}

/* The rules that can match, in order, until one is true (found->matched)
 * or one fails (found->failed, found->why); each one tried in the trace
 * when it is on. 0, or an error code. */
static int run_rules(dctx *x, const uint8_t *mask, uint32_t nrules, const uint32_t *order,
                     decide_found *found, vd_error *err) {
  const strategy *s = x->s;
  vd_decision *d = x->d;
  for (uint32_t k = 0; k < nrules; k++) {
    const policy_rule *r = &s->rules[order ? order[k] : k];
    trace_rule *t = NULL;
    if (d->trace_on) {
      t = &d->trace[d->ntrace++];
      t->name = d->trace_borrow ? r->name : dup(d, r->name);
      t->error = NULL;
    }
    if (mask && (r->action < 0 || !mask[r->action])) {
      if (t) t->result = RR_NOT_CANDIDATE;
      continue;
    }
    /* a lazy bundle's condition compiles on its first use */
    const char *cwhy = NULL, *why;
    const expr_program *p =
        r->cond ? r->cond : strategy_rule_program(s, (uint32_t)(r - s->rules), &d->mem, &cwhy);
    value v = p ? expr_eval(p, &x->act, &x->ectx)
                : value_errorf(&d->mem, "%s", cwhy ? cwhy : "does not compile");
    if (v.kind == V_BOOL) {
      if (t) t->result = v.b ? RR_TRUE : RR_FALSE;
      if (v.b) {
        found->matched = r;
        return 0;
      }
      continue;
    }
    if (v.kind == V_ERROR)
      why = cat(&d->mem, "rule '", r->name, "' failed: ", v.s, v.n);
    else
      why = cat(&d->mem, "rule '", r->name, "' gave a value of type ",
                value_kind_name((value_kind)v.kind), (size_t)-1);
    if (why && v.kind != V_ERROR) why = cat(&d->mem, why, ", not a bool", "", NULL, 0);
    found->failed = r;
    found->why = why;
    if (!why) return nomem(err);
    if (t) {
      t->result = RR_ERROR;
      t->error = why;
    }
    /* A failing rule ends the rules: only the last rule tried can have
     * failed (the snapshot's capture relies on it and asserts it). */
    return 0;
  }
  return 0;
}

int decide_run(const policy_bundle *b, const name_table *names, const decide_request *req,
               const decide_limits *lim, vd_decision *d, vd_error *err) {
  const strategy *s = policy_bundle_route(b, req->action.s, req->action.n, &req->candidates);
  if (!s) {
    char points[512], name[256];
    list_points(b, points, sizeof points);
    return engine_error(err, VD_ENOTFOUND, 0, 0, "$.action",
                        "no strategy serves the decision point '%s'%s (this bundle serves %s; "
                        "a strategy with route: candidates takes a request only when its "
                        "candidates are all that strategy's actions)",
                        json_quote_text(name, sizeof name, req->action.s, req->action.n, 200),
                        req->candidates.n ? " with these candidates" : "",
                        points[0] ? points : "none");
  }
  double floor;
  int frc = read_floor(req, &floor, err);
  if (frc) return frc;
  d->floor = floor;

  dctx x;
  memset(&x, 0, offsetof(dctx, cache_len)); /* all but the cache, whose names say it is empty */
  x.s = s;
  x.names = names ? &names[s - b->strategies] : NULL;
  x.refs = x.names ? name_table_refs(x.names) : NULL;
  x.req = req;
  x.d = d;
  x.ectx.arena = &d->mem;
  x.ectx.cost_limit = lim->cost_limit;
  x.ectx.regex_match_limit = lim->regex_match_limit;
  x.act.lookup = lookup;
  x.act.user = &x;

  /* Which strategy actions the request allows (NULL: no candidates given). */
  uint8_t *mask = NULL;
  if (req->candidates.n) {
    mask = arena_zalloc(&d->mem, s->nactions ? s->nactions : 1);
    if (!mask) return nomem(err);
    for (uint32_t i = 0; i < req->candidates.n; i++) {
      const value *c = &req->candidates.items[i];
      int32_t idx = strategy_action(s, c->s, c->n);
      if (idx >= 0) mask[idx] = 1;
    }
  }

  /* Limits, before the rules: the first one that refuses decides. */
  decide_found found;
  memset(&found, 0, sizeof found);
  if (s->nlimits && run_limits(&x, mask, &found.limited, &found.lim_failed, &found.why))
    return nomem(err);

  /* The rules that can match, in order. */
  uint32_t nrules = found.limited || found.lim_failed ? 0 : s->nrules;
  uint32_t *order = NULL;
  if (s->index && nrules) {
    order = arena_alloc(&d->mem, nrules * sizeof *order);
    if (!order) return nomem(err);
    nrules = rule_index_candidates(s->index, s, &x.act, order);
  }
  if (d->trace_on) {
    d->rules_total = s->nrules;
    d->rules_indexed = nrules;
    if (nrules && !(d->trace = arena_alloc(&d->mem, nrules * sizeof *d->trace))) return nomem(err);
  }
  int rc = run_rules(&x, mask, nrules, order, &found, err);
  if (rc) return rc;

  /* No rule matched, none failed, and the model is asked. */
  if (!found.matched && !found.failed && !found.limited && !found.lim_failed && s->fallback_model)
    found.model_says = run_model(&x);
  return decide_outcome(&x, mask, &found, floor, err);
}
