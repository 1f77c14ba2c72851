/* json.h — the one JSON module of verdict: a reader into arena values and a
 * writer from them. Used for requests, decisions, snapshots, model files and
 * test data. docs/json.md has the details and the JSONTestSuite verdicts.
 *
 * Reader: RFC 8259, strict.
 *   - Objects become V_MAP (entries in document order), arrays V_LIST.
 *   - Strings become V_STRING: escapes decoded, raw bytes validated as UTF-8,
 *     \u escapes that are lone surrogates rejected; VF_ASCII is set when the
 *     string is pure ASCII. A string without escapes is NOT copied: it points
 *     into buf, so buf must outlive the values (as must the arena).
 *   - Numbers without fraction or exponent: V_INT when they fit int64, V_UINT
 *     when they fit only uint64 (> INT64_MAX), V_DOUBLE beyond. "-0" is
 *     V_INT 0. Any number with a fraction or exponent is V_DOUBLE ("1.0",
 *     "1e2", "-0.0" keeps its sign); doubles are correctly rounded; a
 *     number beyond the double range is an error, one below it reads as 0.
 *   - Duplicate object keys (compared after decoding escapes) are an error
 *     naming the key and both places: parsers that keep the first and
 *     parsers that keep the last read different requests from one text.
 *   - Limits: nesting depth (default 512 arrays/objects) and input size
 *     (default 64 MiB); the reader does not recurse, so depth costs no C
 *     stack. A byte order mark, comments, trailing commas, single quotes and
 *     NaN/Infinity are rejected.
 *   - Lenient mode also accepts the bare tokens NaN, Infinity and -Infinity
 *     (XGBoost model files contain them); nothing else changes.
 *   - Errors: the byte offset, 1-based line and column (in bytes; lines end
 *     at '\n'), the JSON path of the value being read ($ is the top,
 *     .name or ["other key"] for members, [i] for items; cut with "..."
 *     when long) and a message, e.g.
 *       line 3, column 26 (byte 42), at $.context.items[3]:
 *       invalid escape: 'q' after a backslash
 *   - Typical requests cost no malloc: scratch space starts on the C stack;
 *     only big documents spill to malloc (freed before returning).
 *
 * Writer: compact JSON (no spaces) from a value.
 *   - Strings: '"', '\\' and \b \f \n \r \t escaped with their short forms,
 *     other control bytes as \u00XX, valid UTF-8 written as is ('/', DEL and
 *     U+2028 unescaped), invalid UTF-8 replaced by U+FFFD.
 *   - Doubles: the shortest text that reads back to the same double
 *     (dtoa.h); integral ones get ".0" (100.0 -> "100.0", -0.0 -> "-0.0")
 *     so that they read back as doubles, not ints. NaN/Infinity are written
 *     as the bare tokens NaN, Infinity, -Infinity only when lenient;
 *     otherwise json_write fails.
 *   - V_BYTES: a base64 string (standard alphabet, padded); V_TIMESTAMP: an
 *     RFC 3339 string; V_DURATION: a "1.5s" string (timefmt.h); V_TYPE: its
 *     type name ("int"); V_ERROR: json_write fails.
 *   - Map keys that are not strings are written as their JSON text inside a
 *     string (1 -> "1", true -> "true"); kinds already written as strings
 *     (bytes, timestamps, ...) keep that string. Two keys may then collide
 *     ({1: .., "1": ..}); the reader would reject the result.
 *
 * Field by field: the json_put_* writers below, for text whose shape is
 * fixed and written in one pass (the decision answer, the snapshot
 * payload). They write what json_write writes for the same value, the small
 * ones inline; each makes room through json_buf_reserve, and they leave
 * the closing NUL to json_put_end. The reader is json_read.c, the writer
 * json_write.c. */
#ifndef VD_CORE_JSON_H
#define VD_CORE_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/arena.h"
#include "core/value.h"

typedef struct json_opts {
  size_t max_depth; /* 0 = default (512) */
  size_t max_size;  /* 0 = default (64 MiB) */
  int lenient;      /* accept NaN, Infinity, -Infinity */
  /* Duplicate object keys: JSON_DUP_REJECT (0, the default: an error) or
   * JSON_DUP_LAST_WINS (the later member replaces the earlier one, as
   * JavaScript's JSON.parse does; the entry keeps the first one's place). */
  int duplicates;
} json_opts;

#define JSON_DUP_REJECT 0
#define JSON_DUP_LAST_WINS 1

typedef struct json_error {
  size_t offset;     /* byte offset of the problem */
  int line;          /* 1-based */
  int column;        /* 1-based, in bytes */
  char path[256];    /* JSON path of the value being read, e.g. $.a[2].b */
  char message[256]; /* what was wrong */
} json_error;

