/* builder.c — a request's context built from values, event by event
 * (vd_builder in verdict.h), for callers that hold the context as their own
 * language's objects and would otherwise write JSON only for it to be read
 * again.
 *
 * The builder is the JSON reader's second half without the text: the same
 * explicit stack of finished values (an open map holds key, value, key, ...)
 * and of open containers, a container's items copied into one arena block
 * of the exact size when it closes, duplicate keys refused when their map
 * closes (json_find_duplicate, the reader's own check). What comes out is
 * what json_parse would make of the context's JSON text: the same kinds (an
 * unsigned number up to INT64_MAX is an int, as the text "5" reads), the
 * same VF_ASCII flags, the same refusals (invalid UTF-8, NaN, nesting), so
 * a decision made from it equals one made from the text, and the snapshot,
 * which records the context as JSON written from these values, replays to
 * the same values.
 *
 * It also counts the context's size as compact JSON while building (doubles
 * at their longest form, 24 bytes), so that vd_decide_built holds it to
 * max_request_bytes like a JSON request without writing it. Strings and keys
 * are copied into the builder's arena: the caller's memory is not kept. The
 * arena and the stacks are kept by vd_builder_reset, so a builder that is
 * reused allocates nothing once warm. */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/json_scan.h"
#include "core/utf8.h"
#include "engine/engine.h"

/* A JSON request allows 512 levels (json_parse's default), and a context is
 * one level inside the request: deeper, its snapshot's request would not
 * read back in replay. */
#define BUILD_MAX_DEPTH 511
/* The longest text json_write_double writes for a finite double. */
#define DOUBLE_JSON_MAX 24

typedef struct bframe {
  size_t start; /* first stack slot of this container's items */
  int is_map;
} bframe;

struct vd_builder {
  arena mem;  /* copied strings and closed containers */
  value *stk; /* finished values; an open map holds key, value, key, ... */
  size_t nstk, capstk;
  bframe *fr; /* open containers, outermost first */
  size_t nfr, capfr;
  size_t bytes;       /* the built value's size as compact JSON so far */
  int done;           /* stk[0] is a complete root value */
  int failed;         /* the code of the refused event, 0 while none */
  char what[768];     /* that event's error, without its place */
  char err_path[256]; /* and its place */
  char path[256];     /* vd_builder_path's answer */
};

vd_builder *vd_builder_new(void) {
  vd_builder *b = calloc(1, sizeof *b);
  if (!b) return NULL;
  arena_init(&b->mem, NULL, 0, 0);
  b->capstk = 64;
  b->capfr = 16;
  b->stk = malloc(b->capstk * sizeof *b->stk);
  b->fr = malloc(b->capfr * sizeof *b->fr);
  if (!b->stk || !b->fr) {
    vd_builder_free(b);
    return NULL;
  }
  return b;
}

void vd_builder_reset(vd_builder *b) {
  if (!b) return;
  arena_reset(&b->mem);
  b->nstk = b->nfr = b->bytes = 0;
  b->done = b->failed = 0;
  b->what[0] = b->err_path[0] = '\0';
}

void vd_builder_free(vd_builder *b) {
  if (!b) return;
  arena_free(&b->mem);
  free(b->stk);
  free(b->fr);
  free(b);
}

/* ---- places ---- */

/* Appends ".name", or ["any text"] for a key that is not an identifier, to
 * out (len bytes used of cap); a piece that does not fit ends the path with
 * "...". */
static size_t put_key(char *out, size_t len, size_t cap, const value *k) {
  char piece[200];
  if (request_is_ident(k->s, k->n) && k->n < 64) {
    snprintf(piece, sizeof piece, ".%.*s", (int)k->n, k->s);
  } else {
    char q[160];
    snprintf(piece, sizeof piece, "[\"%s\"]", json_quote_text(q, sizeof q, k->s, k->n, 64));
  }
  size_t n = strlen(piece);
  if (len + n + 4 > cap) {
    if (len + 4 <= cap) memcpy(out + len, "...", 4);
    return cap;
  }
  memcpy(out + len, piece, n + 1);
  return len + n;
}

/* The path of the place the next event fills (with_next: the element an
 * open list is due next, or the key a map was given) into out. extra: a key
 * to add after it (a duplicate key's own place). */
