/* replay.c — re-deciding recorded decisions (the contract is replay.h).
 *
 * For each snapshot the reader returns (filters apply to the record header,
 * so nothing is parsed to skip a record), the payload's members are located
 * in one pass and the few replay needs are parsed (see "reading a payload");
 * the recorded request, as the JSON text it was recorded as, is decided
 * again through the engine's own path for JSON requests
 * (service_decide_json), with the recorded clock reading as request.time
 * and the limits the recorded decision ran under. The bundle is either the
 * recorded strategy version, loaded from the content-addressed store
 * (<store>/<version>.json, which holds the strategy's canonical form: JSON,
 * read by policy_bundle_from_stored with verdict's JSON reader, or as YAML
 * when it is not canonical) and cached by version, or the candidate bundle
 * of opts->policy_dir, loaded once.
 *
 * A stored version must load back to the same version: if the canonical
 * form did not hash to its own name the replay would run some other policy
 * and call the differences nondeterminism, so such a version is refused
 * (every snapshot under it is an error item).
 *
 * With several workers (opts.workers, "in parallel" below), the calling
 * thread reads the log in batches (copying each record), the workers decide
 * a batch's records (each with its own decision, arena and message, taking
 * records a few at a time), copying each result into an arena of their own,
 * and the calling thread hands the results over in the log's order while
 * the workers decide the next batch. What the workers share is read-only
 * (the options, the candidate bundle: a bundle is immutable, the engine's
 * decisions read it from any number of threads) or behind a lock (the cache
 * of recorded versions, whose entries never move once loaded); the
 * accounting and the callback stay on the calling thread.
 *
 * Nothing is written: no snapshots, no version store. Not here: scoring,
 * diffs and reports (score.c, report.c), which are built on the callback. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "core/clock.h"
#include "core/json.h"
#include "engine/service.h"
#include "policy/policy.h"
#include "replay/replay.h"
#include "snapshot/snapshot.h"

/* One policy version, loaded (or found missing: error set) once. */
typedef struct version_entry {
  char version[65];
  char model[65];        /* the model version the snapshot used, "" none */
  char features[65];     /* its feature spec's version */
  policy_bundle *bundle; /* NULL: could not be loaded */
  struct name_table *names;
  arena mem; /* names */
  char *text;
  char *error;
} version_entry;

/* The recorded versions loaded so far, shared by the workers (lock): an
 * entry, once made, stays where it is until the walk ends. */
typedef struct version_cache {
  pthread_mutex_t lock;
  char *own;   /* the snapshot folder's own versions (looked in first) */
  char *store; /* where recorded versions are read from otherwise */
  version_entry **versions;
  size_t nversions, cap;
  uint32_t *slots; /* versions by hash (entry_hash): index + 1, 0 empty */
  size_t nslots;   /* a power of two, at least twice nversions */
} version_cache;

/* One deciding thread's state (the calling thread's alone without workers). */
typedef struct replayer {
  const replay_opts *opts;
  version_cache *cache;
  version_entry *last; /* the version the previous snapshot used */
  /* the versions this thread found in the cache, looked in without the
   * lock first (traffic to several strategies alternates between a few) */
  version_entry *mine[16];
  unsigned nmine;
  version_entry *candidate; /* opts.policy_dir's bundle (shared, read-only) */
  arena mem; /* per snapshot: the parsed members and strings handed out */
  vd_decision *d;
  vd_decision *dref; /* the reference decision (opts.time_reference) */
  double ref_us;     /* its thread CPU time, 0: none */
  uint64_t nref;
  char msg[1024]; /* the current item's error message */
} replayer;

