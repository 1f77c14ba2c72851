/* cmd_test.c — `verdict test`: run the inline tests of every strategy in a
 * bundle (the `tests:` list of docs/policy.md) through the same decision code
 * the engine uses, and report each failure with the test's file:line, what
 * was expected, what came out and the rules tried. Ends with the line
 * "N passed, N failed"; exit 1 on any failure or when the bundle does not
 * load. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "engine/service.h"
#include "policy/policy.h"

const char cmd_test_help[] =
    "usage: verdict test [options] DIR\n"
    "\n"
    "Runs the inline tests of every strategy in the policy bundle DIR. Each test\n"
    "becomes a request to the strategy's first decision point, with the test's\n"
    "context, candidates and key; the decision must match `expect`: an action name,\n"
    "or a map of action, allowed, source (rule|model|default|error) and rule. A failing\n"
    "test prints where it is (FILE:LINE), what it expected, what came out and the\n"
    "rules tried. The last line is always \"N passed, N failed\".\n"
    "\n"
    "options:\n"
    "  -v, --verbose         also list the tests that pass\n"
    "  -s, --strategy NAME   run only this strategy's tests\n"
    "  -h, --help            this text\n"
    "\n"
    "Exit status: 0 every test passed; 1 a test failed or the bundle does not\n"
    "load; 2 bad usage.\n"
    "\n"
    "examples:\n"
    "  verdict test examples/policies\n"
    "  verdict test -v --strategy request_gate examples/policies\n"
    "\n"
    "The tests: docs/policy.md (`tests`)\n";

static int usage_error(const char *msg, const char *arg) {
  return cli_usage_error("test", msg, arg);
}

static const char *result_word(int r) {
  switch (r) {
    case SERVICE_RULE_TRUE:
      return "true";
    case SERVICE_RULE_FALSE:
      return "false";
    case SERVICE_RULE_ERROR:
      return "error";
    default:
      return "skipped (not a candidate)";
  }
}

static int str_eq(const char *a, const char *b) { return a && b && strcmp(a, b) == 0; }

/* Compares the decision with the test's expectations; 1 when they hold. */
static int matches(const service_test *t, const vd_decision *d) {
  if (t->expect_action && !str_eq(t->expect_action, vd_decision_action(d))) return 0;
  if (t->expect_allowed >= 0 && vd_decision_allowed(d) != t->expect_allowed) return 0;
  if (t->expect_source && !str_eq(t->expect_source, vd_decision_source(d))) return 0;
  if (t->expect_rule && !str_eq(t->expect_rule, vd_decision_rule(d))) return 0;
  return 1;
}

static void print_expected(const service_test *t) {
  printf("  expected:");
  const char *sep = " ";
  if (t->expect_action) {
    printf("%saction '%s'", sep, t->expect_action);
    sep = ", ";
  }
  if (t->expect_allowed >= 0) {
    printf("%sallowed %s", sep, t->expect_allowed ? "true" : "false");
    sep = ", ";
  }
  if (t->expect_source) {
    printf("%ssource '%s'", sep, t->expect_source);
    sep = ", ";
  }
  if (t->expect_rule) printf("%srule '%s'", sep, t->expect_rule);
  printf("\n");
}

static void print_got(const vd_decision *d) {
  const char *action = vd_decision_action(d), *rule = vd_decision_rule(d);
  const char *reason = vd_decision_reason(d);
  if (action)
    printf("  got:      action '%s' (%s%s), source '%s'", action,
           vd_decision_allowed(d) ? "allowed" : "not allowed",
           vd_decision_review(d) ? ", review" : "", vd_decision_source(d));
  else
    printf("  got:      no action, source '%s'", vd_decision_source(d));
  if (rule) printf(", rule '%s'", rule);
  printf("\n");
  if (reason) printf("  reason:   %s\n", reason);
}

