/* test_error_text.c — errors whose message is written only when read
 * (value_error_lazy) read exactly as the printf-formatted messages they
 * replace: through expr_eval, through expr_eval_quiet + value_error_text,
 * with a NUL inside the key (shown escaped, the whole key: a message that
 * stopped at the NUL named another key) and with a key long enough that
 * value_errorf's 512-byte buffer cuts the message ("..." then). An absorbed
 * error still leaves the answer alone. */
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/value.h"
#include "expr/expr.h"
#include "test.h"

typedef struct var {
  const char *name;
  value v;
} var;

static const var *VARS;
static size_t NVARS;

static int lookup(void *user, const char *name, size_t len, value *out) {
  (void)user;
  for (size_t i = 0; i < NVARS; i++)
    if (strlen(VARS[i].name) == len && memcmp(VARS[i].name, name, len) == 0) {
      *out = VARS[i].v;
      return 0;
    }
  return -1;
}

/* The message of src's error, from expr_eval (quiet = 0) or from
 * expr_eval_quiet then value_error_text (quiet = 1); NULL when src does not
 * fail. Copied into a (the program is freed here). */
static const char *message(arena *a, const char *src, int quiet, int *was_lazy) {
  expr_program *p;
  expr_error err;
  if (expr_compile(src, strlen(src), NULL, &p, &err) != 0) {
    fprintf(stderr, "  compile error for %s: %s\n", src, err.message);
    return NULL;
  }
  expr_activation act = {.lookup = lookup, .user = NULL};
  eval_ctx ctx = {.arena = a};
  value v = quiet ? expr_eval_quiet(p, &act, &ctx) : expr_eval(p, &act, &ctx);
  if (was_lazy) *was_lazy = v.kind == V_ERROR && (v.flags & VF_LAZY);
  v = value_error_text(a, v);
  const char *out = NULL;
  if (v.kind == V_ERROR) {
    CHECK(!(v.flags & VF_LAZY));
    out = arena_strndup(a, v.s, v.n);
  }
  expr_free(p);
  return out;
}

static void both(arena *a, const char *src, const char *want) {
  int lazy = 0;
  CHECK_STR(message(a, src, 0, NULL), want);
  CHECK_STR(message(a, src, 1, &lazy), want);
  CHECK_MSG(lazy, "%s: expected the quiet evaluation to leave the message unwritten", src);
}

static void test_messages(arena *a) {
  map_entry e[1] = {{value_str("a", 1), value_int(1)}};
  var vars[] = {{"m", value_map(e, 1)}};
  VARS = vars;
  NVARS = 1;
  both(a, "m.b", "no such key: 'b'");
  both(a, "m['zz']", "no such key: 'zz'");
  both(a, "nope", "undeclared reference to 'nope'");
  both(a, "a.b.c", "undeclared reference to 'a.b.c'");
  /* a NUL or a newline in the key: shown escaped, the whole key */
  both(a, "m['x\\u0000y']", "no such key: 'x\\u0000y'");
  both(a, "m['x\\ny']", "no such key: 'x\\ny'");
}

static void test_long_key(arena *a) {
  char key[700];
  memset(key, 'k', sizeof key - 1);
  key[sizeof key - 1] = '\0';
  /* cut to value_errorf's 511 bytes, with "..." where the key was cut */
  value want = value_errorf(a, "no such key: '%.*s...'", 493, key);
  CHECK(want.n == 511);
  value lazy = value_error_lazy(VE_NO_SUCH_KEY, key, (uint32_t)strlen(key));
  value got = value_error_text(a, lazy);
  CHECK(got.n == want.n && memcmp(got.s, want.s, want.n) == 0);
  value ctx = value_error_text(a, value_error_lazy(VE_NO_SUCH_FIELD, "ip", 2));
  value ctx_want = value_errorf(a, "no such key: '%.*s' (the context has no such field)", 2, "ip");
  CHECK(ctx.n == ctx_want.n && memcmp(ctx.s, ctx_want.s, ctx.n) == 0);
  /* anything not lazy comes back as it is */
  value plain = VALUE_ERR("plain");
  value same = value_error_text(a, plain);
  CHECK(same.s == plain.s && same.n == plain.n);
  value num = value_error_text(a, value_int(7));
  CHECK(num.kind == V_INT && num.i == 7);
}

static void test_absorbed(arena *a) {
  map_entry e[1] = {{value_str("a", 1), value_int(1)}};
  var vars[] = {{"m", value_map(e, 1)}};
  VARS = vars;
  NVARS = 1;
  CHECK(message(a, "m.b == 1 || true", 0, NULL) == NULL);
  CHECK(message(a, "has(m.b) ? m.b : 0", 0, NULL) == NULL);
  both(a, "m.b == 1 || false", "no such key: 'b'");
}

int main(void) {
  arena a;
  arena_init(&a, NULL, 0, 0);
  test_messages(&a);
  test_long_key(&a);
  test_absorbed(&a);
  arena_free(&a);
  TEST_END();
}
