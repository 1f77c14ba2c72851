/* cmd_eval.c — `verdict eval`: compile one expression and evaluate it once
 * against JSON bindings, printing the result as JSON. The quickest way to try
 * a condition before it goes into a policy. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "verdict.h"

const char cmd_eval_help[] =
    "usage: verdict eval [options] EXPR\n"
    "       verdict eval [options] --file FILE\n"
    "\n"
    "Compiles a condition-language (CEL) expression, evaluates it once and prints\n"
    "the result as JSON on stdout. Compile and evaluation errors go to stderr with\n"
    "the line:column of the problem; the exit status is then 1 (2 for bad usage).\n"
    "\n"
    "options:\n"
    "  -b, --bindings JSON       variables as a JSON object: {\"ctx\": {\"country\": \"CN\"}}\n"
    "  -B, --bindings-file FILE  the same, read from FILE (- for stdin)\n"
    "  -f, --file FILE           read the expression from FILE (- for stdin)\n"
    "  -h, --help                this text\n"
    "\n"
    "Results: null, booleans, numbers and strings print as JSON; lists and maps as\n"
    "JSON arrays and objects; bytes as base64 strings; timestamps as RFC 3339 and\n"
    "durations as \"1.5s\" strings; types as their names.\n"
    "\n"
    "examples:\n"
    "  verdict eval '1 + 2'\n"
    "  verdict eval -b '{\"path\": \"/api/v1/users\"}' 'path.startsWith(\"/api/v1\")'\n"
    "  verdict eval -f examples/expressions/gate.cel -B examples/expressions/gate.json\n"
    "\n"
    "The language: docs/expressions.md\n";

static int usage_error(const char *msg, const char *arg) {
  return cli_usage_error("eval", msg, arg);
}

int cmd_eval(int argc, char **argv) {
  const char *bindings = NULL, *bindings_file = NULL, *expr_file = NULL, *expr = NULL;
  int i = 1;
  for (; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--") == 0) {
      i++;
      break;
    }
    if (a[0] != '-' || a[1] == '\0') break;
    const char **slot = NULL;
    if (strcmp(a, "-b") == 0 || strcmp(a, "--bindings") == 0)
      slot = &bindings;
    else if (strcmp(a, "-B") == 0 || strcmp(a, "--bindings-file") == 0)
      slot = &bindings_file;
    else if (strcmp(a, "-f") == 0 || strcmp(a, "--file") == 0)
      slot = &expr_file;
    else if (strncmp(a, "--bindings=", 11) == 0) {
      bindings = a + 11;
      continue;
    } else
      return usage_error("unknown option", a);
    if (i + 1 >= argc) return usage_error("missing value after", a);
    *slot = argv[++i];
  }
  if (bindings && !*bindings) bindings = NULL; /* --bindings= means none */
  if (i < argc) expr = argv[i++];
  if (i < argc) return usage_error("unexpected argument", argv[i]);
  if (!expr == !expr_file) return usage_error("give exactly one expression, or --file", NULL);
  if (bindings && bindings_file)
    return usage_error("give --bindings or --bindings-file, not both", NULL);

  char *expr_buf = NULL, *bind_buf = NULL;
  size_t expr_len = expr ? strlen(expr) : 0, bind_len = bindings ? strlen(bindings) : 0;
  if (expr_file && !(expr = expr_buf = cli_read_file("eval", expr_file, &expr_len))) return 1;
  if (bindings_file && !(bindings = bind_buf = cli_read_file("eval", bindings_file, &bind_len))) {
    free(expr_buf);
    return 1;
  }

  int rc = 1;
  vd_error err;
  vd_expr *e = NULL;
  char *out = NULL;
  const char *where = expr_file ? expr_file : "<expr>";
  if (vd_expr_compile(expr, (long)expr_len, &e, &err) < 0) {
    fprintf(stderr, "%s:%s\n", where, err.message);
  } else if (vd_expr_eval_json(e, bindings, bindings ? (long)bind_len : 0, &out, &err) < 0) {
    if (err.code == VD_EJSON)
      fprintf(stderr, "%s: %s\n", bindings_file ? bindings_file : "--bindings", err.message);
    else
      fprintf(stderr, "%s: evaluation error: %s\n", where, err.message);
  } else {
    puts(out);
    rc = 0;
  }
  vd_free(out);
  vd_expr_free(e);
  free(expr_buf);
  free(bind_buf);
  return rc;
}