static int fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t errlen, const char *fmt, ...) {
  if (err && errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return -1;
}

static void entry_free(version_entry *v) {
  policy_bundle_free(v->bundle);
  arena_free(&v->mem);
  free(v->text);
  free(v->error);
  memset(v, 0, sizeof *v);
}

static char *read_whole(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *buf = NULL;
  size_t n = 0, cap = 0;
  for (;;) {
    if (n + 4096 + 1 > cap) {
      cap = cap ? cap * 2 : 16384;
      char *nb = realloc(buf, cap);
      if (!nb) {
        free(buf);
        fclose(f);
        errno = ENOMEM;
        return NULL;
      }
      buf = nb;
    }
    size_t got = fread(buf + n, 1, cap - n - 1, f);
    n += got;
    if (got == 0) break;
  }
  int bad = ferror(f);
  fclose(f);
  if (bad) {
    free(buf);
    errno = EIO;
    return NULL;
  }
  buf[n] = '\0';
  *len = n;
  return buf;
}

/* Diagnostics as one message: the count and the first error. */
static char *diags_message(const char *what, const policy_diags *dg) {
  const policy_diag *first = NULL;
  for (size_t i = 0; i < dg->n && !first; i++)
    if (dg->items[i].severity == DIAG_ERROR) first = &dg->items[i];
  char *m = NULL;
  int rc = first ? asprintf(&m, "%s does not load (%zu error%s): %s:%d:%d: %s%s%s", what,
                            dg->errors, dg->errors == 1 ? "" : "s", first->file, first->line,
                            first->column, first->key, first->key[0] ? ": " : "", first->message)
                 : asprintf(&m, "%s does not load", what);
  return rc < 0 ? NULL : m;
}

static int is_hex64(const char *s, size_t n) {
  if (n != 64) return 0;
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
  return 1;
}

/* dir/<name>: in the snapshot folder's own versions when there, else in
 * the store (a folder written before folders carried their versions, or a
 * shared store given with --store). */
static const char *version_dir(const version_cache *rp, const char *name) {
  char path[4400];
  snprintf(path, sizeof path, "%s/%s", rp->own, name);
  return access(path, R_OK) == 0 ? rp->own : rp->store;
}

static void version_load(version_cache *rp, version_entry *v) {
  char path[4200], name[128];
  snprintf(name, sizeof name, "%s.json", v->version);
  snprintf(path, sizeof path, "%s/%s", version_dir(rp, name), name);
  size_t len;
  v->text = read_whole(path, &len);
  if (!v->text) {
    if (asprintf(&v->error,
                 "policy version %.12s… is neither in the snapshot folder's versions nor in the "
                 "version store (%s: %s); the engine that recorded the snapshot keeps it in the "
                 "folder: check it with `verdict snapshots verify`, give a store that has it with "
                 "--store DIR, or replay against a bundle with --policy DIR",
                 v->version, path, strerror(errno)) < 0)
      v->error = NULL;
    return;
  }
  policy_diags dg;
  memset(&dg, 0, sizeof dg);
  if (policy_bundle_from_stored(path, v->text, len, &v->bundle, &dg) != 0 || !v->bundle) {
    /* it loaded when the decision was made: the file is not what was written */
    char *m = diags_message(path, &dg);
    if (m && asprintf(&v->error,
                      "%s; the stored version was damaged since it was written: restore it from a "
                      "copy of the store, or remove it and load the strategy file that made it "
                      "once with `verdict decide` (which writes it again)",
                      m) < 0)
      v->error = NULL;
    free(m);
    policy_diags_free(&dg);
    policy_bundle_free(v->bundle);
    v->bundle = NULL;
    return;
  }
  policy_diags_free(&dg);
  if (v->bundle->nstrategies != 1 || strcmp(v->bundle->strategies[0].version, v->version) != 0) {
    if (asprintf(&v->error,
                 "%s loads as version %.12s…, not as the version its name says: replaying under "
                 "it would not be replaying the recorded policy; the file was changed or damaged "
                 "since it was written: restore it from a copy of the store, or remove it and "
                 "load the strategy file that made it once with `verdict decide` (which writes "
                 "it again)",
                 path, v->bundle->nstrategies ? v->bundle->strategies[0].version : "(none)") < 0)
      v->error = NULL;
    policy_bundle_free(v->bundle);
    v->bundle = NULL;
    return;
  }
  if (v->model[0] && v->bundle->strategies[0].fallback_model) {
    /* the model and spec the decision used, kept in the store by content */
    char mp[4300], fp[4300], mn[128], fn[128];
    snprintf(mn, sizeof mn, "models/%s.json", v->model);
    snprintf(fn, sizeof fn, "models/%s.features.yaml", v->features);
    snprintf(mp, sizeof mp, "%s/%s", version_dir(rp, mn), mn);
    snprintf(fp, sizeof fp, "%s/%s", version_dir(rp, fn), fn);
    memset(&dg, 0, sizeof dg);
    if (policy_bundle_attach_model(v->bundle, 0, mp, fp, &dg) != 0) {
      v->error = diags_message(path, &dg);
      policy_diags_free(&dg);
      policy_bundle_free(v->bundle);
      v->bundle = NULL;
      return;
    }
    policy_diags_free(&dg);
  }
  arena_init(&v->mem, NULL, 0, 0);
  v->names = service_names_build(&v->mem, v->bundle);
}

/* The cached entry for a version (loading it on first use); NULL only when
 * out of memory. */
static int entry_is(const version_entry *v, const char *ver, size_t n, const char *mv,
                    const char *fv) {
  return strlen(v->version) == n && memcmp(v->version, ver, n) == 0 && !strcmp(v->model, mv) &&
         !strcmp(v->features, fv);
}

/* A log that spans many policy edits names many versions, and traffic to
 * several strategies alternates between them: a version is found by hash,
 * not by a scan of every version loaded (which made a replay quadratic in
 * the number of versions). The versions are hex digests: their first 16
 * characters are hash enough, with the model's and the spec's. */
static size_t entry_hash(const char *ver, size_t n, const char *mv, const char *fv) {
  uint64_t h = 1469598103934665603u;
  for (size_t i = 0; i < n && i < 16; i++) h = (h ^ (unsigned char)ver[i]) * 1099511628211u;
  for (size_t i = 0; mv[i] && i < 8; i++) h = (h ^ (unsigned char)mv[i]) * 1099511628211u;
  for (size_t i = 0; fv[i] && i < 8; i++) h = (h ^ (unsigned char)fv[i]) * 1099511628211u;
  return (size_t)(h ^ (h >> 29));
}

static void slots_put(version_cache *rp, size_t index) {
  const version_entry *v = rp->versions[index];
  size_t i = entry_hash(v->version, strlen(v->version), v->model, v->features);
  while (rp->slots[i & (rp->nslots - 1)]) i++;
  rp->slots[i & (rp->nslots - 1)] = (uint32_t)index + 1;
}

/* The entry in the cache (loading it when new), with the cache locked. */
static version_entry *cache_get(version_cache *rp, const char *ver, size_t n, const char *mv,
                                const char *fv) {
  for (size_t i = rp->nslots ? entry_hash(ver, n, mv, fv) : 0; rp->nslots; i++) {
    uint32_t at = rp->slots[i & (rp->nslots - 1)];
    if (!at) break;
    if (entry_is(rp->versions[at - 1], ver, n, mv, fv)) return rp->versions[at - 1];
  }
  if (rp->nversions == rp->cap) {
    size_t cap = rp->cap ? rp->cap * 2 : 8;
    version_entry **nv = cap < UINT32_MAX ? realloc(rp->versions, cap * sizeof *nv) : NULL;
    uint32_t *ns = nv ? calloc(2 * cap, sizeof *ns) : NULL;
    if (nv) rp->versions = nv;
    if (!ns) return NULL;
    free(rp->slots);
    rp->slots = ns;
    rp->nslots = 2 * cap;
    rp->cap = cap;
    for (size_t i = 0; i < rp->nversions; i++) slots_put(rp, i);
  }
  version_entry *v = calloc(1, sizeof *v);
  if (!v) return NULL;
  rp->versions[rp->nversions++] = v;
  snprintf(v->model, sizeof v->model, "%s", mv);
  snprintf(v->features, sizeof v->features, "%s", fv);
  if (!is_hex64(ver, n) || (mv[0] && !is_hex64(mv, strlen(mv))) ||
      (fv[0] && !is_hex64(fv, strlen(fv)))) {
    /* Not a version the engine writes; never used as a file name. */
    snprintf(v->version, sizeof v->version, "%.*s", (int)(n > 64 ? 64 : n), ver);
    v->error = strdup(
        "the snapshot's policy, model or features version is not a 64-digit hex "
        "SHA-256");
  } else {
    memcpy(v->version, ver, 64);
    v->version[64] = '\0';
    version_load(rp, v);
  }
  slots_put(rp, rp->nversions - 1);
  return v;
}

static version_entry *version_get(replayer *rp, const char *ver, size_t n, const char *mv,
                                  const char *fv) {
  if (rp->last && entry_is(rp->last, ver, n, mv, fv)) return rp->last;
  unsigned have = rp->nmine < 16 ? rp->nmine : 16;
  for (unsigned i = 0; i < have; i++)
    if (entry_is(rp->mine[i], ver, n, mv, fv)) return rp->last = rp->mine[i];
  pthread_mutex_lock(&rp->cache->lock);
  version_entry *v = cache_get(rp->cache, ver, n, mv, fv);
  pthread_mutex_unlock(&rp->cache->lock);
  if (v) {
    rp->mine[rp->nmine++ % 16] = v; /* the oldest found gives way */
    rp->last = v;
  }
  return v;
}

/* ---- reading a payload ----
 * A snapshot is mostly the request, the trace and the lets, and replay
 * needs only the request (as text: it is decided again from JSON, as the
 * original was) and a dozen small fields. So the payload is not parsed
 * whole: one pass finds where each top-level member's value lies, skipping
 * over values without building them, and only the small members are parsed.
 * The skipping is lenient about structure (brackets are only counted); what
 * is used is then parsed strictly, the request by the engine itself. */

/* The top-level members replay knows, in the order the engine writes them. */
enum {
  F_FORMAT,
  F_ID,
  F_TIME,
  F_TIME_NS,
  F_NODE,
  F_ENGINE_VERSION,
  F_POINT,
  F_REQUEST,
  F_CANDIDATES,
  F_KEY,
  F_STRATEGY,
  F_POLICY_VERSION,
  F_BUNDLE_VERSION,
  F_MODEL_VERSION,
  F_FEATURES,
  F_MODEL,
  F_TRACE,
  F_LETS,
  F_LET_ERRORS,
  F_MODEL_SCORE,
  F_MODEL_CONFIDENCE,
  F_ACTION,
  F_ALLOWED,
  F_REVIEW,
  F_CONFIDENCE,
  F_SOURCE,
  F_REASON,
  F_LATENCY,
  F_LIMITS,
  F_INPUTS,
  F_SIDE,      /* a rollout's (docs/snapshots.md, "Shadow and canary"): not required */
  F_COMPLETES, /* the off-path decision of a rollout names the answered one */
  F_ERROR,     /* and, when the candidate refused the request, its error */
  F_COUNT
};

/* A member's name and its length (compared in place, no strlen per key). */
typedef struct mname {
  const char *s;
  size_t n;
} mname;
#define MNAME(lit) \
  { lit, sizeof(lit) - 1 }

static const mname field_names[F_COUNT] = {MNAME("format"),
                                           MNAME("id"),
                                           MNAME("time"),
                                           MNAME("time_ns"),
                                           MNAME("node"),
                                           MNAME("engine_version"),
                                           MNAME("point"),
                                           MNAME("request"),
                                           MNAME("candidates"),
                                           MNAME("key"),
                                           MNAME("strategy"),
                                           MNAME("policy_version"),
                                           MNAME("bundle_version"),
                                           MNAME("model_version"),
                                           MNAME("features"),
                                           MNAME("model"),
                                           MNAME("trace"),
                                           MNAME("lets"),
                                           MNAME("let_errors"),
                                           MNAME("model_score"),
                                           MNAME("model_confidence"),
                                           MNAME("action"),
                                           MNAME("allowed"),
                                           MNAME("review"),
                                           MNAME("confidence"),
                                           MNAME("source"),
                                           MNAME("reason"),
                                           MNAME("latency_ns"),
                                           MNAME("limits"),
                                           MNAME("inputs"),
                                           MNAME("side"),
                                           MNAME("completes"),
                                           MNAME("error")};

/* Which of them docs/snapshots.md ("Snapshot contents") requires: all but
 * let_errors and limits, which came with format 1 too but are not audit
 * fields. null is a value: a member that is null by design is present. */
static int field_required(int f) {
  return f != F_LET_ERRORS && f != F_LIMITS && f != F_MODEL && f != F_SIDE && f != F_COMPLETES &&
         f != F_ERROR;
}

typedef struct span {
  const char *s; /* NULL: absent */
  size_t n;
} span;

static inline const char *skip_ws(const char *p, const char *end) {
  while (p < end && (unsigned char)*p <= ' ' &&
         (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
    p++;
  return p;
}

/* p at an opening quote: just past the closing one, or NULL. */
static const char *skip_string(const char *p, const char *end) {
  for (p++; p < end; p++) {
    const char *q = memchr(p, '"', (size_t)(end - p));
    if (!q) return NULL;
    size_t bs = 0;
    while (q - bs > p && q[-(ptrdiff_t)bs - 1] == '\\') bs++;
    if (!(bs & 1)) return q + 1;
    p = q;
  }
  return NULL;
}

/* Skipping a container: only quotes, backslashes and brackets matter. A
 * payload is ~2.6 KB, mostly the request, the trace and the lets, and a
 * byte-at-a-time loop over it cost more than re-deciding the snapshot; so,
 * where SSE2 is there, 64 bytes at a time: masks of the quotes, backslashes,
 * opening and closing brackets; the bytes inside strings are the running
 * XOR of the quote mask (a block with a backslash, rare, goes byte by byte
 * instead); only the brackets outside strings are then looked at one by
 * one. The state carries from block to block. */
typedef struct skip_state {
  size_t depth;
  int in_string;
  const char *escaped; /* the byte a backslash escapes: not a quote */
} skip_state;

/* One structural byte at q: 1 when it closes the outermost container. */
static inline int skip_step(skip_state *st, const char *q) {
  char c = *q;
  if (q == st->escaped) return 0;
  if (st->in_string) {
    if (c == '\\')
      st->escaped = q + 1;
    else if (c == '"')
      st->in_string = 0;
  } else if (c == '"') {
    st->in_string = 1;
  } else if (c == '{' || c == '[') {
    st->depth++;
  } else if (c == '}' || c == ']') {
    if (--st->depth == 0) return 1;
  }
  return 0;
}

static inline int structural(char c) {
  return c == '"' || c == '\\' || c == '{' || c == '}' || c == '[' || c == ']';
}

#if defined(__SSE2__)
/* Bit i of the result: byte i of the 16 equals c. */
static inline uint64_t eq16(__m128i v, char c) {
  return (uint64_t)(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(c)));
}
#endif

/* p at '{' or '[': just past the matching bracket, or NULL. */
static const char *skip_container(const char *p, const char *end) {
  skip_state st = {0, 0, NULL};
#if defined(__SSE2__)
  const __m128i lower = _mm_set1_epi8(0x20); /* '[' | 0x20 == '{', ']' | 0x20 == '}' */
  for (; end - p >= 64; p += 64) {
    uint64_t quote = 0, bslash = 0, open = 0, close = 0;
    for (int k = 0; k < 4; k++) {
      __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(p + 16 * k));
      __m128i v20 = _mm_or_si128(v, lower);
      quote |= eq16(v, '"') << (16 * k);
      bslash |= eq16(v, '\\') << (16 * k);
      open |= eq16(v20, '{') << (16 * k);
      close |= eq16(v20, '}') << (16 * k);
    }
    if (bslash || st.escaped == p) { /* escapes: byte by byte */
      for (uint64_t m = quote | bslash | open | close; m; m &= m - 1) {
        const char *q = p + __builtin_ctzll(m);
        if (skip_step(&st, q)) return q + 1;
      }
      continue;
    }
    /* inside: the bytes after an opening quote up to the closing one */
    uint64_t inside = quote;
    inside ^= inside << 1;
    inside ^= inside << 2;
    inside ^= inside << 4;
    inside ^= inside << 8;
    inside ^= inside << 16;
    inside ^= inside << 32;
    if (st.in_string) inside = ~inside;
    st.in_string = (int)(inside >> 63);
    for (uint64_t m = (open | close) & ~inside; m; m &= m - 1) {
      const char *q = p + __builtin_ctzll(m);
      if (*q == '{' || *q == '[')
        st.depth++;
      else if (--st.depth == 0)
        return q + 1;
    }
  }
#endif
  for (; p < end; p++)
    if (structural(*p) && skip_step(&st, p)) return p + 1;
  return NULL;
}

/* Bytes that end a scalar (a number, true, false, null). */
static const unsigned char scalar_end[256] = {
    [','] = 1, ['}'] = 1, [']'] = 1, [' '] = 1, ['\n'] = 1, ['\r'] = 1, ['\t'] = 1};

/* p at the first byte of a value: just past it, or NULL. */
static const char *skip_value(const char *p, const char *end) {
  if (p >= end) return NULL;
  if (*p == '"') return skip_string(p, end);
  if (*p == '{' || *p == '[') return skip_container(p, end);
  const char *q = p;
  while (q < end && !scalar_end[(unsigned char)*q]) q++;
  return q > p ? q : NULL;
}

/* Finds the members of the object text [s, s+n) named in names[0..count):
 * out[i] is the value text of names[i] (s NULL when absent; the first one
 * when written twice). 0, or -1 when the text is not an object. */
/* One member's object, indexed in the same pass as the object around it
 * (instead of skipped, then indexed again): for the trace, whose size is
 * second only to the request's. */
typedef struct nested {
  int field; /* which of names */
  const mname *names;
  int count;
  span *out;
  int found; /* set: the member was an object and was indexed */
} nested;

static const char *members(const char *p, const char *end, const mname *names, int count, span *out,
                           nested *in);

static int index_object_in(const char *s, size_t n, const mname *names, int count, span *out,
                           nested *in) {
  for (int i = 0; i < count; i++) out[i].s = NULL;
  if (in) {
    in->found = 0;
    for (int i = 0; i < in->count; i++) in->out[i].s = NULL;
  }
  if (!s) return -1;
  return members(s, s + n, names, count, out, in) ? 0 : -1;
}

static int index_object(const char *s, size_t n, const mname *names, int count, span *out) {
  return index_object_in(s, n, names, count, out, NULL);
}

/* The object at p (after whitespace): out[] filled, just past its closing
 * brace returned, or NULL when it is not an object. */
static const char *members(const char *p, const char *end, const mname *names, int count, span *out,
                           nested *in) {
  p = skip_ws(p, end);
  if (p >= end || *p != '{') return NULL;
  p = skip_ws(p + 1, end);
  if (p < end && *p == '}') return p + 1;
  int guess = 0; /* members usually come in the order of names */
  for (;;) {
    if (p >= end || *p != '"') return NULL;
    const char *k = p + 1, *ke;
    /* The key expected next, compared in place: a name holds no quote or
     * backslash, so the name and then a quote is that key, whole. */
    int found = -1;
    const mname *nm = &names[guess < count ? guess : 0];
    size_t kn = nm->n;
    if ((size_t)(end - k) > kn && k[kn] == '"' && memcmp(k, nm->s, kn) == 0) {
      found = guess < count ? guess : 0;
      ke = k + kn + 1;
    } else {
      if (!(ke = skip_string(p, end))) return NULL;
      kn = (size_t)(ke - 1 - k);
      for (int t = 0; t < count && found < 0; t++) {
        int i = guess + t < count ? guess + t : guess + t - count;
        if (names[i].n == kn && memcmp(names[i].s, k, kn) == 0) found = i;
      }
    }
    p = skip_ws(ke, end);
    if (p >= end || *p != ':') return NULL;
    p = skip_ws(p + 1, end);
    const char *v = p;
    if (in && found == in->field && !out[found].s && p < end && *p == '{') {
      if (!(p = members(p, end, in->names, in->count, in->out, NULL))) return NULL;
      in->found = 1;
    } else if (!(p = skip_value(p, end))) {
      return NULL;
    }
    if (found >= 0) {
      if (!out[found].s) {
        out[found].s = v;
        out[found].n = (size_t)(p - v);
      }
      guess = found + 1;
    }
    p = skip_ws(p, end);
    if (p < end && *p == ',') {
      p = skip_ws(p + 1, end);
      continue;
    }
    return p < end && *p == '}' ? p + 1 : NULL;
  }
}

/* Parses one small member: its value, or a V_ERROR value when it is absent
 * or malformed (which every use below treats as "not there"). */
static value parse_span(arena *a, span sp) {
  value v = VALUE_ERR("absent");
  if (!sp.s) return v;
  json_opts jo = {.lenient = 1, .max_size = sp.n + 1};
  if (json_parse(a, sp.s, sp.n, &jo, &v, NULL) != 0) return VALUE_ERR("malformed");
  return v;
}

/* The small members, read straight from their text where it is plain (what
 * this engine writes), and through json_parse otherwise: a string with no
 * escape, control or non-ASCII byte; true/false; a decimal integer of up to
 * 19 digits (int64); the confidences 1.0 and 0.0. Each gives what the parsed value
 * would (str_or_null, num, int64_of, u64_or below). */
static const char *str_or_null(arena *a, const value *v);
static int num(const value *v, double *out);
static int int64_of(const value *v, int64_t *out);
static uint64_t u64_or(const value *v, uint64_t dflt);

/* The high bit of each byte of w that is a control byte, '"', '\\' or
 * non-ASCII (a borrow may mark a byte after a real one, never a word
 * without one). */
static inline uint64_t special_bytes(uint64_t w) {
  const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
  uint64_t q = w ^ (ones * '"'), bs = w ^ (ones * '\\');
  return ((w - ones * 0x20) | w | ((q - ones) & ~q) | ((bs - ones) & ~bs)) & highs;
}

/* Whether s[0..n) is a JSON string's content needing no decoding (nothing
 * but printable ASCII other than '"' and '\\'), eight bytes at a time. */
static int plain_text(const char *s, size_t n) {
  uint64_t w;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    memcpy(&w, s + i, 8);
    if (special_bytes(w)) return 0;
  }
  w = 0x6161616161616161ull; /* 'a' * 8: harmless padding */
  memcpy(&w, s + i, n - i);
  return !special_bytes(w);
}

