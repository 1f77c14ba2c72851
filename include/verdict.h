/* verdict.h — the public C interface of verdict.
 *
 * Every handle is opaque; every call returns 0 or a negative VD_E* code, and
 * details go into a caller-provided vd_error. Nothing here uses hidden global
 * state: compile an expression once, evaluate it from any number of threads.
 *
 *   vd_error err;
 *   vd_expr *e;
 *   if (vd_expr_compile("ctx.country == 'CN'", -1, &e, &err) < 0) fail(err.message);
 *   char *out;
 *   if (vd_expr_eval_json(e, "{\"ctx\": {\"country\": \"CN\"}}", -1, &out, &err) == 0) {
 *     puts(out);   // true
 *     vd_free(out);
 *   }
 *   vd_expr_free(e);
 */
#ifndef VERDICT_H
#define VERDICT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define VD_VERSION_MAJOR 0
#define VD_VERSION_MINOR 1
#define VD_VERSION_PATCH 0

/* Error codes (negative returns). */
#define VD_OK 0
#define VD_EINVAL (-1)   /* bad argument */
#define VD_ENOMEM (-2)   /* out of memory or over a memory limit */
#define VD_ESYNTAX (-3)  /* an expression or document did not parse */
#define VD_EJSON (-4)    /* malformed JSON input */
#define VD_EEVAL (-5)    /* evaluation failed (division by zero, no such key, cost limit, ...) */
#define VD_ELIMIT (-6)   /* an input exceeded a size or depth limit */

typedef struct vd_error {
  int code;           /* the VD_E* code also returned */
  int line;           /* 1-based place in the source, 0 if none */
  int column;
  char path[256];     /* JSON path of a bad input field, "" if none */
  char message[1024]; /* a sentence for a person, with the place and what to do */
} vd_error;

/* "0.1.0" */
const char *vd_version(void);
const char *vd_strerror(int code);
/* Frees memory handed out by verdict (result strings). */
void vd_free(void *p);

/* ---- expressions (the CEL condition language) ---- */
typedef struct vd_expr vd_expr;

/* len < 0: src is NUL-terminated. */
int vd_expr_compile(const char *src, long len, vd_expr **out, vd_error *err);
/* Evaluates with the variables of a JSON object (NULL or "{}" for none) and
 * returns the result as JSON text in *out_json (free with vd_free).
 * Timestamps, durations and bytes are rendered as strings. */
int vd_expr_eval_json(const vd_expr *e, const char *bindings_json, long len, char **out_json,
                      vd_error *err);
void vd_expr_free(vd_expr *e);

#ifdef __cplusplus
}
#endif

#endif
