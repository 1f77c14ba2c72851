/* fuzz_cel.c — the condition language end to end: the input is an
 * expression, lexed, parsed, checked and compiled (with and without
 * simple_names, as policies and the CEL spec compile), then evaluated
 * against a fixed set of bindings of every kind under a cost limit. Checks:
 * no crash, leak, UB or hang (the cost limit must bound every evaluation);
 * a compile error always has a message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/json.h"
#include "core/value.h"
#include "expr/expr.h"
#include "fuzz.h"

/* The bindings: a request-like context plus one variable of each kind. */
static const char BINDINGS[] =
    "{\"request\":{\"action\":\"payment\",\"key\":\"user-42\",\"candidates\":[\"allow\",\"deny\"]},"
    "\"context\":{\"amount\":1250.5,\"currency\":\"EUR\",\"country\":\"FR\",\"ip\":\"10.1.2.3\","
    "\"user\":{\"id\":42,\"roles\":[\"admin\",\"dev\"],\"email\":\"a@example.com\",\"age\":37},"
    "\"items\":[1,2,3,4,5,6,7,8,9,10],\"tags\":{\"a\":\"x\",\"b\":\"y\"},\"flag\":true,"
    "\"nothing\":null,\"big\":18446744073709551615,\"neg\":-9223372036854775808,"
    "\"text\":\"h\\u00e9llo w\\u00f6rld \\ud83d\\ude00\",\"cmd\":\"rm -rf / && curl x | sh\","
    "\"path\":\"/etc/passwd\",\"url\":\"https://example.com/"
    "a?b=c\",\"ts\":\"2026-01-02T03:04:05Z\"},"
    "\"x\":7,\"y\":-3,\"u\":5,\"d\":2.5,\"s\":\"abc\",\"b\":false,\"l\":[\"a\",\"b\",\"c\"],"
    "\"m\":{\"k\":1,\"l\":[1,2]},\"n\":null}";

static arena A, E;
static value bindings;

static int lookup(void *user, const char *name, size_t len, value *out) {
  (void)user;
  const value *m = &bindings;
  /* "m.F" for the claimed `m` (expr_opts.claimed): m's field F, when it has one */
  if (len > 2 && name[0] == 'm' && name[1] == '.') {
    const value *mv = value_map_get(m, "m", 1);
    const value *f = mv ? value_map_get(mv, name + 2, len - 2) : NULL;
    if (!f) return -1;
    *out = *f;
    return 0;
  }
  for (uint32_t i = 0; i < m->n; i++) {
    const value *k = &m->entries[i].key;
    if (k->n == len && memcmp(k->s, name, len) == 0) {
      *out = m->entries[i].val;
      if (len == 1 && name[0] == 'u') *out = value_uint(5);
      if (len == 1 && name[0] == 'y') *out = value_bytes("\x00\xff\x80", 3);
      return 0;
    }
  }
  return -1;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  arena_init(&A, NULL, 0, 0);
  arena_init(&E, NULL, 0, 64u << 20);
  json_error e;
  if (json_parse(&A, BINDINGS, sizeof BINDINGS - 1, NULL, &bindings, &e) != 0) {
    fprintf(stderr, "fuzz_cel: bindings: %s\n", e.message);
    abort();
  }
  return 0;
}

static void run(const char *src, size_t len, int simple) {
  expr_opts o;
  memset(&o, 0, sizeof o);
  o.simple_names = simple;
  static const char *const claimed[] = {"m", "context"}; /* "context.F" is never bound */
  o.claimed = claimed;
  o.nclaimed = 2;
  expr_program *p = NULL;
  expr_error err;
  memset(&err, 0, sizeof err);
  if (expr_compile(src, len, &o, &p, &err) != 0) {
    FUZZ_CHECK(err.message[0] != '\0', "compile error without a message");
    return;
  }
  expr_activation act = {lookup, NULL};
  eval_ctx ctx;
  memset(&ctx, 0, sizeof ctx);
  ctx.arena = &E;
  ctx.cost_limit = 100000;
  ctx.regex_match_limit = 100000;
  value r = expr_eval(p, &act, &ctx);
  /* The result must be something the writer can handle (or an error). */
  json_buf b;
  json_buf_init(&b, NULL);
  (void)json_write(&b, &r, 1);
  json_buf_free(&b);
  expr_free(p);
  arena_reset(&E);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 4096) return 0; /* expressions, not documents */
  run((const char *)data, size, 0);
  run((const char *)data, size, 1);
  return 0;
}