static const char *span_str(arena *a, span sp) {
  if (!sp.s) return NULL;
  if (sp.n >= 2 && sp.s[0] == '"' && sp.s[sp.n - 1] == '"') {
    if (plain_text(sp.s + 1, sp.n - 2)) return arena_strndup(a, sp.s + 1, sp.n - 2);
  } else if (sp.n == 4 && memcmp(sp.s, "null", 4) == 0) {
    return NULL;
  }
  value v = parse_span(a, sp);
  return str_or_null(a, &v);
}

static int span_true(span sp) { return sp.s && sp.n == 4 && memcmp(sp.s, "true", 4) == 0; }

/* A plain decimal integer that fits an int64: 1, or 0 when the text is
 * something else (json_parse then decides). */
static int plain_int(span sp, int64_t *out) {
  const char *p = sp.s, *e = sp.s + sp.n;
  int neg = p < e && *p == '-';
  p += neg;
  size_t n = (size_t)(e - p);
  if (n == 0 || n > 19 || (p[0] == '0' && n > 1)) return 0;
  uint64_t v = 0; /* 19 digits fit in 64 bits unsigned */
  for (; p < e; p++) {
    if (*p < '0' || *p > '9') return 0;
    v = v * 10 + (uint64_t)(*p - '0');
  }
  if (v > (uint64_t)INT64_MAX) return 0;
  *out = neg ? -(int64_t)v : (int64_t)v;
  return 1;
}

