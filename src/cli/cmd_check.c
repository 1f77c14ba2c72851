/* cmd_check.c — `verdict check`: load and compile a policy bundle without
 * deciding anything, print every diagnostic (errors and warnings, each with
 * file:line:column and the YAML key) and a one-line summary. Meant for
 * editors, pre-commit hooks and CI: exit 1 when the bundle would be refused
 * by `verdict decide` or a server reload. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "model/model.h"
#include "policy/policy.h"

const char cmd_check_help[] =
    "usage: verdict check [options] DIR\n"
    "\n"
    "Loads and compiles the policy bundle in DIR (a folder of *.yaml strategies)\n"
    "and prints every problem found, one a line, as FILE:LINE:COLUMN: KEY: message,\n"
    "then a summary:\n"
    "\n"
    "  4 strategies, 61 rules, 0 errors, 1 warning; version 3f2a...\n"
    "\n"
    "Besides errors (anything that stops the bundle from loading: YAML syntax,\n"
    "unknown keys, bad expressions, undefined names, ...) it warns about rules\n"
    "that can never match because an earlier rule always wins, calls to functions\n"
    "no library defines, and tests the strategy cannot pass. Each fallback model\n"
    "(models/NAME.json and its feature spec, checked against each other and\n"
    "against the strategies using them) gets a line before the summary:\n"
    "\n"
    "  model clef-default-v3: binary:logistic, 40 trees, 17 features; version acc4...\n"
    "\n"
    "Nothing is written: the version store is left alone.\n"
    "\n"
    "options:\n"
    "      --strict   treat warnings as errors\n"
    "  -h, --help     this text\n"
    "\n"
    "Exit status: 0 the bundle loads (warnings allowed unless --strict); 1 it does\n"
    "not; 2 bad usage.\n"
    "\n"
    "examples:\n"
    "  verdict check examples/policies\n"
    "\n"
    "The policy language: docs/policy.md\n";

static int usage_error(const char *msg, const char *arg) {
  return cli_usage_error("check", msg, arg);
}

static const char *plural(size_t n, const char *one, const char *many) {
  return n == 1 ? one : many;
}

int cmd_check(int argc, char **argv) {
  const char *dir = NULL;
  int strict = 0;
  int i = 1;
  for (; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--") == 0) {
      i++;
      break;
    }
    if (a[0] != '-' || a[1] == '\0') break;
    if (strcmp(a, "--strict") == 0)
      strict = 1;
    else
      return usage_error("unknown option", a);
  }
  if (i < argc) dir = argv[i++];
  if (i < argc) return usage_error("unexpected argument", argv[i]);
  if (!dir) return usage_error("give the bundle folder to check", NULL);

  policy_load_opts lo = {.store_dir = "", .warnings_as_errors = strict};
  policy_diags diags;
  memset(&diags, 0, sizeof diags);
  policy_bundle *b = NULL;
  int rc = policy_bundle_load(dir, &lo, &b, &diags);
  for (size_t k = 0; k < diags.n; k++) policy_diag_print(&diags.items[k], stdout);

  size_t nrules = 0;
  if (b)
    for (uint32_t k = 0; k < b->nstrategies; k++) nrules += b->strategies[k].nrules;
  size_t errors = diags.errors, warnings = diags.warnings;
  if (rc == 0 && b) {
    for (uint32_t k = 0; k < b->nmodels; k++) {
      const bundle_model *m = &b->models[k];
      uint32_t nt = gbdt_num_trees(m->gbdt), nf = gbdt_num_features(m->gbdt);
      printf("model %s: %s, %u %s, %u %s; version %s\n", m->name, gbdt_objective_name(m->gbdt),
             nt, plural(nt, "tree", "trees"), nf, plural(nf, "feature", "features"), m->version);
    }
    printf("%u %s, %zu %s, %zu %s, %zu %s; version %s\n", b->nstrategies,
           plural(b->nstrategies, "strategy", "strategies"), nrules,
           plural(nrules, "rule", "rules"), errors, plural(errors, "error", "errors"), warnings,
           plural(warnings, "warning", "warnings"), b->version);
  } else {
    printf("%zu %s, %zu %s; the bundle does not load\n", errors, plural(errors, "error", "errors"),
           warnings, plural(warnings, "warning", "warnings"));
  }
  int failed = rc != 0 || !b || errors > 0 || (strict && warnings > 0);
  policy_bundle_free(b);
  policy_diags_free(&diags);
  return failed ? 1 : 0;
}
