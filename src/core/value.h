/* value.h — the tagged value every part of verdict passes around.
 *
 * A value is 16 bytes: a kind, a 32-bit length/aux field and an 8-byte
 * payload. Strings, bytes, lists and maps point into memory owned by someone
 * else (an arena, a compiled program, the request buffer): values are never
 * freed one by one. Strings are UTF-8, length-aware (may contain NUL) and not
 * necessarily NUL-terminated.
 *
 * The kinds are CEL's types. V_ERROR is an evaluation error carried as a value
 * so that `&&`, `||` and the macros can absorb it as CEL requires; it never
 * appears in JSON or in a decision.
 *
 * Equality and ordering follow the CEL spec: numbers compare across int, uint
 * and double by mathematical value; values of unrelated types are unequal
 * (not an error); ordering between unrelated types is an error. */
#ifndef VD_CORE_VALUE_H
#define VD_CORE_VALUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"

typedef enum value_kind {
  V_NULL = 0,
  V_BOOL,
  V_INT,
  V_UINT,
  V_DOUBLE,
  V_STRING,
  V_BYTES,
  V_LIST,
  V_MAP,
  V_TIMESTAMP, /* seconds since the Unix epoch in .i, nanoseconds [0, 1e9) in .n */
  V_DURATION,  /* seconds in .i, nanoseconds in .n as int32 with the sign of .i */
  V_TYPE,      /* a type value: .n holds the value_kind it names */
  V_ERROR,     /* evaluation error: message in .s/.n (VF_LAZY: not written yet, see below) */
  V_KIND_COUNT
} value_kind;

typedef struct value value;
typedef struct map_entry map_entry;

struct value {
  uint8_t kind;
  uint8_t flags; /* kind-specific; see VF_* */
  uint16_t reserved;
  uint32_t n; /* length of string/bytes/list/map; nanos for timestamp/duration; kind for type */
  union {
    bool b;
    int64_t i;
    uint64_t u;
    double d;
    const char *s;       /* string, bytes, error message */
    const value *items;  /* list */
    const map_entry *entries; /* map */
  };
};

struct map_entry {
  value key;
  value val;
};

/* flags */
#define VF_ASCII 0x01 /* string: known to be pure ASCII (size == byte length) */
/* string: an IP address (VF_IP) or a CIDR prefix (VF_CIDR) made by ip()/cidr()
 * in lib_net.c; the text is the canonical form ("10.0.0.1", "2001:db8::/32"). */
#define VF_IP 0x02
#define VF_CIDR 0x04
/* error: the message is not formatted yet (value_error_lazy). */
#define VF_LAZY 0x10

_Static_assert(sizeof(value) == 16, "value must stay 16 bytes");

/* ---- constructors (inline, no allocation) ---- */
static inline value value_null(void) { value v = {0}; v.kind = V_NULL; return v; }
static inline value value_bool(bool b) { value v = {0}; v.kind = V_BOOL; v.b = b; return v; }
static inline value value_int(int64_t i) { value v = {0}; v.kind = V_INT; v.i = i; return v; }
static inline value value_uint(uint64_t u) { value v = {0}; v.kind = V_UINT; v.u = u; return v; }
static inline value value_double(double d) { value v = {0}; v.kind = V_DOUBLE; v.d = d; return v; }
static inline value value_str(const char *s, uint32_t len) {
  value v = {0}; v.kind = V_STRING; v.s = s; v.n = len; return v;
}
static inline value value_bytes(const char *s, uint32_t len) {
  value v = {0}; v.kind = V_BYTES; v.s = s; v.n = len; return v;
}
static inline value value_list(const value *items, uint32_t len) {
  value v = {0}; v.kind = V_LIST; v.items = items; v.n = len; return v;
}
static inline value value_map(const map_entry *e, uint32_t len) {
  value v = {0}; v.kind = V_MAP; v.entries = e; v.n = len; return v;
}
static inline value value_type(value_kind k) { value v = {0}; v.kind = V_TYPE; v.n = (uint32_t)k; return v; }
static inline value value_timestamp(int64_t sec, int32_t nanos) {
  value v = {0}; v.kind = V_TIMESTAMP; v.i = sec; v.n = (uint32_t)nanos; return v;
}
static inline value value_duration(int64_t sec, int32_t nanos) {
  value v = {0}; v.kind = V_DURATION; v.i = sec; v.n = (uint32_t)nanos; return v;
}
static inline value value_error_static(const char *msg, uint32_t len) {
  value v = {0}; v.kind = V_ERROR; v.s = msg; v.n = len; return v;
}
#define VALUE_ERR(lit) value_error_static(lit, (uint32_t)(sizeof(lit) - 1))

static inline bool value_is_error(value v) { return v.kind == V_ERROR; }
static inline int32_t value_nanos(value v) { return (int32_t)v.n; }

/* printf-style error message copied into the arena (falls back to a static
 * message when the arena is exhausted). */
value value_errorf(arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Errors whose message is written only when someone reads it. Most errors
 * an evaluation makes are absorbed (`has()`, `||`, a feature that reads an
 * absent field and is then missing) and their text is never seen, so the
 * common ones keep a template and their one argument, a slice that lives as
 * long as the evaluation (the program's, the request's or the arena's
 * memory): .s/.n hold the slice, .reserved the template. Formatting gives
 * exactly what value_errorf with the template's format would. Code that
 * reads an error's text calls value_error_text first; expr_eval does it for
 * the error it returns. */
typedef enum value_err_template {
  VE_NO_SUCH_KEY = 1, /* "no such key: '%.*s'" */
  VE_NO_SUCH_FIELD,   /* "no such key: '%.*s' (the context has no such field)" */
  VE_UNDECLARED,      /* "undeclared reference to '%.*s'" */
} value_err_template;

static inline value value_error_lazy(value_err_template t, const char *arg, uint32_t len) {
  value v = {0};
  v.kind = V_ERROR;
  v.flags = VF_LAZY;
  v.reserved = (uint16_t)t;
  v.s = arg;
  v.n = len;
  return v;
}

/* v itself, or for a lazy error the same error with its message written
 * into the arena (as value_errorf would write it). */
value value_error_format(arena *a, value v);
static inline value value_error_text(arena *a, value v) {
  return v.kind == V_ERROR && (v.flags & VF_LAZY) ? value_error_format(a, v) : v;
}

/* CEL type name of a kind: "int", "null_type", "google.protobuf.Timestamp", ... */
const char *value_kind_name(value_kind k);

/* CEL equality (heterogeneous numeric equality; unrelated types -> false).
 * NaN != NaN. Lists/maps compare element-wise; maps ignore order. */
bool value_equal(const value *a, const value *b);

/* CEL ordering: sets *cmp to -1/0/1. Returns 0, or -1 when the two values
 * are not ordered against each other (different non-numeric types, lists,
 * maps, null, ...). With NaN involved every comparison is false: *cmp is set
 * to 2 in that case and callers treat 2 as "unordered". */
int value_compare(const value *a, const value *b, int *cmp);

/* Map lookup with CEL key semantics (numeric keys match across int/uint and
 * integral doubles). Returns the value or NULL. */
const value *value_map_find(const value *map, const value *key);
/* Convenience: look up a string key. */
const value *value_map_get(const value *map, const char *key, size_t key_len);

/* 64-bit hash consistent with value_equal for keys (int/uint/double of the
 * same mathematical value hash alike). */
uint64_t value_hash(const value *v);

/* Number of Unicode code points in a (valid UTF-8) string value. */
size_t value_str_codepoints(const value *v);

#endif