/* Parses buf[0..len) into *out (allocated from a; strings may point into
 * buf, so both must outlive *out). Returns 0, or -1 with err filled (err may
 * be NULL; *out is then untouched). opts may be NULL. Whitespace around the
 * value is allowed; anything else after it is an error. */
int json_parse(arena *a, const char *buf, size_t len, const json_opts *opts, value *out,
               json_error *err);

/* Whether two of the n entries of e have equal (string) keys, as the reader
 * checks every object it reads: 1 with *first < *dup their indexes, 0 when
 * none, -1 out of memory. */
int json_find_duplicate(const map_entry *e, size_t n, size_t *first, size_t *dup);

/* Growable output buffer (malloc-backed unless an arena is given). data is
 * NUL-terminated after every write (the NUL is not counted in len). */
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
 * cannot carry (a V_ERROR, or NaN/Infinity without lenient) — the buffer is
 * then left as it was — or when growing the buffer failed (b->oom set). */
int json_write(json_buf *b, const value *v, int lenient);
/* Appends a JSON string literal for s[0..len). */
void json_write_string(json_buf *b, const char *s, size_t len);
/* s[0..len) for a message that names it, as the inside of a JSON string
 * literal (json_write_string's escapes: \u0000 for a NUL, \n, \", \\, other
 * control bytes as \u00XX, invalid UTF-8 as U+FFFD), so that a NUL cannot cut
 * a message short and a newline or an escape sequence cannot forge a line of
 * its own. Text past max input bytes, or past what out[cap] holds, is cut at
 * a whole character or escape and "..." follows. out is always terminated;
 * returns out. For user strings in error messages: '%s' of json_quote_text. */
char *json_quote_text(char *out, size_t cap, const char *s, size_t len, size_t max);
/* Appends the shortest round-trip text of a double, with ".0" when it is
 * integral. Does not check for NaN/Infinity: it writes the lenient tokens
 * NaN, Infinity, -Infinity (json_write fails on them unless lenient). */
void json_write_double(json_buf *b, double d);

/* ---- field by field ---- */

/* Room for extra more bytes and a NUL after them: 0, or -1 (b->oom set) when
 * the buffer cannot grow (out of memory, or a size that would overflow). */
int json_buf_reserve(json_buf *b, size_t extra) __attribute__((noinline));

/* Always inlined, the three below: they run a few hundred times a snapshot,
 * mostly with a length known at compile time (a literal, a u32), which the
 * copy then becomes a move or two instead of a call. */
#define JSON_HOT static inline __attribute__((always_inline))

JSON_HOT int json_room(json_buf *b, size_t n) {
  if (b->len + n + 1 <= b->cap) return 0;
  return json_buf_reserve(b, n);
}

/* s[0..n) as it is (no NUL after: json_put_end). */
JSON_HOT void json_put_raw(json_buf *b, const char *s, size_t n) {
  if (!n || json_room(b, n)) return;
  memcpy(b->data + b->len, s, n);
  b->len += n;
}

JSON_HOT void json_put_char(json_buf *b, char c) {
  if (json_room(b, 1)) return;
  b->data[b->len++] = c;
}

#define JSON_PUT(b, lit) json_put_raw(b, "" lit, sizeof(lit) - 1) /* literals only */

/* s[0..n) as a JSON string literal, as json_write_string writes it: checked
 * and copied in one pass, eight bytes at a time; a string that needs an
 * escape goes through json_write_string. */
void json_put_strn(json_buf *b, const char *s, size_t n);

/* s[0..n) as a JSON string, or null when s is NULL. */
static inline void json_put_strn_or_null(json_buf *b, const char *s, size_t n) {
  if (s)
    json_put_strn(b, s, n);
  else
    JSON_PUT(b, "null");
}

static inline void json_put_str(json_buf *b, const char *s) {
  json_put_strn_or_null(b, s, s ? strlen(s) : 0);
}

/* Decimal digits, two at a time. */
void json_put_u64(json_buf *b, uint64_t v);

static inline void json_put_i64(json_buf *b, int64_t v) {
  if (v < 0) {
    json_put_char(b, '-');
    json_put_u64(b, (uint64_t)0 - (uint64_t)v);
  } else {
    json_put_u64(b, (uint64_t)v);
  }
}

static inline void json_put_bool(json_buf *b, bool v) {
  if (v)
    JSON_PUT(b, "true");
  else
    JSON_PUT(b, "false");
}

/* JSON text the parser accepted, without the whitespace between tokens
 * (strings copied whole, found by their closing quote): a request as
 * received, one line. */
void json_put_minified(json_buf *b, const char *s, size_t n);

/* The NUL after the text: 0, or -1 when a write failed (out of memory). */
int json_put_end(json_buf *b);

#endif
