/* fuzz_image.c — program images (src/expr/image.c), read back and damaged.
 *
 * The input is an expression, optionally followed by a NUL and damage:
 * pairs of bytes, a position (scaled to the image's length) and a value
 * xor'ed into the byte there; a lone last byte cuts the image short. The
 * expression is compiled as policies compile it (and with CEL's defaults),
 * its image written and read back: the program read back must write the
 * same image and evaluate to the same result at the same cost (given its
 * regexes' compiled code, expr_image_write_codes, as the store does). Then the
 * image with the damage applied is read: refused, or evaluated under a cost
 * limit. Checks: no crash, leak, UB or hang, and the round trip exact. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/json.h"
#include "core/value.h"
#include "expr/expr.h"
#include "expr/image.h"
#include "fuzz.h"

static const char BINDINGS[] =
    "{\"ctx\":{\"ua\":\"Mozilla/5.0 sqlmap\",\"path\":\"/wp-admin/x.php\",\"ip\":\"10.1.2.3\","
    "\"n\":42,\"d\":2.5,\"tags\":[\"a\",\"b\"],\"m\":{\"k\":1}},\"x\":7,\"s\":\"abc\","
    "\"l\":[1,2,3],\"b\":true,\"n\":null}";

static arena A, E;
static value bindings;

static int lookup(void *user, const char *name, size_t len, value *out) {
  (void)user;
  const value *v = value_map_get(&bindings, name, len);
  if (!v) return -1;
  *out = *v;
  return 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  arena_init(&A, NULL, 0, 0);
  arena_init(&E, NULL, 0, 64u << 20);
  json_error e;
  if (json_parse(&A, BINDINGS, sizeof BINDINGS - 1, NULL, &bindings, &e) != 0) {
    fprintf(stderr, "fuzz_image: bindings: %s\n", e.message);
    abort();
  }
  return 0;
}

static value eval(const expr_program *p, uint64_t *cost) {
  expr_activation act = {lookup, NULL};
  eval_ctx ctx;
  memset(&ctx, 0, sizeof ctx);
  ctx.arena = &E;
  ctx.cost_limit = 100000;
  ctx.regex_match_limit = 100000;
  value r = expr_eval(p, &act, &ctx);
  *cost = ctx.cost;
  return r;
}

/* The result as text (errors by their message), for comparing. */
static char *text_of(value r) {
  json_buf b;
  json_buf_init(&b, NULL);
  if (r.kind == V_ERROR) {
    json_buf_put(&b, "error: ", 7);
    json_buf_put(&b, r.s ? r.s : "", r.n);
  } else if (json_write(&b, &r, 1) != 0) {
    json_buf_put(&b, "(unwritable)", 12);
  }
  return b.data;
}

static void run(const char *src, size_t len, const uint8_t *damage, size_t ndamage,
                const expr_opts *o) {
  expr_program *p = NULL, *q = NULL;
  expr_error err;
  if (expr_compile(src, len, o, &p, &err) != 0) return;
  json_buf b1, b2;
  json_buf_init(&b1, NULL);
  json_buf_init(&b2, NULL);
  expr_image_write(p, &b1);
  size_t mem = 0;
  FUZZ_CHECK(!b1.oom && expr_image_check(b1.data, b1.len, o, &mem) == 0,
             "the image of a compiled program does not read back");
  FUZZ_CHECK(expr_image_read(b1.data, b1.len, o, mem, &q) == 0, "read fails after check");
  expr_image_write(q, &b2);
  FUZZ_CHECK(b1.len == b2.len && memcmp(b1.data, b2.data, b1.len) == 0,
             "the program read back writes another image");
  /* with its regexes' compiled code, as the store keeps it beside the
   * image (never damaged here: PCRE2 trusts the code it decodes) */
  json_buf codes;
  json_buf_init(&codes, NULL);
  expr_image_write_codes(p, &codes);
  FUZZ_CHECK(!codes.oom && expr_image_adopt_codes(q, codes.data, codes.len) == 0,
             "a program's own regex codes are refused");
  uint64_t c1, c2;
  char *t1 = text_of(eval(p, &c1)), *t2 = text_of(eval(q, &c2));
  FUZZ_CHECK(t1 && t2 && strcmp(t1, t2) == 0 && c1 == c2,
             "the program read back evaluates differently: %s (cost %llu) / %s (cost %llu)",
             t1 ? t1 : "?", (unsigned long long)c1, t2 ? t2 : "?", (unsigned long long)c2);
  free(t1);
  free(t2);
  expr_free(q);
  q = NULL;
  json_buf_free(&codes); /* used where they lie: kept as long as q */
  arena_reset(&E);

  /* damaged: into a buffer of exactly its length (for ASan) */
  if (ndamage && b1.len) {
    size_t n = b1.len;
    if (ndamage % 2) n = (size_t)damage[ndamage - 1] * b1.len / 256;
    char *img = malloc(n ? n : 1);
    if (img) {
      memcpy(img, b1.data, n);
      for (size_t i = 0; i + 1 < ndamage && n; i += 2)
        img[(size_t)damage[i] * n / 256] ^= (char)damage[i + 1];
      if (expr_image_read(img, n, o, 0, &q) == 0) {
        uint64_t c;
        char *t = text_of(eval(q, &c));
        free(t);
        expr_free(q);
      }
      free(img);
    }
  }
  arena_reset(&E);
  json_buf_free(&b1);
  json_buf_free(&b2);
  expr_free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 4096) return 0; /* expressions, not documents */
  const uint8_t *nul = memchr(data, 0, size);
  size_t len = nul ? (size_t)(nul - data) : size;
  const uint8_t *damage = nul ? nul + 1 : NULL;
  size_t ndamage = nul ? size - len - 1 : 0;
  static const char *const claimed[] = {"ctx"}; /* as the engine claims `limits` */
  static const expr_opts engine = {.simple_names = 1,
                                   .claimed = claimed,
                                   .nclaimed = 1,
                                   .defer_jit = 1},
                         defaults = {0};
  run((const char *)data, len, damage, ndamage, &engine);
  run((const char *)data, len, damage, ndamage, &defaults);
  return 0;
}
