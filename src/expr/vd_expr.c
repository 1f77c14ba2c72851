/* vd_expr.c — the public expression API of include/verdict.h, plus the
 * library-wide vd_version (vd_strerror and vd_err_name are core/error.c's).
 *
 * A thin shell over expr_compile / expr_eval: it turns bindings given as a
 * JSON object into variables (each top-level key names one; a key holding
 * dots binds a qualified name such as "a.b"), evaluates under fixed limits
 * (memory and cost, so that a hostile expression or input cannot take the
 * process down), and writes the result as JSON. Errors become vd_error with
 * a VD_E* code and the place (line:column for expressions, line:column and
 * JSON path for bindings).
 *
 * Not here: anything about policies or decisions (src/engine). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/json.h"
#include "expr/expr.h"
#include "verdict.h"

#ifndef VD_VERSION_STRING
#define VD_STR2(x) #x
#define VD_STR(x) VD_STR2(x)
#define VD_VERSION_STRING \
  VD_STR(VD_VERSION_MAJOR) "." VD_STR(VD_VERSION_MINOR) "." VD_STR(VD_VERSION_PATCH)
#endif

#define EVAL_MEMORY_LIMIT ((size_t)64 << 20) /* bytes one evaluation may allocate */
#define EVAL_COST_LIMIT 10000000u            /* comprehension steps and library work */

struct vd_expr {
  expr_program *prog;
};

const char *vd_version(void) { return VD_VERSION_STRING; }

void vd_free(void *p) { free(p); }

int vd_expr_compile(const char *src, long len, vd_expr **out, vd_error *err) {
  error_clear(err);
  if (!out) return error_fill(err, VD_EINVAL, 0, 0, NULL, "vd_expr_compile: out is NULL");
  *out = NULL;
  if (!src) return error_fill(err, VD_EINVAL, 0, 0, NULL, "vd_expr_compile: source is NULL");
  size_t n = len < 0 ? strlen(src) : (size_t)len;
  vd_expr *e = malloc(sizeof *e);
  if (!e) return error_fill(err, VD_ENOMEM, 0, 0, NULL, "out of memory");
  expr_error xe;
  memset(&xe, 0, sizeof xe);
  if (expr_compile(src, n, NULL, &e->prog, &xe) != 0) {
    free(e);
    int code = VD_ESYNTAX;
    if (strstr(xe.message, "too long") || strstr(xe.message, "too deeply")) code = VD_ELIMIT;
    if (strstr(xe.message, "out of memory")) code = VD_ENOMEM;
    return error_fill(err, code, xe.line, xe.column, NULL, "%s", xe.message);
  }
  *out = e;
  return VD_OK;
}

void vd_expr_free(vd_expr *e) {
  if (!e) return;
  expr_free(e->prog);
  free(e);
}

static int bindings_lookup(void *user, const char *name, size_t len, value *out) {
  const value *map = user;
  const value *v = value_map_get(map, name, len);
  if (!v) return -1;
  *out = *v;
  return 0;
}

int vd_expr_eval_json(const vd_expr *e, const char *bindings_json, long len, char **out_json,
                      vd_error *err) {
  error_clear(err);
  if (!out_json) return error_fill(err, VD_EINVAL, 0, 0, NULL, "vd_expr_eval_json: out is NULL");
  *out_json = NULL;
  if (!e) return error_fill(err, VD_EINVAL, 0, 0, NULL, "vd_expr_eval_json: expression is NULL");

  char first[4096];
  arena a;
  arena_init(&a, first, sizeof first, EVAL_MEMORY_LIMIT);
  value vars = value_map(NULL, 0);
  int rc = VD_OK;

  if (bindings_json) {
    size_t n = len < 0 ? strlen(bindings_json) : (size_t)len;
    json_error je;
    memset(&je, 0, sizeof je);
    if (json_parse(&a, bindings_json, n, NULL, &vars, &je) != 0) {
      rc = error_fill(err, VD_EJSON, je.line, je.column, je.path,
                      "bindings are not valid JSON: %d:%d: %s (at %s)", je.line, je.column,
                      je.message, je.path[0] ? je.path : "$");
      goto out;
    }
    if (vars.kind != V_MAP) {
      rc = error_fill(err, VD_EINVAL, 0, 0, "$",
                      "bindings must be a JSON object (each key names a variable), not %s",
                      value_kind_name((value_kind)vars.kind));
      goto out;
    }
  }

  expr_activation act = {.lookup = bindings_lookup, .user = &vars};
  eval_ctx ctx;
  memset(&ctx, 0, sizeof ctx);
  ctx.arena = &a;
  ctx.cost_limit = EVAL_COST_LIMIT;
  value r = expr_eval(e->prog, &act, &ctx);
  if (r.kind == V_ERROR) {
    int code = VD_EEVAL;
    if (strstr(r.s, "memory limit")) code = VD_ENOMEM;
    rc = error_fill(err, code, 0, 0, NULL, "%.*s", (int)r.n, r.s);
    goto out;
  }

  json_buf b;
  json_buf_init(&b, NULL);
  /* Lenient: a NaN or infinite result prints as the bare token rather than
   * failing the evaluation; everything else is plain JSON. */
  if (json_write(&b, &r, 1) != 0 || b.oom) {
    int oom = b.oom;
    json_buf_free(&b);
    rc = error_fill(err, oom ? VD_ENOMEM : VD_EEVAL, 0, 0, NULL,
                    "the result (a %s) cannot be written as JSON",
                    value_kind_name((value_kind)r.kind));
    goto out;
  }
  char *s = malloc(b.len + 1);
  if (!s) {
    json_buf_free(&b);
    rc = error_fill(err, VD_ENOMEM, 0, 0, NULL, "out of memory");
    goto out;
  }
  memcpy(s, b.data, b.len);
  s[b.len] = '\0';
  json_buf_free(&b);
  *out_json = s;

out:
  arena_free(&a);
  return rc;
}