static void build_path(const vd_builder *b, int with_next, const value *extra, char *out,
                       size_t cap) {
  size_t len = 1;
  memcpy(out, "$", 2);
  for (size_t i = 0; i < b->nfr && len < cap; i++) {
    const bframe *f = &b->fr[i];
    size_t count = (i + 1 < b->nfr ? b->fr[i + 1].start : b->nstk) - f->start;
    int inner = i + 1 == b->nfr;
    if (f->is_map) {
      if (count % 2 == 1 && (!inner || with_next))
        len = put_key(out, len, cap, &b->stk[f->start + count - 1]);
    } else if (!inner || with_next) {
      char piece[32];
      int n = snprintf(piece, sizeof piece, "[%zu]", count);
      if (len + (size_t)n + 4 > cap) {
        memcpy(out + len, "...", 4);
        len = cap;
      } else {
        memcpy(out + len, piece, (size_t)n + 1);
        len += (size_t)n;
      }
    }
  }
  if (extra && len < cap) put_key(out, len, cap, extra);
}

const char *vd_builder_path(vd_builder *b) {
  if (!b) return "$";
  build_path(b, 1, NULL, b->path, sizeof b->path);
  return b->path;
}

static int fail(vd_builder *b, int code, int with_next, const value *extra, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Refuses the event: the builder stays failed until reset. */
static __attribute__((noinline)) int fail(vd_builder *b, int code, int with_next,
                                          const value *extra, const char *fmt, ...) {
  build_path(b, with_next, extra, b->err_path, sizeof b->err_path);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(b->what, sizeof b->what, fmt, ap);
  va_end(ap);
  b->failed = code;
  return code;
}

int vd_builder_error(const vd_builder *b, vd_error *err) {
  if (!b || !b->failed) {
    if (err) error_clear(err);
    return 0;
  }
  return engine_error(err, b->failed, 0, 0, b->err_path, "%s: %s", b->err_path, b->what);
}

/* ---- the stacks ---- */

static int grow(vd_builder *b, void **p, size_t *cap, size_t elem) {
  size_t ncap = *cap * 2;
  void *q = ncap <= SIZE_MAX / elem ? realloc(*p, ncap * elem) : NULL;
  if (!q) return fail(b, VD_ENOMEM, 1, NULL, "out of memory building the context");
  *p = q;
  *cap = ncap;
  return 0;
}

static inline int push(vd_builder *b, value v) {
  if (b->nstk == b->capstk) {
    int rc = grow(b, (void **)&b->stk, &b->capstk, sizeof *b->stk);
    if (rc) return rc;
  }
  b->stk[b->nstk++] = v;
  return 0;
}

/* May a value go where the builder stands? Counts the separator before it. */
static inline int value_due(vd_builder *b, const char *what) {
  if (!b) return VD_EINVAL;
  if (b->failed) return b->failed;
  if (b->nfr == 0) {
    if (b->done)
      return fail(b, VD_EREQUEST, 1, NULL,
                  "%s after the complete value already built (vd_builder_reset first)", what);
    return 0;
  }
  const bframe *f = &b->fr[b->nfr - 1];
  size_t count = b->nstk - f->start;
  if (f->is_map) {
    if (count % 2 == 0)
      return fail(b, VD_EREQUEST, 1, NULL, "%s where a key is due (vd_build_key first)", what);
  } else if (count) {
    b->bytes++; /* ',' */
  }
  return 0;
}

static inline int put_value(vd_builder *b, value v, size_t json_bytes) {
  int rc = push(b, v);
  if (rc) return rc;
  b->bytes += json_bytes;
  if (b->nfr == 0) b->done = 1;
  return 0;
}

/* ---- scalars ---- */

static size_t u64_digits(uint64_t u) {
  size_t n = 1;
  while (u >= 10) {
    u /= 10;
    n++;
  }
  return n;
}

int vd_build_null(vd_builder *b) {
  int rc = value_due(b, "a value");
  return rc ? rc : put_value(b, value_null(), 4);
}

int vd_build_bool(vd_builder *b, int v) {
  int rc = value_due(b, "a value");
  return rc ? rc : put_value(b, value_bool(v != 0), v ? 4 : 5);
}

int vd_build_int(vd_builder *b, int64_t v) {
  int rc = value_due(b, "a value");
  if (rc) return rc;
  size_t n = v < 0 ? 1 + u64_digits((uint64_t)0 - (uint64_t)v) : u64_digits((uint64_t)v);
  return put_value(b, value_int(v), n);
}

int vd_build_uint(vd_builder *b, uint64_t v) {
  int rc = value_due(b, "a value");
  if (rc) return rc;
  /* the JSON text of v reads as an int when it fits one */
  return put_value(b, v <= INT64_MAX ? value_int((int64_t)v) : value_uint(v), u64_digits(v));
}

int vd_build_double(vd_builder *b, double v) {
  int rc = value_due(b, "a value");
  if (rc) return rc;
  if (!isfinite(v))
    return fail(b, VD_EREQUEST, 1, NULL, "%s is not a JSON number (a request cannot carry it)",
                isnan(v) ? "NaN"
                : v > 0  ? "Infinity"
                         : "-Infinity");
  return put_value(b, value_double(v), DOUBLE_JSON_MAX);
}

/* arena_alloc's fast path, inline, for bytes (strings need no alignment):
 * a new chunk is arena_alloc's. */
static inline void *bump(arena *a, size_t size) {
  if (a->ptr && (size_t)(a->end - a->ptr) >= size) {
    void *p = a->ptr;
    a->ptr += size;
    a->used += size;
    return p;
  }
  return arena_alloc(a, size);
}

/* s[0..n) checked and copied into the arena as a string value; *json_bytes
 * its size as a JSON string literal (json_write_string's escapes). */
static int copy_string(vd_builder *b, const char *s, size_t n, const char *what, value *out,
                       size_t *json_bytes) {
  if (n > UINT32_MAX) return fail(b, VD_ELIMIT, 1, NULL, "%s is longer than 4 GiB", what);
  if (n && !s) return fail(b, VD_EREQUEST, 1, NULL, "%s is NULL with a length of %zu", what, n);
  /* Plain printable ASCII, the usual case, in one vectorised pass: no
   * escape to count and nothing to validate. */
  int ascii = 1;
  size_t esc = 0;
  if (skip_plain(s, s + n) != s + n) {
    size_t bad = utf8_validate(s, n, &ascii);
    if (bad != n)
      return fail(b, VD_EREQUEST, 1, NULL, "%s is not valid UTF-8 (byte %zu)", what, bad);
    for (size_t i = 0; i < n; i++) {
      unsigned char c = (unsigned char)s[i];
      if (c < 0x20)
        esc += 5; /* \u00XX at most */
      else if (c == '"' || c == '\\')
        esc++;
    }
  }
  char *copy = (char *)"";
  if (n) {
    copy = bump(&b->mem, n);
    if (!copy) return fail(b, VD_ENOMEM, 1, NULL, "out of memory building the context");
    memcpy(copy, s, n);
  }
  *out = value_str(copy, (uint32_t)n);
  if (ascii) out->flags |= VF_ASCII;
  *json_bytes = n + esc + 2;
  return 0;
}

int vd_build_string(vd_builder *b, const char *s, size_t n) {
  int rc = value_due(b, "a value");
  if (rc) return rc;
  value v;
  size_t len;
  if ((rc = copy_string(b, s, n, "the string", &v, &len))) return rc;
  return put_value(b, v, len);
}

int vd_build_key(vd_builder *b, const char *s, size_t n) {
  if (!b) return VD_EINVAL;
  if (b->failed) return b->failed;
  const bframe *f = b->nfr ? &b->fr[b->nfr - 1] : NULL;
  if (!f || !f->is_map)
    return fail(b, VD_EREQUEST, 1, NULL, "a key outside a map (vd_build_map_begin first)");
  size_t count = b->nstk - f->start;
  if (count % 2 == 1)
    return fail(b, VD_EREQUEST, 1, NULL,
                "a key where the value of the key before it is due (a value first)");
  value k;
  size_t len;
  int rc = copy_string(b, s, n, "the key", &k, &len);
  if (rc) return rc;
  if (count / 2 >= UINT32_MAX)
    return fail(b, VD_ELIMIT, 0, NULL, "more than 2^32-1 members in one map");
  if ((rc = push(b, k))) return rc;
  b->bytes += len + 1 + (count ? 1 : 0); /* "key": and the ',' before it */
  return 0;
}

/* ---- containers ---- */

static int open_container(vd_builder *b, int is_map) {
  int rc = value_due(b, is_map ? "a map" : "a list");
  if (rc) return rc;
  if (b->nfr >= BUILD_MAX_DEPTH)
    return fail(b, VD_ELIMIT, 1, NULL,
                "nesting deeper than the limit of %d levels (a JSON request's context)",
                BUILD_MAX_DEPTH);
  if (b->nfr == b->capfr && (rc = grow(b, (void **)&b->fr, &b->capfr, sizeof *b->fr))) return rc;
  /* a free slot for the container's value when it closes empty */
  if (b->nstk == b->capstk && (rc = grow(b, (void **)&b->stk, &b->capstk, sizeof *b->stk)))
    return rc;
  bframe *f = &b->fr[b->nfr++];
  f->start = b->nstk;
  f->is_map = is_map;
  b->bytes += 2; /* the brackets */
  return 0;
}

int vd_build_map_begin(vd_builder *b) { return b ? open_container(b, 1) : VD_EINVAL; }
int vd_build_list_begin(vd_builder *b) { return b ? open_container(b, 0) : VD_EINVAL; }

static int close_container(vd_builder *b, int is_map) {
  if (b->failed) return b->failed;
  const char *fn = is_map ? "vd_build_map_end" : "vd_build_list_end";
  if (b->nfr == 0)
    return fail(b, VD_EREQUEST, 1, NULL, "%s with no %s open", fn, is_map ? "map" : "list");
  bframe *f = &b->fr[b->nfr - 1];
  if (f->is_map != is_map)
    return fail(b, VD_EREQUEST, 0, NULL, "%s where a %s is open", fn, f->is_map ? "map" : "list");
  size_t n = b->nstk - f->start;
  value v;
  if (is_map) {
    if (n % 2 == 1)
      return fail(b, VD_EREQUEST, 1, NULL, "the map ends where the value of this key is due");
    n /= 2;
    const map_entry *e = (const map_entry *)(b->stk + f->start);
    size_t first, dup;
    int found = json_find_duplicate(e, n, &first, &dup);
    if (found < 0) return fail(b, VD_ENOMEM, 0, NULL, "out of memory building the context");
    if (found) {
      char kq[160];
      return fail(b, VD_EREQUEST, 0, &e[dup].key,
                  "duplicate key \"%s\" (entry %zu repeats entry %zu of the map); give each "
                  "key once",
                  json_quote_text(kq, sizeof kq, e[dup].key.s, e[dup].key.n, 64), dup, first);
    }
    map_entry *copy = NULL;
    if (n) {
      copy = arena_memdup(&b->mem, e, n * sizeof *copy);
      if (!copy) return fail(b, VD_ENOMEM, 0, NULL, "out of memory building the context");
    }
    v = value_map(copy, (uint32_t)n);
  } else {
    if (n > UINT32_MAX) return fail(b, VD_ELIMIT, 0, NULL, "more than 2^32-1 items in one list");
    value *copy = NULL;
    if (n) {
      copy = arena_memdup(&b->mem, b->stk + f->start, n * sizeof *copy);
      if (!copy) return fail(b, VD_ENOMEM, 0, NULL, "out of memory building the context");
    }
    v = value_list(copy, (uint32_t)n);
  }
  b->nstk = f->start;
  b->nfr--;
  b->stk[b->nstk++] = v; /* the slot its first item had, or the one the frame kept */
  if (b->nfr == 0) b->done = 1;
  return 0;
}

int vd_build_map_end(vd_builder *b) { return b ? close_container(b, 1) : VD_EINVAL; }
int vd_build_list_end(vd_builder *b) { return b ? close_container(b, 0) : VD_EINVAL; }

/* ---- for vd_decide_built ---- */

int builder_context(const vd_builder *b, value *root, size_t *json_bytes, vd_error *err) {
  if (b->failed) {
    char path[256 + 16];
    snprintf(path, sizeof path, "$.context%s", b->err_path + 1);
    return engine_error(err, b->failed, 0, 0, path, "%s: %s", path, b->what);
  }
  if (b->nfr)
    return engine_error(err, VD_EREQUEST, 0, 0, "$.context",
                        "$.context is not complete: %zu map(s) or list(s) are still open", b->nfr);
  if (!b->done)
    return engine_error(err, VD_EREQUEST, 0, 0, "$.context",
                        "$.context: the builder holds nothing (build a map first)");
  *root = b->stk[0];
  *json_bytes = b->bytes;
  return 0;
}