static int span_int64(arena *a, span sp, int64_t *out) {
  if (!sp.s) return 0;
  if (plain_int(sp, out)) return 1;
  value v = parse_span(a, sp);
  return int64_of(&v, out);
}

static int span_num(arena *a, span sp, double *out) {
  if (!sp.s) return 0;
  int64_t i;
  if (sp.n == 3 && sp.s[1] == '.' && sp.s[2] == '0' && (sp.s[0] == '0' || sp.s[0] == '1')) {
    *out = sp.s[0] == '1' ? 1.0 : 0.0;
    return 1;
  }
  if (plain_int(sp, &i) && i > -(1LL << 53) && i < (1LL << 53)) {
    *out = (double)i;
    return 1;
  }
  value v = parse_span(a, sp);
  return num(&v, out);
}

static uint64_t span_u64_or(arena *a, span sp, uint64_t dflt) {
  if (!sp.s) return dflt;
  int64_t i;
  if (plain_int(sp, &i)) return i > 0 ? (uint64_t)i : dflt;
  value v = parse_span(a, sp);
  return u64_or(&v, dflt);
}

static const char *str_or_null(arena *a, const value *v) {
  return v && v->kind == V_STRING ? arena_strndup(a, v->s, v->n) : NULL;
}

static int num(const value *v, double *out) {
  if (!v) return 0;
  switch (v->kind) {
    case V_INT:
      *out = (double)v->i;
      return 1;
    case V_UINT:
      *out = (double)v->u;
      return 1;
    case V_DOUBLE:
      *out = v->d;
      return 1;
    default:
      return 0;
  }
}

static int int64_of(const value *v, int64_t *out) {
  if (!v) return 0;
  if (v->kind == V_INT) {
    *out = v->i;
    return 1;
  }
  if (v->kind == V_UINT && v->u <= (uint64_t)INT64_MAX) {
    *out = (int64_t)v->u;
    return 1;
  }
  return 0;
}

static uint64_t u64_or(const value *v, uint64_t dflt) {
  if (v && v->kind == V_INT && v->i > 0) return (uint64_t)v->i;
  if (v && v->kind == V_UINT && v->u > 0) return v->u;
  return dflt;
}

static int str_eq(const char *a, const char *b) { return a == b || (a && b && strcmp(a, b) == 0); }

static int sides_same(const replay_side *a, const replay_side *b) {
  return str_eq(a->action, b->action) && a->allowed == b->allowed && str_eq(a->source, b->source) &&
         str_eq(a->rule, b->rule) && a->confidence == b->confidence &&
         str_eq(a->error_code, b->error_code) && str_eq(a->error_message, b->error_message);
}

/* The recorded version of a snapshot, from the store (NULL only when out
 * of memory). */
static version_entry *recorded_version(replayer *rp, const replay_item *it, const span *f) {
  const char *pv = it->recorded.policy_version;
  if (!pv) return NULL;
  static const mname model_names[] = {MNAME("version"), MNAME("features_version")};
  span model[2];
  index_object(f[F_MODEL].s, f[F_MODEL].n, model_names, 2, model);
  const char *mv = span_str(&rp->mem, model[0]), *fv = span_str(&rp->mem, model[1]);
  char mvb[65] = "", fvb[65] = "";
  if (mv) snprintf(mvb, sizeof mvb, "%s", mv);
  if (fv) snprintf(fvb, sizeof fvb, "%s", fv);
  return version_get(rp, pv, strlen(pv), mvb, fvb);
}

/* Decides the request under the reference version into rp->dref, for its
 * latency alone (rp->ref_us; 0 when it failed). */
