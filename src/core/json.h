/* json.h — the one JSON module of verdict: a reader into arena values and a
 * writer from them. Used for requests, decisions, snapshots, model files and
 * test data.
 *
 * Reader: RFC 8259. Objects become V_MAP (entries in document order), arrays
 * V_LIST, strings V_STRING (escapes decoded, UTF-8 validated), integers V_INT
 * when they fit int64, V_UINT when they fit only uint64, V_DOUBLE otherwise
 * (and for any number with a fraction or exponent). Limits on depth and
 * input size. Lenient mode also accepts the bare tokens NaN, Infinity and
 * -Infinity (XGBoost writes them). Duplicate object keys: the last one wins
 * on lookup? No: they are kept as written; see json.c for the policy.
 *
 * Errors name the byte offset, line, column and the JSON path of the place
 * (`$.context.items[3].name`).
 *
 * Writer: compact JSON from a value. Doubles are printed with the shortest
 * representation that reads back to the same double; NaN/Infinity are
 * written as bare tokens only in lenient mode (otherwise as null? no: as an
 * error). Timestamps and durations are written as RFC 3339 / "1.5s" strings,
 * bytes as base64 strings. */
#ifndef VD_CORE_JSON_H
#define VD_CORE_JSON_H

#include <stddef.h>

#include "core/arena.h"
#include "core/value.h"

typedef struct json_opts {
  size_t max_depth; /* 0 = default (512) */
  size_t max_size;  /* 0 = default (64 MiB) */
  int lenient;      /* accept NaN, Infinity, -Infinity */
} json_opts;

typedef struct json_error {
  size_t offset; /* byte offset of the problem */
  int line;      /* 1-based */
  int column;    /* 1-based, in bytes */
  char path[256];    /* JSON path of the value being read, e.g. $.a[2].b */
  char message[256]; /* what was wrong */
} json_error;

/* Parses buf[0..len) into *out (allocated from a). Returns 0, or -1 with err
 * filled. opts may be NULL. Trailing whitespace is allowed; anything else after
 * the value is an error. */
int json_parse(arena *a, const char *buf, size_t len, const json_opts *opts, value *out,
               json_error *err);

/* Growable output buffer (malloc-backed unless an arena is given). */
typedef struct json_buf {
  char *data;
  size_t len;
  size_t cap;
  arena *arena; /* when set, storage comes from the arena */
  int oom;      /* set when growing failed; contents are then truncated */
} json_buf;

void json_buf_init(json_buf *b, arena *a);
void json_buf_free(json_buf *b); /* no-op for arena buffers */
void json_buf_put(json_buf *b, const char *s, size_t len);
void json_buf_putc(json_buf *b, char c);

/* Appends the JSON text of v. Returns 0, or -1 when v holds something JSON
 * cannot carry (a V_ERROR, or NaN/Infinity without lenient). */
int json_write(json_buf *b, const value *v, int lenient);
/* Appends a JSON string literal for s[0..len). */
void json_write_string(json_buf *b, const char *s, size_t len);
/* Appends the shortest round-trip text of a double (no NaN/Inf handling). */
void json_write_double(json_buf *b, double d);

#endif
