/* error.h — the one error table of verdict, and filling a vd_error.
 *
 * VD_ERR_MAP lists every VD_E* code once, with its name and its message, the
 * way libuv's UV_ERRNO_MAP gives both uv_err_name and uv_strerror:
 * vd_err_name and vd_strerror (verdict.h) are both read from it, so a new
 * code is one line here and cannot have a message without a name.
 *
 * The name is what a program reads: the "code" of every error object the CLI
 * and the HTTP server print ({"error":{"code":"not_found",...}}), so a name,
 * once documented (docs/server.md, docs/cli.md), does not change. The message
 * is for a person; a vd_error's own message says more (the place, what to do).
 *
 * This module does not format places (expr/error.c writes "LINE:COL: ..."). */
#ifndef VD_CORE_ERROR_H
#define VD_CORE_ERROR_H

#include "verdict.h"

/* X(code, name, message) */
#define VD_ERR_MAP(X)                                                                \
  X(VD_OK, "ok", "success")                                                          \
  X(VD_EINVAL, "invalid", "invalid argument")                                        \
  X(VD_ENOMEM, "memory", "out of memory or over a memory limit")                     \
  X(VD_ESYNTAX, "syntax", "syntax error")                                            \
  X(VD_EJSON, "json", "malformed JSON input")                                        \
  X(VD_EEVAL, "eval", "evaluation failed")                                           \
  X(VD_ELIMIT, "limit", "an input exceeded a size or depth limit")                   \
  X(VD_ENOTFOUND, "not_found", "no strategy serves the request's decision point")    \
  X(VD_ENOCANDIDATE, "no_candidate", "no candidate answer is possible")              \
  X(VD_EREQUEST, "request", "invalid request")                                       \
  X(VD_EPOLICY, "policy", "the policy bundle failed to load")                        \
  X(VD_ESNAPSHOT, "not_recorded", "the snapshot log could not be opened or written") \
  X(VD_EBUSY, "busy", "another process is writing this snapshot folder")

/* What vd_err_name and vd_strerror say of a code not in the table. */
#define VD_ERR_UNKNOWN_NAME "unknown"
#define VD_ERR_UNKNOWN_MESSAGE "unknown error code"

/* Fills err (when not NULL) with code, place and a printf-style message (cut
 * to fit), and returns code, so that a failure is one statement:
 *   return error_fill(err, VD_EINVAL, 0, 0, NULL, "vd_decide: d is NULL"); */
int error_fill(vd_error *err, int code, int line, int column, const char *path, const char *fmt,
               ...) __attribute__((format(printf, 6, 7)));

/* Clears what a reader of err looks at (the numbers and the first bytes of
 * the two strings), not all 1.3 KB: every decision starts with it. */
void error_clear(vd_error *err);

#endif