static void time_reference(replayer *rp, version_entry *ref, const vd_engine_opts *lim,
                           const replay_item *it, int64_t clock_ns, int deadline,
                           const value *counters) {
  vd_error err;
  rp->ref_us = 0;
  uint64_t c0 = clock_cpu_ns();
  if (service_decide_json(ref->bundle, ref->names, lim, it->request_json, it->request_len, clock_ns,
                          deadline, counters, rp->dref, &err) == 0)
    rp->ref_us = (double)(clock_cpu_ns() - c0) / 1000.0;
}

/* The first rule the recorded decision tried (its trace) that reads a
 * field its strategy keeps out of snapshots, or NULL (strategy_snapshot.c
 * flags those rules): such a decision was made from a value the snapshot
 * does not hold. */
static const char *masked_read(arena *a, const policy_bundle *b, const char *name, span rules) {
  const strategy *s = NULL;
  for (uint32_t i = 0; i < b->nstrategies && !s; i++)
    if (b->nstrategies == 1 ||
        (name && b->strategies[i].name && !strcmp(b->strategies[i].name, name)))
      s = &b->strategies[i];
  if (!s || !s->rule_masked || !rules.s) return NULL;
  value v = parse_span(a, rules);
  if (v.kind != V_LIST) return NULL;
  for (uint32_t i = 0; i < v.n; i++) {
    const value *rn = value_map_get(&v.items[i], "rule", 4);
    const value *rr = value_map_get(&v.items[i], "result", 6);
    if (!rn || rn->kind != V_STRING || !rr || rr->kind != V_STRING ||
        (rr->n == 21 && !memcmp(rr->s, "skipped-not-candidate", 21)))
      continue;
    for (uint32_t k = 0; k < s->nrules; k++)
      if (s->rule_masked[k] && s->rules[k].name && strlen(s->rules[k].name) == rn->n &&
          !memcmp(s->rules[k].name, rn->s, rn->n))
        return s->rules[k].name;
  }
  return NULL;
}

/* Everything for one snapshot but the callback. Returns 0, or a negative
 * VD_E* code with rp->msg set (the item is then an error item). */
static int replay_one(replayer *rp, const snapshot_rec *rec, replay_item *it) {
  arena *a = &rp->mem;
  span f[F_COUNT];
  /* the trace's members in the same pass (for the completeness check) */
  static const mname trace_names[] = {MNAME("rules"), MNAME("matched")};
  span t[2];
  nested trace = {F_TRACE, trace_names, 2, t, 0};
  if (index_object_in(rec->payload, rec->payload_len, field_names, F_COUNT, f, &trace) != 0) {
    snprintf(rp->msg, sizeof rp->msg, "the snapshot's payload is not a JSON object");
    return VD_EJSON;
  }
  /* the members of the small objects (absent: s NULL, also when the member
   * is not an object) */
  static const mname reason_names[] = {MNAME("rule"), MNAME("message")},
                     lat_names[] = {MNAME("parse"), MNAME("decide"), MNAME("render"),
                                    MNAME("total")},
                     input_names[] = {MNAME("clock_ns"), MNAME("model_deadline_missed"),
                                      MNAME("counters"), MNAME("random")},
                     limit_names[] = {MNAME("cost"), MNAME("regex_match"), MNAME("memory"),
                                      MNAME("max_request_bytes")},
                     model_names[] = {MNAME("version"), MNAME("features_version")},
                     error_names[] = {MNAME("code"), MNAME("message")};
  span reason[2], lat[4], inputs[4], error[2];
  index_object(f[F_REASON].s, f[F_REASON].n, reason_names, 2, reason);
  index_object(f[F_LATENCY].s, f[F_LATENCY].n, lat_names, 4, lat);
  index_object(f[F_INPUTS].s, f[F_INPUTS].n, input_names, 4, inputs);
  index_object(f[F_ERROR].s, f[F_ERROR].n, error_names, 2, error);

  /* complete: every required member, and the required parts of a few */
  int complete = 1;
  for (int i = 0; i < F_COUNT; i++)
    if (field_required(i) && !f[i].s) complete = 0;
  if (complete) {
    complete = trace.found && t[0].s && t[1].s && reason[0].s && reason[1].s && lat[0].s &&
               lat[1].s && inputs[0].s && inputs[2].s && inputs[3].s;
  }
  it->complete = complete;

  /* the recorded side */
  replay_side *s = &it->recorded;
  s->action = span_str(a, f[F_ACTION]);
  s->allowed = span_true(f[F_ALLOWED]);
  s->review = span_true(f[F_REVIEW]);
  s->source = span_str(a, f[F_SOURCE]);
  s->rule = span_str(a, reason[0]);
  s->reason = span_str(a, reason[1]);
  s->confidence = 0;
  span_num(a, f[F_CONFIDENCE], &s->confidence);
  s->policy_version = span_str(a, f[F_POLICY_VERSION]);
  double ns = 0;
  span_num(a, lat[3], &ns);
  s->latency_us = ns / 1000.0;
  s->timing = lat[3].s ? REPLAY_TIMING_INPROCESS : REPLAY_TIMING_NONE;
  s->decision_id = it->id_text; /* the answer carried the snapshot's id */
  s->model_version = span_str(a, f[F_MODEL_VERSION]);
  const char *key = span_str(a, f[F_KEY]);
  if (key) it->key = key;
  it->side = span_str(a, f[F_SIDE]);
  it->completes = f[F_COMPLETES].s != NULL;
  /* a rollout's refusal: the candidate's error is its outcome */
  s->error_code = span_str(a, error[0]);
  s->error_message = s->error_code ? span_str(a, error[1]) : NULL;

  if (f[F_FORMAT].s && !(f[F_FORMAT].n == 1 && f[F_FORMAT].s[0] == '1')) {
    value v = parse_span(a, f[F_FORMAT]);
    if (!(v.kind == V_INT && v.i == 1)) {
      snprintf(rp->msg, sizeof rp->msg,
               "the snapshot is in format %s; this replay reads format 1 (docs/snapshots.md)",
               v.kind == V_INT ? "newer than 1" : "(not a number)");
      return VD_EINVAL;
    }
  }
  /* the request, as text (NUL-terminated for the callback) */
  if (!f[F_REQUEST].s || f[F_REQUEST].s[0] != '{') {
    snprintf(rp->msg, sizeof rp->msg, "the snapshot has no request to replay");
    return VD_EJSON;
  }
  char *req = arena_strndup(a, f[F_REQUEST].s, f[F_REQUEST].n);
  if (!req) {
    snprintf(rp->msg, sizeof rp->msg, "out of memory reading the snapshot");
    return VD_ENOMEM;
  }
  it->request_json = req;
  it->request_len = f[F_REQUEST].n;

  int64_t clock_ns;
  if (!span_int64(a, inputs[0], &clock_ns) && !span_int64(a, f[F_TIME_NS], &clock_ns)) {
    snprintf(rp->msg, sizeof rp->msg,
             "the snapshot records no clock reading (inputs.clock_ns): request.time cannot be "
             "fed back");
    return VD_EINVAL;
  }
  span lims[4];
  index_object(f[F_LIMITS].s, f[F_LIMITS].n, limit_names, 4, lims);
  /* the recorded limits (0, none recorded: the defaults) */
  vd_engine_opts lim;
  memset(&lim, 0, sizeof lim);
  lim.cost_limit = (unsigned long)span_u64_or(a, lims[0], 0);
  lim.regex_match_limit = (unsigned)span_u64_or(a, lims[1], 0);
  lim.memory_limit = (size_t)span_u64_or(a, lims[2], 0);
  lim.max_request_bytes = (size_t)span_u64_or(a, lims[3], 0);

  version_entry *ve, *ref = NULL;
  if (rp->opts->policy_dir) {
    ve = rp->candidate;
    if (rp->opts->time_reference) {
      ref = recorded_version(rp, it, f);
      if (ref && (!ref->bundle || !ref->names)) ref = NULL; /* not in the store: untimed */
    }
  } else {
    const char *pv = it->recorded.policy_version;
    if (!pv) {
      snprintf(rp->msg, sizeof rp->msg, "the snapshot names no policy_version to replay under");
      return VD_ENOTFOUND;
    }
    span model[2];
    index_object(f[F_MODEL].s, f[F_MODEL].n, model_names, 2, model);
    const char *mv = span_str(a, model[0]), *fv = span_str(a, model[1]);
    char mvb[65] = "", fvb[65] = "";
    if (mv) snprintf(mvb, sizeof mvb, "%s", mv);
    if (fv) snprintf(fvb, sizeof fvb, "%s", fv);
    ve = version_get(rp, pv, strlen(pv), mvb, fvb);
    if (!ve) {
      snprintf(rp->msg, sizeof rp->msg, "out of memory loading policy versions");
      return VD_ENOMEM;
    }
  }
  if (!ve->bundle || !ve->names) {
    snprintf(rp->msg, sizeof rp->msg, "%s", ve->error ? ve->error : "out of memory");
    return ve->bundle ? VD_ENOMEM : VD_ENOTFOUND;
  }

  /* The limits' counters as the decision read them (the live store is not
   * consulted: replay charges nothing); a limit the recording did not read
   * reads as an empty counter. */
  static const value no_counters = {.kind = V_MAP};
  value counters = no_counters;
  if (inputs[2].s && !(inputs[2].n == 2 && inputs[2].s[0] == '{' && inputs[2].s[1] == '}')) {
    counters = parse_span(a, inputs[2]);
    if (counters.kind != V_MAP) counters = no_counters;
  }
  vd_error err;
  /* The recorded version, decided beside the candidate on the same request
   * (first on every other snapshot, so neither side always finds the
   * caches warm): the two timings are then taken under the same load. */
  int ref_first = rp->nref++ & 1;
  if (ref && ref_first)
    time_reference(rp, ref, &lim, it, clock_ns, span_true(inputs[1]), &counters);
  uint64_t c0 = clock_cpu_ns();
  /* The model's deadline, as recorded (the clock decided it): replaying
   * the recorded policy takes that outcome; a candidate runs on the clock. */
  int deadline = rp->opts->policy_dir ? -1 : span_true(inputs[1]);
  int rc = service_decide_json(ve->bundle, ve->names, &lim, it->request_json, it->request_len,
                               clock_ns, deadline, &counters, rp->d, &err);
  it->cpu_ns = clock_cpu_ns() - c0;
  if (ref && !ref_first && rc == 0) {
    /* the reference decision must not overwrite the candidate's */
    time_reference(rp, ref, &lim, it, clock_ns, span_true(inputs[1]), &counters);
  }
  if (rc && it->recorded.error_code) { /* refused again: compared as the outcome it is */
    replay_side *r = &it->replayed;
    r->source = "error";
    r->policy_version = it->recorded.policy_version;
    r->latency_us = (double)it->cpu_ns / 1000.0; /* no decision: its time is the call's */
    r->timing = REPLAY_TIMING_INPROCESS;
    r->decision_id = it->recorded.decision_id;
    r->error_code = vd_err_name(rc);
    r->error_message = arena_strndup(a, err.message, strlen(err.message));
    return 0;
  }
  if (rc) {
    snprintf(rp->msg, sizeof rp->msg, "%s", err.message);
    return rc;
  }
  it->masked = masked_read(a, ve->bundle, span_str(a, f[F_STRATEGY]), t[0]);
  const vd_decision *d = rp->d;
  replay_side *r = &it->replayed;
  r->action = vd_decision_action(d);
  r->allowed = vd_decision_allowed(d);
  r->review = vd_decision_review(d);
  r->source = vd_decision_source(d);
  r->rule = vd_decision_rule(d);
  r->reason = vd_decision_reason(d);
  r->confidence = vd_decision_confidence(d);
  r->policy_version = vd_decision_policy_version(d);
  r->latency_us = vd_decision_latency_us(d);
  r->timing = REPLAY_TIMING_INPROCESS;
  if (ref) {
    r->cpu_us = (double)it->cpu_ns / 1000.0;
    r->reference_cpu_us = rp->ref_us;
  }
  r->model_version = vd_decision_model_version(d);
  /* Replay writes no snapshot, so the decision has no id of its own; the
   * engine deciding here is the one that recorded the live side, and it
   * names every decision by a snapshot id whenever it records, as the live
   * one did: the id is credited where the recorded decision has one. */
  r->decision_id = it->recorded.decision_id;
  return 0;
}

