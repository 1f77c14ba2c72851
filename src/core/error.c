/* error.c — vd_err_name and vd_strerror from the one table (error.h), and
 * error_fill. */
#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>

const char *vd_err_name(int code) {
#define X(c, name, msg) \
  case c:               \
    return name;
  switch (code) { VD_ERR_MAP(X) }
#undef X
  return VD_ERR_UNKNOWN_NAME;
}

const char *vd_strerror(int code) {
#define X(c, name, msg) \
  case c:               \
    return msg;
  switch (code) { VD_ERR_MAP(X) }
#undef X
  return VD_ERR_UNKNOWN_MESSAGE;
}

int error_fill(vd_error *err, int code, int line, int column, const char *path, const char *fmt,
               ...) {
  if (!err) return code;
  err->code = code;
  err->line = line;
  err->column = column;
  snprintf(err->path, sizeof err->path, "%s", path ? path : "");
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err->message, sizeof err->message, fmt, ap);
  va_end(ap);
  return code;
}

void error_clear(vd_error *err) {
  if (!err) return;
  err->code = err->line = err->column = 0;
  err->path[0] = '\0';
  err->message[0] = '\0';
}
