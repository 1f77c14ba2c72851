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
#include "engine/engine.h"
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

static const char *result_word(uint8_t r) {
  switch (r) {
    case RR_TRUE:
      return "true";
    case RR_FALSE:
      return "false";
    case RR_ERROR:
      return "error";
    default:
      return "skipped (not a candidate)";
  }
}

static int str_eq(const char *a, const char *b) { return a && b && strcmp(a, b) == 0; }

/* Compares the decision with the test's expectations; 1 when they hold. */
static int matches(const policy_test *t, const vd_decision *d) {
  if (t->expect_action && !str_eq(t->expect_action, d->action)) return 0;
  if (t->expect_allowed >= 0 && (int)d->allowed != t->expect_allowed) return 0;
  if (t->expect_source && !str_eq(t->expect_source, d->source)) return 0;
  if (t->expect_rule && !str_eq(t->expect_rule, d->rule)) return 0;
  return 1;
}

static void print_expected(const policy_test *t) {
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
  if (d->action)
    printf("  got:      action '%s' (%s%s), source '%s'", d->action,
           d->allowed ? "allowed" : "not allowed", d->review ? ", review" : "", d->source);
  else
    printf("  got:      no action, source '%s'", d->source);
  if (d->rule) printf(", rule '%s'", d->rule);
  printf("\n");
  if (d->reason) printf("  reason:   %s\n", d->reason);
}

static void print_rules(const vd_decision *d) {
  printf("  rules:   ");
  if (!d->ntrace) printf(" none tried");
  for (uint32_t i = 0; i < d->ntrace; i++)
    printf("%s %s: %s", i ? "," : "", d->trace[i].name, result_word(d->trace[i].result));
  if (d->rules_indexed < d->rules_total)
    printf(" (%u of %u rules considered after the index)", d->rules_indexed, d->rules_total);
  printf("\n");
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

  vd_decision *d = vd_decision_new();
  if (!d) {
    fprintf(stderr, "verdict test: out of memory\n");
    policy_bundle_free(b);
    return 1;
  }
  vd_decision_set_trace(d, 1);
  decide_limits lim;
  decide_limits_init(&lim, NULL);
  unsigned passed = 0, failed = 0;
  for (uint32_t k = 0; k < b->nstrategies; k++) {
    const strategy *s = &b->strategies[k];
    if (only && strcmp(s->name, only) != 0) continue;
    for (uint32_t j = 0; j < s->ntests; j++) {
      const policy_test *t = &s->tests[j];
      decide_request req;
      const char *point = t->point              ? t->point
                          : s->ndecision_points ? s->decision_points[0]
                                                : s->name;
      req.action = value_str(point, (uint32_t)strlen(point));
      req.candidates = t->candidates.kind == V_LIST ? t->candidates : value_list(NULL, 0);
      req.key = t->key.kind == V_STRING ? t->key : value_str("", 0);
      req.context = t->context.kind == V_MAP ? t->context : value_map(NULL, 0);
      decision_reset(d);
      /* no counter store: each test starts from empty counters, or from its
       * own `counters:` (docs/policy.md, "Limits") */
      d->counters_in = t->counters.kind == V_MAP ? &t->counters : NULL;
      vd_error err;
      engine_error_clear(&err);
      int rc = decide_run(b, NULL, &req, &lim, d, &err);
      /* a test is of its own strategy: a request routed to another one
       * (route: candidates, docs/policy.md) fails, and says where it went */
      int elsewhere = rc == 0 && d->strategy && strcmp(d->strategy, s->name) != 0;
      if (rc == 0 && !elsewhere && matches(t, d)) {
        passed++;
        if (verbose) printf("ok   %s:%d: %s: %s\n", s->file, t->line, s->name, t->name);
        continue;
      }
      failed++;
      printf("FAIL %s:%d: %s: %s\n", s->file, t->line, s->name, t->name);
      print_expected(t);
      if (rc != 0)
        printf("  got:      the request was refused: %s\n", err.message);
      else if (elsewhere)
        printf(
            "  got:      the request went to strategy '%s' (a strategy with route: candidates "
            "takes only requests whose candidates are all its actions)\n",
            d->strategy);
      else
        print_got(d);
      print_rules(d);
    }
  }
  printf("%u passed, %u failed\n", passed, failed);
  vd_decision_free(d);
  policy_bundle_free(b);
  return failed ? 1 : 0;
}