static void replayer_free(replayer *rp) {
  arena_free(&rp->mem);
  vd_decision_free(rp->d);
  vd_decision_free(rp->dref);
}

static int replayer_init(replayer *rp, const replay_opts *opts, version_cache *cache,
                         version_entry *candidate) {
  memset(rp, 0, sizeof *rp);
  rp->opts = opts;
  rp->cache = cache;
  rp->candidate = candidate;
  arena_init(&rp->mem, NULL, 0, 0);
  rp->d = vd_decision_new();
  rp->dref = vd_decision_new();
  return rp->d && rp->dref ? 0 : -1;
}

static void cache_free(version_cache *c) {
  for (size_t i = 0; i < c->nversions; i++) {
    entry_free(c->versions[i]);
    free(c->versions[i]);
  }
  free(c->versions);
  free(c->slots);
  free(c->store);
  free(c->own);
  pthread_mutex_destroy(&c->lock);
}

/* Where recorded versions are read: opts->store_dir, else `versions` beside
 * the snapshot folder (<bundle>/.verdict/snapshots -> <bundle>/.verdict/versions,
 * where `verdict decide` keeps both by default). */
static char *store_path(const replay_opts *o) {
  char *p;
  /* the engine's rule for the store of an engine recording here */
  if (service_store_path("", o->store_dir && o->store_dir[0] ? o->store_dir : NULL,
                         o->snapshots_dir, &p) != 0)
    return NULL;
  return p;
}

uint32_t replay_shard_of(const char *id_text, uint32_t count) {
  uint64_t h = 0xcbf29ce484222325u; /* FNV-1a 64: the offset basis and the prime */
  for (const unsigned char *p = (const unsigned char *)id_text; *p; p++)
    h = (h ^ *p) * 0x100000001b3u;
  return count ? (uint32_t)(h % count) : 0;
}

void replay_stats_count(replay_stats *st, const replay_item *it) {
  st->seen++;
  if (it->error) {
    st->errors++;
  } else {
    st->replayed++;
    if (it->masked)
      st->masked++;
    else if (it->same)
      st->reproduced++;
    else
      st->changed++;
  }
  if (!it->complete) st->incomplete++;
}

/* Decides one record into *it (strings in rp->mem, rp->d and rp->msg: valid
 * until the next record); id_text has room for SNAPSHOT_ID_TEXT. */
static void replay_record(replayer *rp, const snapshot_rec *rec, uint64_t seq, replay_item *it,
                          char *id_text) {
  arena_reset(&rp->mem);
  memset(it, 0, sizeof *it);
  snapshot_id_format(rec->id, id_text);
  it->id = rec->id;
  it->id_text = id_text;
  it->seq = seq;
  it->time_ns = rec->time_ns;
  it->point = arena_strndup(&rp->mem, rec->point, rec->point_len);
  it->key = "";
  it->request_json = "";
  rp->msg[0] = '\0';
  it->error = replay_one(rp, rec, it);
  if (it->error) {
    it->error_message = rp->msg;
    memset(&it->replayed, 0, sizeof it->replayed);
  } else {
    it->same = sides_same(&it->recorded, &it->replayed);
  }
  if (!it->point) it->point = "";
}

/* Whether an item is handed over: scoring a candidate, the traffic is the
 * answered decisions; the off-path one of a rollout is the same request
 * decided again. */
static int handed_over(const replay_opts *o, const replay_item *it) {
  return !(it->completes && o->policy_dir);
}

