/* test_refs.c — what a caller outside src/expr/ may read of a compiled
 * program without program.h (refs.h): its lookup names (expr_refs), the
 * shape of its root (expr_root: one variable, a variable with one field, or
 * anything else), with the program's own name pointers; and ast_path, the
 * one reading of `a.b.c` chains the compiler and the policy's index share. */
#include <string.h>

#include "core/arena.h"
#include "expr/expr.h"
#include "expr/refs.h"
#include "test.h"

static expr_program *compile(const char *src, const char *const *declared, size_t ndeclared) {
  expr_opts o;
  memset(&o, 0, sizeof o);
  o.declared = declared;
  o.ndeclared = ndeclared;
  expr_program *p = NULL;
  expr_error err;
  int rc = expr_compile(src, strlen(src), &o, &p, &err);
  CHECK_MSG(rc == 0 && p, "compile %s: %s", src, rc ? err.message : "");
  return p;
}

static int ref_is(expr_ref r, const char *s) {
  return r.len == strlen(s) && !memcmp(r.name, s, r.len);
}

static int listed(const expr_program *p, expr_ref r) {
  expr_ref out[16];
  uint32_t n = expr_refs(p, out, 16);
  for (uint32_t i = 0; i < n && i < 16; i++)
    if (out[i].name == r.name && out[i].len == r.len) return 1;
  return 0;
}

static void test_root_shapes(void) {
  static const char *const decl[] = {"ip", "request"};
  expr_ref var = {0}, field = {0};
  expr_program *p = compile("ip", decl, 2);
  CHECK(expr_root(p, &var, &field) == EXPR_ROOT_VAR);
  CHECK(ref_is(var, "ip"));
  CHECK_MSG(listed(p, var), "the root's name is the pointer expr_refs lists");
  expr_free(p);

  p = compile("request.key", decl, 2);
  CHECK(expr_root(p, &var, &field) == EXPR_ROOT_FIELD);
  CHECK(ref_is(var, "request") && ref_is(field, "key"));
  CHECK(listed(p, var));
  expr_free(p);

  static const char *const others[] = {"ip + 'x'", "'a'", "size(ip)", "ip == 'a'", "request.a.b"};
  for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
    p = compile(others[i], decl, 2);
    int root = expr_root(p, &var, &field);
    CHECK_MSG(root == EXPR_ROOT_OTHER, "%s: root %d", others[i], root);
    expr_free(p);
  }
}

static void test_ast_path(void) {
  arena a;
  arena_init(&a, NULL, 0, 0);
  ast *e;
  expr_error err;
  static const struct {
    const char *src;
    uint32_t n;
    const char *last;
  } cases[] = {{"a", 1, "a"},       {"a.b.c", 3, "c"},
               {"a.b[0]", 0, NULL}, {"has(a.b)", 0, NULL},
               {"f(a).b", 0, NULL}, {"a.b.c.d.e", 0, NULL} /* more than max (4) */};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int rc = expr_parse(&a, cases[i].src, strlen(cases[i].src), NULL, &e, &err);
    CHECK_MSG(rc == 0, "parse %s", cases[i].src);
    if (rc) continue;
    const ast *comps[4];
    uint32_t n = ast_path(e, comps, 4);
    CHECK_MSG(n == cases[i].n, "%s: %u components", cases[i].src, n);
    if (n && cases[i].last)
      CHECK(comps[n - 1]->name_len == strlen(cases[i].last) &&
            !memcmp(comps[n - 1]->name, cases[i].last, comps[n - 1]->name_len));
  }
  arena_free(&a);
}

int main(void) {
  TEST_RUN(test_root_shapes);
  TEST_RUN(test_ast_path);
  TEST_END();
}