static void print_rules(const vd_decision *d) {
  printf("  rules:   ");
  unsigned n = service_trace_count(d), total, considered;
  if (!n) printf(" none tried");
  for (unsigned i = 0; i < n; i++) {
    const char *name;
    int result;
    service_trace_rule(d, i, &name, &result);
    printf("%s %s: %s", i ? "," : "", name, result_word(result));
  }
  service_trace_rules(d, &total, &considered);
  if (considered < total) printf(" (%u of %u rules considered after the index)", considered, total);
  printf("\n");
}

typedef struct tally {
  unsigned passed, failed;
  int verbose;
} tally;

static void report(void *ud, const service_test *t, int rc, const vd_decision *d,
                   const vd_error *err) {
  tally *y = ud;
  /* a test is of its own strategy: a request routed to another one
   * (route: candidates, docs/policy.md) fails, and says where it went */
  const char *went = vd_decision_strategy(d);
  int elsewhere = rc == 0 && went && strcmp(went, t->strategy) != 0;
  if (rc == 0 && !elsewhere && matches(t, d)) {
    y->passed++;
    if (y->verbose) printf("ok   %s:%d: %s: %s\n", t->file, t->line, t->strategy, t->name);
    return;
  }
  y->failed++;
  printf("FAIL %s:%d: %s: %s\n", t->file, t->line, t->strategy, t->name);
  print_expected(t);
  if (rc != 0)
    printf("  got:      the request was refused: %s\n", err->message);
  else if (elsewhere)
    printf(
        "  got:      the request went to strategy '%s' (a strategy with route: candidates "
        "takes only requests whose candidates are all its actions)\n",
        went);
  else
    print_got(d);
  print_rules(d);
}

int cmd_test(int argc, char **argv) {
  const char *dir = NULL, *only = NULL;
  int verbose = 0;
  int i = 1;
  for (; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--") == 0) {
      i++;
      break;
    }
    if (a[0] != '-' || a[1] == '\0') break;
    if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) {
      verbose = 1;
    } else if (strcmp(a, "-s") == 0 || strcmp(a, "--strategy") == 0) {
      if (i + 1 >= argc) return usage_error("missing value after", a);
      only = argv[++i];
    } else {
      return usage_error("unknown option", a);
    }
  }
  /* Options may also follow the folder: `verdict test DIR --verbose`. */
  for (; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) {
      verbose = 1;
    } else if (strcmp(a, "-s") == 0 || strcmp(a, "--strategy") == 0) {
      if (i + 1 >= argc) return usage_error("missing value after", a);
      only = argv[++i];
    } else if (a[0] == '-' && a[1] != '\0') {
      return usage_error("unknown option", a);
    } else if (!dir) {
      dir = a;
    } else {
      return usage_error("unexpected argument", a);
    }
  }
  if (!dir) return usage_error("give the bundle folder to test", NULL);

  policy_load_opts lo = {.store_dir = ""};
  policy_diags diags;
  memset(&diags, 0, sizeof diags);
  policy_bundle *b = NULL;
  if (policy_bundle_load(dir, &lo, &b, &diags) != 0 || !b) {
    for (size_t k = 0; k < diags.n; k++) policy_diag_print(&diags.items[k], stderr);
    fprintf(stderr, "verdict test: %s: the bundle does not load (%zu error%s)\n", dir, diags.errors,
            diags.errors == 1 ? "" : "s");
    policy_bundle_free(b);
    policy_diags_free(&diags);
    return 1;
  }
  policy_diags_free(&diags);

  int found = !only;
  for (uint32_t k = 0; k < b->nstrategies && !found; k++)
    found = strcmp(b->strategies[k].name, only) == 0;
  if (!found) {
    fprintf(stderr, "verdict test: no strategy named '%s' in %s\n", only, dir);
    policy_bundle_free(b);
    return 1;
  }

  tally y = {0, 0, verbose};
  if (service_tests_run(b, only, SERVICE_TESTS_TRACE, report, &y, NULL) != 0) {
    fprintf(stderr, "verdict test: out of memory\n");
    policy_bundle_free(b);
    return 1;
  }
  unsigned passed = y.passed, failed = y.failed;
  printf("%u passed, %u failed\n", passed, failed);
  policy_bundle_free(b);
  return failed ? 1 : 0;
}