static int in_shard(const replay_opts *o, const uint8_t *id) {
  if (!o->shard_count) return 1;
  char text[SNAPSHOT_ID_TEXT];
  snapshot_id_format(id, text);
  return replay_shard_of(text, o->shard_count) == o->shard_index;
}

/* ---- in parallel ---- */

#define BATCH_PER_WORKER 256 /* records a batch holds per worker */
#define TAKE 8               /* records a worker takes at once */

typedef struct slot {
  snapshot_rec rec; /* its strings in the batch's buffer */
  size_t point_at, payload_at;
  uint64_t seq;
  char id_text[SNAPSHOT_ID_TEXT];
  replay_item it; /* the result, its strings in the deciding worker's arena */
} slot;

typedef struct batch {
  slot *slots;
  size_t n, cap;
  char *buf; /* the records' points and payloads */
  size_t len, bufcap;
  atomic_size_t next; /* the next slot to take */
  int finished;       /* workers done with it (pool lock) */
} batch;

typedef struct pool pool;

typedef struct worker {
  pool *p;
  replayer rp;
  arena keep[2]; /* the results of the batch in buffer 0 / 1 */
  pthread_t thread;
  int started;
} worker;

struct pool {
  pthread_mutex_t lock;
  pthread_cond_t work, done;
  uint64_t posted; /* batches posted so far; batch g is in buffer g & 1 */
  int quit;
  int nworkers;
  batch b[2];
  worker *w;
};

static char *keep_str(arena *a, const char *s, int *oom) {
  if (!s) return NULL;
  char *c = arena_strndup(a, s, strlen(s));
  if (!c) *oom = 1;
  return c;
}

static void keep_side(arena *a, replay_side *d, const replay_side *s, int *oom) {
  *d = *s;
  d->action = keep_str(a, s->action, oom);
  d->source = keep_str(a, s->source, oom);
  d->rule = keep_str(a, s->rule, oom);
  d->policy_version = keep_str(a, s->policy_version, oom);
  d->reason = keep_str(a, s->reason, oom);
  d->decision_id = keep_str(a, s->decision_id, oom);
  d->model_version = keep_str(a, s->model_version, oom);
}

/* The strings of *s copied into a (the id stays where it is): 0, or 1 when
 * out of memory. */
static int keep_strings(arena *a, replay_item *d, const replay_item *s) {
  int oom = 0;
  *d = *s;
  d->point = keep_str(a, s->point, &oom);
  d->key = keep_str(a, s->key, &oom);
  d->request_json = s->request_len ? arena_strndup(a, s->request_json, s->request_len) : "";
  if (!d->request_json) oom = 1;
  d->error_message = keep_str(a, s->error_message, &oom);
  d->masked = keep_str(a, s->masked, &oom);
  d->side = keep_str(a, s->side, &oom);
  keep_side(a, &d->recorded, &s->recorded, &oom);
  keep_side(a, &d->replayed, &s->replayed, &oom);
  return oom;
}

int replay_item_keep(arena *a, replay_item *d, const replay_item *s) {
  if (keep_strings(a, d, s)) return -1;
  uint8_t *id = s->id ? arena_memdup(a, s->id, 16) : NULL;
  char *text = s->id_text ? arena_strndup(a, s->id_text, strlen(s->id_text)) : NULL;
  if ((s->id && !id) || (s->id_text && !text)) return -1;
  d->id = id;
  d->id_text = text;
  return 0;
}

/* A copy of *s for the calling thread; out of memory, an error item. */
static void keep_item(arena *a, replay_item *d, const replay_item *s) {
  if (keep_strings(a, d, s)) { /* an error item, with nothing that needs memory */
    memset(d, 0, sizeof *d);
    d->id = s->id;
    d->id_text = s->id_text;
    d->seq = s->seq;
    d->time_ns = s->time_ns;
    d->point = d->key = d->request_json = "";
    d->error = VD_ENOMEM;
    d->error_message = "out of memory keeping the result";
  }
}

static void *worker_main(void *arg) {
  worker *w = arg;
  pool *p = w->p;
  for (uint64_t gen = 0;; gen++) {
    pthread_mutex_lock(&p->lock);
    while (p->posted <= gen && !p->quit) pthread_cond_wait(&p->work, &p->lock);
    int stop = p->posted <= gen;
    pthread_mutex_unlock(&p->lock);
    if (stop) break;
    batch *b = &p->b[gen & 1];
    arena *keep = &w->keep[gen & 1];
    arena_reset(keep);
    for (;;) {
      size_t i = atomic_fetch_add(&b->next, TAKE);
      if (i >= b->n) break;
      size_t end = i + TAKE < b->n ? i + TAKE : b->n;
      for (; i < end; i++) {
        slot *s = &b->slots[i];
        replay_item it;
        replay_record(&w->rp, &s->rec, s->seq, &it, s->id_text);
        keep_item(keep, &s->it, &it);
      }
    }
    pthread_mutex_lock(&p->lock);
    if (++b->finished == p->nworkers) pthread_cond_signal(&p->done);
    pthread_mutex_unlock(&p->lock);
  }
  return NULL;
}

/* Reads up to max records into b (copies). 1 the log went on, 0 it ended,
 * -1 reader error (message in err). */
static int batch_fill(batch *b, snapshot_reader *r, const replay_opts *o, size_t max,
                      uint64_t *passed, uint64_t *read_cap, char *err, size_t errlen) {
  b->n = b->len = 0;
  while (b->n < max) {
    if (read_cap && *read_cap == 0) return 0;
    snapshot_rec rec;
    int got = snapshot_reader_next(r, &rec);
    if (got < 0) return fail(err, errlen, "%s", snapshot_reader_error(r));
    if (got == 0) return 0;
    uint64_t seq = (*passed)++;
    if (!in_shard(o, rec.id)) continue;
    if (read_cap) (*read_cap)--;
    if (b->n == b->cap) {
      size_t cap = b->cap ? b->cap * 2 : 1024;
      slot *ns = realloc(b->slots, cap * sizeof *ns);
      if (!ns) return fail(err, errlen, "out of memory");
      b->slots = ns;
      b->cap = cap;
    }
    size_t need = rec.point_len + rec.payload_len + 2;
    if (b->len + need > b->bufcap) {
      size_t cap = b->bufcap ? b->bufcap : 1 << 20;
      while (b->len + need > cap) cap *= 2;
      char *nb = realloc(b->buf, cap);
      if (!nb) return fail(err, errlen, "out of memory");
      b->buf = nb;
      b->bufcap = cap;
    }
    slot *s = &b->slots[b->n++];
    s->rec = rec;
    s->seq = seq;
    s->point_at = b->len;
    memcpy(b->buf + b->len, rec.point, rec.point_len);
    b->len += rec.point_len;
    b->buf[b->len++] = '\0';
    s->payload_at = b->len;
    memcpy(b->buf + b->len, rec.payload, rec.payload_len);
    b->len += rec.payload_len;
    b->buf[b->len++] = '\0';
  }
  return 1;
}

static void batch_post(pool *p, batch *b) {
  atomic_store(&b->next, 0);
  b->finished = 0;
  pthread_mutex_lock(&p->lock);
  p->posted++;
  pthread_cond_broadcast(&p->work);
  pthread_mutex_unlock(&p->lock);
}

static void batch_wait(pool *p, batch *b) {
  pthread_mutex_lock(&p->lock);
  while (b->finished < p->nworkers) pthread_cond_wait(&p->done, &p->lock);
  pthread_mutex_unlock(&p->lock);
}

/* batch_fill, then the records pointed into the buffer (which may have
 * moved while it filled) */
static int fill(batch *b, snapshot_reader *r, const replay_opts *o, size_t max, uint64_t *passed,
                uint64_t *read_cap, char *err, size_t errlen) {
  int rc = batch_fill(b, r, o, max, passed, read_cap, err, errlen);
  for (size_t i = 0; i < b->n; i++) {
    b->slots[i].rec.point = b->buf + b->slots[i].point_at;
    b->slots[i].rec.payload = b->buf + b->slots[i].payload_at;
  }
  return rc;
}

