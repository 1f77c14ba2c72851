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
 * Nothing is written: no snapshots, no version store. Not here: scoring,
 * diffs and reports (score.c, report.c), which are built on the callback. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
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

typedef struct replayer {
  const replay_opts *opts;
  char *own;   /* the snapshot folder's own versions (looked in first) */
  char *store; /* where recorded versions are read from otherwise */
  version_entry *versions;
  size_t nversions, cap;
  uint32_t *slots;     /* versions by hash (entry_hash): index + 1, 0 empty */
  size_t nslots;       /* a power of two, at least twice nversions */
  version_entry *last; /* the version the previous snapshot used */
  version_entry candidate;
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
static const char *version_dir(const replayer *rp, const char *name) {
  char path[4400];
  snprintf(path, sizeof path, "%s/%s", rp->own, name);
  return access(path, R_OK) == 0 ? rp->own : rp->store;
}

static void version_load(replayer *rp, version_entry *v) {
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

static void slots_put(replayer *rp, size_t index) {
  const version_entry *v = &rp->versions[index];
  size_t i = entry_hash(v->version, strlen(v->version), v->model, v->features);
  while (rp->slots[i & (rp->nslots - 1)]) i++;
  rp->slots[i & (rp->nslots - 1)] = (uint32_t)index + 1;
}

static version_entry *version_get(replayer *rp, const char *ver, size_t n, const char *mv,
                                  const char *fv) {
  if (rp->last && entry_is(rp->last, ver, n, mv, fv)) return rp->last;
  for (size_t i = rp->nslots ? entry_hash(ver, n, mv, fv) : 0; rp->nslots; i++) {
    uint32_t at = rp->slots[i & (rp->nslots - 1)];
    if (!at) break;
    if (entry_is(&rp->versions[at - 1], ver, n, mv, fv)) return rp->last = &rp->versions[at - 1];
  }
  if (rp->nversions == rp->cap) {
    size_t cap = rp->cap ? rp->cap * 2 : 8;
    version_entry *nv = cap < UINT32_MAX ? realloc(rp->versions, cap * sizeof *nv) : NULL;
    uint32_t *ns = nv ? calloc(2 * cap, sizeof *ns) : NULL;
    if (nv) rp->versions = nv;
    if (!ns) return NULL;
    free(rp->slots);
    rp->slots = ns;
    rp->nslots = 2 * cap;
    rp->cap = cap;
    for (size_t i = 0; i < rp->nversions; i++) slots_put(rp, i);
  }
  version_entry *v = &rp->versions[rp->nversions++];
  memset(v, 0, sizeof *v);
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
  slots_put(rp, (size_t)(v - rp->versions));
  rp->last = NULL; /* realloc may have moved the entries */
  return rp->last = v;
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
    ve = &rp->candidate;
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
  for (size_t i = 0; i < rp->nversions; i++) entry_free(&rp->versions[i]);
  free(rp->versions);
  free(rp->slots);
  entry_free(&rp->candidate);
  arena_free(&rp->mem);
  vd_decision_free(rp->d);
  vd_decision_free(rp->dref);
  free(rp->store);
  free(rp->own);
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

int replay_run(const replay_opts *opts, replay_cb cb, void *user, replay_stats *stats, char *err,
               size_t errlen) {
  replay_stats local;
  if (!stats) stats = &local;
  memset(stats, 0, sizeof *stats);
  if (err && errlen) err[0] = '\0';
  if (!opts || !opts->snapshots_dir || !opts->snapshots_dir[0])
    return fail(err, errlen, "no snapshot folder given");

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

  replayer rp;
  memset(&rp, 0, sizeof rp);
  rp.opts = opts;
  arena_init(&rp.mem, NULL, 0, 0);
  rp.d = vd_decision_new();
  rp.dref = vd_decision_new();
  rp.store = store_path(opts);
  rp.own = snapshot_versions_path(opts->snapshots_dir);
  if (!rp.d || !rp.dref || !rp.store || !rp.own) {
    replayer_free(&rp);
    return fail(err, errlen, "out of memory");
  }
  if (opts->policy_dir) {
    policy_load_opts lo = {.store_dir = ""}; /* replay writes nothing */
    policy_diags dg;
    memset(&dg, 0, sizeof dg);
    if (policy_bundle_load(opts->policy_dir, &lo, &rp.candidate.bundle, &dg) != 0 ||
        !rp.candidate.bundle) {
      char *m = diags_message(opts->policy_dir, &dg);
      fail(err, errlen, "the bundle %s", m ? m : "does not load");
      free(m);
      policy_diags_free(&dg);
      replayer_free(&rp);
      return -1;
    }
    policy_diags_free(&dg);
    arena_init(&rp.candidate.mem, NULL, 0, 0);
    rp.candidate.names = service_names_build(&rp.candidate.mem, rp.candidate.bundle);
    if (!rp.candidate.names) {
      replayer_free(&rp);
      return fail(err, errlen, "out of memory");
    }
  }

  snapshot_reader *r;
  char rerr[SNAPSHOT_ERRLEN];
  if (snapshot_reader_open(opts->snapshots_dir, &f, &r, rerr, sizeof rerr) != 0) {
    replayer_free(&rp);
    return fail(err, errlen, "%s", rerr);
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
    stats->seen++;
    arena_reset(&rp.mem);
    replay_item it;
    memset(&it, 0, sizeof it);
    char id_text[SNAPSHOT_ID_TEXT];
    snapshot_id_format(rec.id, id_text);
    it.id = rec.id;
    it.id_text = id_text;
    it.time_ns = rec.time_ns;
    it.point = arena_strndup(&rp.mem, rec.point, rec.point_len);
    it.key = "";
    it.request_json = "";
    rp.msg[0] = '\0';
    it.error = replay_one(&rp, &rec, &it);
    if (it.completes && opts->policy_dir) {
      /* scoring a candidate: the traffic is the answered decisions; the
       * off-path one of a rollout is the same request decided again */
      stats->seen--;
      continue;
    }
    if (it.error) {
      it.error_message = rp.msg;
      memset(&it.replayed, 0, sizeof it.replayed);
      stats->errors++;
    } else {
      stats->replayed++;
      it.same = sides_same(&it.recorded, &it.replayed);
      if (it.masked)
        stats->masked++;
      else if (it.same)
        stats->reproduced++;
      else
        stats->changed++;
    }
    if (!it.complete) stats->incomplete++;
    if (!it.point) it.point = "";
    if (cb && cb(user, &it)) break;
  }
  snapshot_reader_close(r);
  replayer_free(&rp);
  return result;
}