static int run_parallel(const replay_opts *opts, version_cache *cache, version_entry *candidate,
                        snapshot_reader *r, replay_cb cb, void *user, replay_stats *stats,
                        char *err, size_t errlen) {
  int n = opts->workers > REPLAY_MAX_WORKERS ? REPLAY_MAX_WORKERS : opts->workers;
  pool p;
  memset(&p, 0, sizeof p);
  pthread_mutex_init(&p.lock, NULL);
  pthread_cond_init(&p.work, NULL);
  pthread_cond_init(&p.done, NULL);
  p.w = calloc((size_t)n, sizeof *p.w);
  int result = 0;
  if (!p.w) {
    result = fail(err, errlen, "out of memory");
    goto out;
  }
  for (int i = 0; i < n; i++) {
    worker *w = &p.w[i];
    w->p = &p;
    arena_init(&w->keep[0], NULL, 0, 0);
    arena_init(&w->keep[1], NULL, 0, 0);
    if (replayer_init(&w->rp, opts, cache, candidate) != 0) {
      result = fail(err, errlen, "out of memory");
      goto stop;
    }
    if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
      result = fail(err, errlen, "cannot start replay worker %d: %s", i + 1, strerror(errno));
      goto stop;
    }
    w->started = 1;
    p.nworkers++;
  }
  {
    /* Without a candidate every record read is handed over: a limit is then
     * a cap on reading too. */
    uint64_t cap = opts->limit, *read_cap = opts->limit && !opts->policy_dir ? &cap : NULL;
    size_t max = (size_t)n * BATCH_PER_WORKER;
    char rerr[1024] = "";
    int cur = 0, more = fill(&p.b[0], r, opts, max, &stats->passed, read_cap, rerr, sizeof rerr);
    int posted = p.b[0].n > 0, stopped = 0;
    if (posted) batch_post(&p, &p.b[0]);
    while (posted) {
      int nxt = cur ^ 1, posted_next = 0;
      if (more == 1 && !stopped) {
        more = fill(&p.b[nxt], r, opts, max, &stats->passed, read_cap, rerr, sizeof rerr);
        if (p.b[nxt].n) {
          batch_post(&p, &p.b[nxt]);
          posted_next = 1;
        }
      }
      batch_wait(&p, &p.b[cur]);
      for (size_t i = 0; i < p.b[cur].n && !stopped; i++) {
        const replay_item *it = &p.b[cur].slots[i].it;
        if (opts->limit && stats->seen >= opts->limit) {
          stopped = 1;
          break;
        }
        if (!handed_over(opts, it)) continue;
        replay_stats_count(stats, it);
        if (cb && cb(user, it)) stopped = 1;
      }
      cur = nxt;
      posted = posted_next;
    }
    if (more < 0 && !stopped) result = fail(err, errlen, "%s", rerr);
  }
stop:
  pthread_mutex_lock(&p.lock);
  p.quit = 1;
  pthread_cond_broadcast(&p.work);
  pthread_mutex_unlock(&p.lock);
  for (int i = 0; i < n; i++) {
    if (p.w[i].started) pthread_join(p.w[i].thread, NULL);
    replayer_free(&p.w[i].rp);
    arena_free(&p.w[i].keep[0]);
    arena_free(&p.w[i].keep[1]);
  }
out:
  free(p.w);
  for (int i = 0; i < 2; i++) {
    free(p.b[i].slots);
    free(p.b[i].buf);
  }
  pthread_cond_destroy(&p.work);
  pthread_cond_destroy(&p.done);
  pthread_mutex_destroy(&p.lock);
  return result;
}

/* ---- the walk ---- */

static int run_serial(const replay_opts *opts, version_cache *cache, version_entry *candidate,
                      snapshot_reader *r, replay_cb cb, void *user, replay_stats *stats,
                      char *err, size_t errlen) {
  replayer rp;
  if (replayer_init(&rp, opts, cache, candidate) != 0) {
    replayer_free(&rp);
    return fail(err, errlen, "out of memory");
  }
  int result = 0;
  snapshot_rec rec;
  for (;;) {
    if (opts->limit && stats->seen >= opts->limit) break;
    int got = snapshot_reader_next(r, &rec);
    if (got < 0) {
      result = fail(err, errlen, "%s", snapshot_reader_error(r));
      break;
    }
    if (got == 0) break;
    uint64_t seq = stats->passed++;
    if (!in_shard(opts, rec.id)) continue;
    replay_item it;
    char id_text[SNAPSHOT_ID_TEXT];
    replay_record(&rp, &rec, seq, &it, id_text);
    if (!handed_over(opts, &it)) continue;
    replay_stats_count(stats, &it);
    if (cb && cb(user, &it)) break;
  }
  replayer_free(&rp);
  return result;
}

int replay_run(const replay_opts *opts, replay_cb cb, void *user, replay_stats *stats, char *err,
               size_t errlen) {
  replay_stats local;
  if (!stats) stats = &local;
  memset(stats, 0, sizeof *stats);
  if (err && errlen) err[0] = '\0';
  if (!opts || !opts->snapshots_dir || !opts->snapshots_dir[0])
    return fail(err, errlen, "no snapshot folder given");
  if (opts->shard_count && opts->shard_index >= opts->shard_count)
    return fail(err, errlen, "shard %u of %u: the index must be below the count",
                opts->shard_index, opts->shard_count);

  snapshot_filter f;
  snapshot_filter_init(&f);
  f.since_ns = opts->since_ns;
  f.until_ns = opts->until_ns;
  f.point = opts->point;
  f.action = opts->action;
  f.policy_version = opts->policy_version;
  if (opts->source) {
    f.source = snapshot_source_parse(opts->source, strlen(opts->source));
    if (f.source < 0)
      return fail(err, errlen, "unknown source '%s' (rule, model, default or error)", opts->source);
  }

  version_cache cache;
  memset(&cache, 0, sizeof cache);
  pthread_mutex_init(&cache.lock, NULL);
  version_entry candidate;
  memset(&candidate, 0, sizeof candidate);
  cache.store = store_path(opts);
  cache.own = snapshot_versions_path(opts->snapshots_dir);
  int result = 0;
  if (!cache.store || !cache.own) {
    result = fail(err, errlen, "out of memory");
    goto out;
  }
  if (opts->policy_dir) {
    policy_load_opts lo = {.store_dir = ""}; /* replay writes nothing */
    policy_diags dg;
    memset(&dg, 0, sizeof dg);
    if (policy_bundle_load(opts->policy_dir, &lo, &candidate.bundle, &dg) != 0 ||
        !candidate.bundle) {
      char *m = diags_message(opts->policy_dir, &dg);
      fail(err, errlen, "the bundle %s", m ? m : "does not load");
      free(m);
      policy_diags_free(&dg);
      result = -1;
      goto out;
    }
    policy_diags_free(&dg);
    snprintf(stats->policy_version, sizeof stats->policy_version, "%s", candidate.bundle->version);
    arena_init(&candidate.mem, NULL, 0, 0);
    candidate.names = service_names_build(&candidate.mem, candidate.bundle);
    if (!candidate.names) {
      result = fail(err, errlen, "out of memory");
      goto out;
    }
  }

  snapshot_reader *r;
  char rerr[SNAPSHOT_ERRLEN];
  if (snapshot_reader_open(opts->snapshots_dir, &f, &r, rerr, sizeof rerr) != 0) {
    result = fail(err, errlen, "%s", rerr);
    goto out;
  }
  result = opts->workers > 1
               ? run_parallel(opts, &cache, &candidate, r, cb, user, stats, err, errlen)
               : run_serial(opts, &cache, &candidate, r, cb, user, stats, err, errlen);
  snapshot_reader_close(r);
out:
  entry_free(&candidate);
  cache_free(&cache);
  return result;
}
