/* test_errors.c — every kind of policy problem is reported at its place:
 * file:line:col, the YAML key path, a plain message and, where a near name
 * exists, a "did you mean" hint. Expression errors point inside the YAML
 * scalar (plain, quoted and block) with a caret excerpt of the file's line.
 * Also the warnings of `verdict check`: shadowed rules, unknown functions,
 * undeclared actions, hidden context fields. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"

#define HEAD "strategy: s\ndefault: allow\n"

static void test_keys(void) {
  CHECK_ERROR("strategy: s\ndefualt: allow\n",
              "t.yaml:2:1: unknown key 'defualt' (did you mean 'default'?)");
  CHECK_ERROR(HEAD "rulez: []\n", "t.yaml:3:1: unknown key 'rulez' (did you mean 'rules'?)");
  CHECK_ERROR(HEAD "zebra: 1\n", "t.yaml:3:1: unknown key 'zebra'");
  CHECK_ERROR(HEAD "rules:\n  - iff: x\n    action: allow\n",
              "t.yaml:4:5: rules[0]: unknown key 'iff' (did you mean 'if'?)");
  CHECK_ERROR(HEAD "rules:\n  - if: x\n    acton: allow\n",
              "t.yaml:5:5: rules[0]: unknown key 'acton' (did you mean 'action'?)");
  CHECK_ERROR(HEAD "fallback: {model: m, timout_ms: 5}\n",
              "t.yaml:3:22: fallback: unknown key 'timout_ms' (did you mean 'timeout_ms'?)");
  CHECK_ERROR(HEAD "actions:\n  allow: {alowed: true}\n",
              "t.yaml:4:11: actions.allow: unknown key 'alowed' (did you mean 'allowed'?)");
  CHECK_ERROR("strategy: s\ndefault: {action: allow, reson: x}\n",
              "t.yaml:2:26: default: unknown key 'reson' (did you mean 'reason'?)");
  CHECK_ERROR(HEAD "tests:\n  - expect: {actoin: allow}\n",
              "t.yaml:4:14: tests[0].expect: unknown key 'actoin' (did you mean 'action'?)");
  CHECK_ERROR(HEAD "tests:\n  - contxt: {}\n    expect: allow\n",
              "t.yaml:4:5: tests[0]: unknown key 'contxt' (did you mean 'context'?)");
  /* duplicate keys are YAML-level errors */
  CHECK_ERROR("strategy: s\nstrategy: t\ndefault: allow\n",
              "t.yaml:2:1: duplicate key 'strategy' (first at line 1)");
}

static void test_required(void) {
  CHECK_ERROR("default: allow\n", "t.yaml:1:1: missing 'strategy' (the strategy's name)");
  CHECK_ERROR("strategy: s\n",
              "t.yaml:1:1: missing 'default' (the decision when no rule matches; it may be left "
              "out only when a 'fallback' model decides)");
  CHECK_ERROR(HEAD "rules:\n  - action: allow\n",
              "t.yaml:4:5: rules[0]: missing 'if' (the rule's condition)");
  CHECK_ERROR(HEAD "rules:\n  - if: 'true'\n",
              "t.yaml:4:5: rules[0]: missing 'action' (what the rule answers when its condition "
              "holds)");
  CHECK_ERROR(HEAD "fallback: {timeout_ms: 5}\n",
              "t.yaml:3:11: fallback: missing 'model' (the name of the model that decides)");
  CHECK_ERROR("strategy: s\ndefault: {reason: x}\n", "t.yaml:2:10: default: missing 'action'");
  CHECK_ERROR(HEAD "tests:\n  - name: t1\n",
              "t.yaml:4:5: tests[0]: missing 'expect' (an action name, or {action, allowed, "
              "source, rule})");
}

static void test_types(void) {
  CHECK_ERROR(HEAD "rules: {a: 1}\n", "t.yaml:3:8: rules: expected a list, got a mapping");
  CHECK_ERROR(HEAD "rules:\n  - just text\n",
              "t.yaml:4:5: rules[0]: expected a mapping (key: value lines), got a string");
  CHECK_ERROR(HEAD "constants: [1, 2]\n",
              "t.yaml:3:12: constants: expected a mapping (key: value lines), got a list");
  CHECK_ERROR(HEAD "description: {a: 1}\n",
              "t.yaml:3:14: description: expected text, got a mapping");
  CHECK_ERROR("strategy: 12\ndefault: allow\n",
              "t.yaml:1:11: strategy: expected strategy name (a string), got an integer");
  CHECK_ERROR("strategy: a b\ndefault: allow\n",
              "t.yaml:1:11: strategy: 'a b' is not a valid strategy name: use letters, digits, "
              "'_', '-' and '.' (at most 128)");
  CHECK_ERROR(HEAD "actions: {allow: 3}\n",
              "t.yaml:3:18: actions.allow: expected true, false or {allowed: bool, review: bool}, "
              "got an integer");
  CHECK_ERROR(HEAD "actions: {allow: {review: maybe}}\n",
              "t.yaml:3:27: actions.allow.review: expected true or false, got a string");
  CHECK_ERROR(HEAD "rules:\n  - if: x\n    action: \"allow all\"\n",
              "t.yaml:5:14: rules[0].action: 'allow all' is not a valid action name: use letters, "
              "digits, '_', '-' and '.' (at most 128)");
  CHECK_ERROR("strategy: s\ndefault: [allow]\n",
              "t.yaml:2:10: default: expected an action name or {action: NAME, reason: TEXT}, got "
              "a list");
  CHECK_ERROR(HEAD "on_error: 5\n",
              "t.yaml:3:11: on_error: expected an action name or {action: NAME, reason: TEXT}, got "
              "an integer");
  CHECK_ERROR(HEAD "on_no_candidate: true\n",
              "t.yaml:3:18: on_no_candidate: expected an action name, 'first' or 'error', got a "
              "boolean");
  CHECK_ERROR(HEAD "decision_points: []\n",
              "t.yaml:3:18: decision_points: needs at least one decision point (or leave it out)");
  CHECK_ERROR(HEAD "decision_points: [a, b, a]\n",
              "t.yaml:3:25: decision_points[2]: decision point 'a' is listed twice");
  CHECK_ERROR(HEAD "decision_points: a\n",
              "t.yaml:3:18: decision_points: expected a list, got a string");
  /* fallback */
  CHECK_ERROR(HEAD "fallback: {model: m, timeout_ms: 0}\n",
              "t.yaml:3:34: fallback.timeout_ms: 0 is out of range: use 1 to 10000 (milliseconds)");
  CHECK_ERROR(HEAD "fallback: {model: m, timeout_ms: 10001}\n",
              "t.yaml:3:34: fallback.timeout_ms: 10001 is out of range: use 1 to 10000 "
              "(milliseconds)");
  CHECK_ERROR(HEAD "fallback: {model: m, timeout_ms: 1.5}\n",
              "t.yaml:3:34: fallback.timeout_ms: expected a whole number of milliseconds, got a "
              "number");
  CHECK_ERROR(HEAD "fallback: {model: 'a model'}\n",
              "t.yaml:3:20: fallback.model: 'a model' is not a valid model name: use letters, "
              "digits, '_', '-' and '.' (at most 128)");
  CHECK_ERROR(HEAD "fallback: on\n",
              "t.yaml:3:11: fallback: expected a mapping (key: value lines), got a string");
  /* tests */
  CHECK_ERROR(HEAD "tests:\n  - context: [1]\n    expect: allow\n",
              "t.yaml:4:14: tests[0].context: expected a mapping (key: value lines), got a list");
  CHECK_ERROR(HEAD "tests:\n  - candidates: [allow, 3]\n    expect: allow\n",
              "t.yaml:4:25: tests[0].candidates[1]: expected an action name (a string), got an "
              "integer");
  CHECK_ERROR(HEAD "tests:\n  - expect: {source: rul}\n",
              "t.yaml:4:22: tests[0].expect.source: expected rule, model, default or error, got "
              "'rul' (did you mean 'rule'?)");
  CHECK_ERROR(HEAD "tests:\n  - expect: {allowed: 1}\n",
              "t.yaml:4:23: tests[0].expect.allowed: expected true or false, got an integer");
  CHECK_ERROR(HEAD "tests:\n  - expect: {}\n",
              "t.yaml:4:13: tests[0].expect: says nothing to check");
  CHECK_ERROR(HEAD "tests:\n  - {name: a, expect: allow}\n  - {name: a, expect: allow}\n",
              "t.yaml:5:5: tests[1].name: duplicate test name 'a' (tests[0] has it too)");
}

static void test_names(void) {
  CHECK_ERROR(HEAD
              "rules:\n  - {name: r, if: x, action: allow}\n  - {name: r, if: y, action: allow}\n",
              "t.yaml:5:12: rules[1].name: duplicate rule name 'r' (rules[0] has it too)");
  /* a default name counts too */
  CHECK_ERROR(HEAD "rules:\n  - {name: rule-2, if: x, action: allow}\n  - {if: y, action: allow}\n",
              "t.yaml:5:5: rules[1].name: duplicate rule name 'rule-2' (rules[0] has it too)");
  CHECK_ERROR(HEAD "constants: {1x: 1}\n",
              "t.yaml:3:13: constants: '1x' is not a valid constant name: use a letter or '_' "
              "then letters, digits, '_' (not a CEL keyword, nor request, context or model)");
  CHECK_ERROR(HEAD "let: {request: 'true'}\n",
              "t.yaml:3:7: let: 'request' is not a valid let name: use a letter or '_' then "
              "letters, digits, '_' (not a CEL keyword, nor request, context or model)");
  CHECK_ERROR(HEAD "constants: {x: 1}\nlet: {x: '2'}\n",
              "t.yaml:4:7: let: 'x' is both a constant and a let: rename one");
}

static void test_let_cycles(void) {
  CHECK_ERROR(HEAD "let:\n  a: b + 1\n  b: c * 2\n  c: a\n",
              "t.yaml:4:6: let.a: let 'a' depends on itself: a -> b -> c -> a");
  CHECK_ERROR(HEAD "let:\n  path: path.lowerAscii()\n",
              "t.yaml:4:9: let.path: let 'path' depends on itself: path -> path");
  /* not a cycle: a comprehension variable named like a let */
  policy_diags d;
  policy_bundle *b = load_text(HEAD "let:\n  x: '[1, 2].exists(y, y > 1)'\n  y: x\n", &d);
  CHECK(b != NULL);
  if (!b) dump_diags(&d);
  policy_bundle_free(b);
  policy_diags_free(&d);
}

static void test_expression_places(void) {
  /* plain scalar: the column inside the line */
  CHECK_ERROR(HEAD "rules:\n  - if: a == )\n    action: allow\n",
              "t.yaml:4:14: rules[0].if: unexpected token ')'");
  /* double-quoted: the column of the character, not of the quote */
  CHECK_ERROR(HEAD "rules:\n  - if: \"a == )\"\n    action: allow\n",
              "t.yaml:4:15: rules[0].if: unexpected token ')'");
  /* an escape before the error does not shift it */
  CHECK_ERROR(HEAD "rules:\n  - if: \"a == 'x\\\"y' )\"\n    action: allow\n",
              "t.yaml:4:22: rules[0].if: unexpected token ')'");
  /* literal block: the line inside the block, and its column */
  CHECK_ERROR(HEAD "rules:\n  - if: |\n      a == 1 &&\n        b == )\n    action: allow\n",
              "t.yaml:6:14: rules[0].if: unexpected token ')'");
  /* folded block */
  CHECK_ERROR(HEAD "rules:\n  - if: >\n      a == 1 &&\n      b == )\n    action: allow\n",
              "t.yaml:6:12: rules[0].if: unexpected token ')'");
  /* the end of input: just past the last character, not the next line */
  CHECK_ERROR(HEAD "rules:\n  - if: |\n      a &&\n    action: allow\n",
              "t.yaml:5:11: rules[0].if: unexpected end of input");
  /* in a let */
  CHECK_ERROR(HEAD "let:\n  x: 1 +* 2\n", "t.yaml:4:9: let.x: unexpected token '*'");
  /* empty */
  CHECK_ERROR(HEAD "rules:\n  - if:\n    action: allow\n",
              "t.yaml:4:8: rules[0].if: expected an expression, got nothing (null)");
  /* the caret excerpt quotes the file's line */
  policy_diags d;
  policy_bundle *b =
      load_text(HEAD "rules:\n  - if: path.startsWith(\"/api\" ))\n    action: allow\n", &d);
  CHECK(b == NULL);
  int found = 0;
  for (size_t i = 0; i < d.n; i++) {
    char *t = diag_text(&d, i);
    if (!strcmp(t,
                "t.yaml:4:33: rules[0].if: unexpected token ')'\n"
                " |   - if: path.startsWith(\"/api\" ))\n"
                " |                                 ^\n"))
      found = 1;
    free(t);
  }
  CHECK(found);
  if (!found) dump_diags(&d);
  policy_diags_free(&d);
}

/* A malloc'd string: pre, then each (text, times) part in turn, then post. */
static char *repeat(const char *pre, const char *a, int na, const char *b, int nb,
                    const char *post) {
  size_t n = strlen(pre) + strlen(a) * (size_t)na + strlen(b) * (size_t)nb + strlen(post) + 1;
  char *s = malloc(n), *p = s;
  if (!s) return NULL;
  p += sprintf(p, "%s", pre);
  for (int i = 0; i < na; i++) p += sprintf(p, "%s", a);
  for (int i = 0; i < nb; i++) p += sprintf(p, "%s", b);
  sprintf(p, "%s", post);
  return s;
}

/* Collections nest at most 256 levels deep (the root mapping is the first),
 * aliases expanded; deeper is an error at the bracket, dash or alias that
 * crosses the limit, found before anything walks the tree. 200,000 nested
 * brackets used to overflow the stack while the version was computed. */
static void test_nesting_depth(void) {
  /* the attack: 400 KB of brackets under an unknown key; the 257th '[' of
   * the flow is past the limit wherever the file nests */
  char *t = repeat(HEAD "extra: ", "[", 200000, "]", 200000, "\n");
  CHECK_ERROR(t, "t.yaml:3:264: nesting deeper than the limit of 256 levels");
  free(t);
  t = repeat(HEAD "extra: ", "{a: ", 200000, "", 0, "\n");
  CHECK_ERROR(t, "t.yaml:3:1032: nesting deeper than the limit of 256 levels");
  free(t);
  t = repeat(HEAD "extra:\n", " [\n", 200000, "", 0, "\n");
  CHECK_ERROR(t, "t.yaml:260:2: nesting deeper than the limit of 256 levels");
  free(t);
  /* brackets in quoted scalars and comments are text */
  t = repeat(HEAD "constants:\n  x: \"", "[", 1000, "", 0, "\"  # [[[[[\n");
  policy_diags d;
  policy_bundle *b = load_text(t, &d);
  CHECK_MSG(b != NULL, "brackets inside a string");
  if (!b) dump_diags(&d);
  policy_bundle_free(b);
  policy_diags_free(&d);
  free(t);
  /* 256 levels load (root, constants, x's 254 lists), 257 do not: the
   * builder counts block and flow levels together */
  t = repeat(HEAD "constants:\n  x: ", "[", 254, "]", 254, "\n");
  b = load_text(t, &d);
  CHECK_MSG(b != NULL, "256 levels load");
  if (!b) dump_diags(&d);
  policy_bundle_free(b);
  policy_diags_free(&d);
  free(t);
  t = repeat(HEAD "constants:\n  x: ", "[", 255, "]", 255, "\n");
  CHECK_ERROR(t, "t.yaml:4:260: nesting deeper than the limit of 256 levels");
  free(t);
  /* block nesting: dashes on one line */
  t = repeat(HEAD "constants:\n  x:\n    ", "- ", 100000, "", 0, "1\n");
  CHECK_ERROR(t, "t.yaml:5:513: nesting deeper than the limit of 256 levels");
  free(t);
  /* aliases add the levels of what they name: each anchor is within the
   * limit, their chain is not */
  char *a0 = repeat("constants:\n  a0: &a0 ", "[", 200, "]", 200, "\n");
  char *a1 = repeat("  a1: ", "[", 100, "", 0, "*a0");
  char *a1e = repeat(a1, "]", 100, "", 0, "\n");
  size_t n = strlen(HEAD) + strlen(a0) + strlen(a1e) + 1;
  t = malloc(n);
  snprintf(t, n, "%s%s%s", HEAD, a0, a1e);
  CHECK_ERROR(t,
              "t.yaml:5:107: nesting deeper than the limit of 256 levels once alias '*a0' is "
              "expanded (it holds 200 levels, here under 102)");
  free(t), free(a0), free(a1), free(a1e);
}

static void test_yaml_syntax(void) {
  CHECK_ERROR("strategy: [a, b\n",
              "t.yaml:2:1: YAML syntax: flow sequence without a closing bracket");
  CHECK_ERROR("strategy: s\n---\nstrategy: t\n",
              "t.yaml:2:1: a strategy file holds one YAML document; this is a second");
  CHECK_ERROR("", "t.yaml:1:1: the file holds no YAML document (expected a strategy)");
  CHECK_ERROR("# just a comment\n",
              "t.yaml:1:1: the file holds no YAML document (expected a strategy)");
  CHECK_ERROR("- a\n- b\n",
              "t.yaml:1:1: a strategy file holds a mapping (strategy:, rules:, ...), not a list");
  CHECK_ERROR(
      "strategy: !foo s\ndefault: allow\n",
      "t.yaml:1:16: unsupported YAML tag '!foo' (only !!str, !!int, !!float, !!bool, !!null)");
  CHECK_ERROR(HEAD "constants: {x: 99999999999999999999}\n",
              "t.yaml:3:16: integer out of range (64 bits): '99999999999999999999'");
  CHECK_ERROR(HEAD "constants: {x: !!int abc}\n", "t.yaml:3:22: !!int needs an integer: 'abc'");
  CHECK_ERROR(HEAD "constants: {x: *nowhere}\n", "t.yaml:3:16: unknown alias '*nowhere'");
  CHECK_ERROR(HEAD "constants: {? [a]: 1}\n",
              "t.yaml:3:15: mapping keys must be plain names, not collections");
  /* not UTF-8 (libfyaml 0.7.12 would loop forever on this one) */
  CHECK_ERROR("strategy: s\ndefault: allow\n%\xca\n",
              "t.yaml:3:2: not valid UTF-8 (byte 0xCA): a policy file is UTF-8 text");
  CHECK_ERROR("strategy: s\xff\n",
              "t.yaml:1:12: not valid UTF-8 (byte 0xFF): a policy file is UTF-8 text");
  /* a lone CR and CRLF break lines as LF does */
  CHECK_ERROR("strategy: s\rdefault: allow\r\nzebra: 1\r", "t.yaml:3:1: unknown key 'zebra'");
  CHECK_ERROR("strategy: s\r\ndefault: allow\r\nrules:\r\n  - if: a == )\r\n    action: allow\r\n",
              "t.yaml:4:14: rules[0].if: unexpected token ')'");
  /* several value problems in one file are all reported */
  policy_diags d;
  policy_bundle *b = load_text("strategy: !foo s\nconstants: {x: !!int a, y: !!bool 1}\n", &d);
  CHECK(b == NULL);
  CHECK(d.errors == 3);
  policy_bundle_free(b);
  policy_diags_free(&d);
  /* syntax errors never reach stderr: checked by the CLI tests; here, no crash
   * on assorted garbage */
  const char *junk[] = {"{",
                        "]",
                        "a: b: c",
                        "\t- x",
                        "a:\n  - b\n c: d",
                        "'unterminated",
                        "&a [*a]",
                        "? ? ?",
                        "\xff\xfe",
                        "a: |\n x\n  y\n z"};
  for (size_t i = 0; i < sizeof junk / sizeof *junk; i++) {
    b = load_text(junk[i], &d);
    CHECK(b == NULL && d.errors > 0);
    policy_bundle_free(b);
    policy_diags_free(&d);
  }
}

static void test_bundle_level(void) {
  policy_diags d = {0};
  policy_bundle *b = NULL;
  policy_load_opts opts = {.store_dir = ""};
  CHECK(policy_bundle_load("tests/policy/fixtures/dup_names", &opts, &b, &d) == -1);
  CHECK(b == NULL);
  CHECK(
      has_diag(&d,
               "tests/policy/fixtures/dup_names/b.yaml:1:11: strategy: strategy 'same' is also "
               "defined in tests/policy/fixtures/dup_names/a.yaml: names are unique in a bundle"));
  policy_diags_free(&d);
  CHECK(policy_bundle_load("tests/policy/fixtures/dup_points", &opts, &b, &d) == -1);
  CHECK(has_diag(&d,
                 "tests/policy/fixtures/dup_points/b.yaml:2:19: decision_points[0]: decision point "
                 "'login' is served by both 'first' (tests/policy/fixtures/dup_points/a.yaml) and "
                 "'second': a request must pick one strategy (one of them may take only the "
                 "requests whose candidates are its actions: route: candidates)"));
  policy_diags_free(&d);
  CHECK(policy_bundle_load("tests/policy/fixtures/empty", &opts, &b, &d) == -1);
  CHECK(has_diag(&d,
                 "tests/policy/fixtures/empty: no strategy files (*.yaml, *.yml) in this folder"));
  policy_diags_free(&d);
  CHECK(policy_bundle_load("tests/policy/fixtures/no-such-folder", &opts, &b, &d) == -1);
  CHECK(
      has_diag(&d,
               "tests/policy/fixtures/no-such-folder: cannot open the bundle folder: No such file "
               "or directory"));
  policy_diags_free(&d);
  /* warnings as errors */
  opts.warnings_as_errors = 1;
  char dir[256], file[320];
  if (test_tmpdir(dir, sizeof dir, "errors")) {
    snprintf(file, sizeof file, "%s/w.yaml", dir);
    FILE *f = fopen(file, "w");
    if (f) {
      fputs("strategy: w\nrules:\n  - {if: frob(x), action: block}\ndefault: allow\n", f);
      fclose(f);
    }
    CHECK(policy_bundle_load(dir, &opts, &b, &d) == -1);
    CHECK(b == NULL && d.warnings == 1 && d.errors == 0);
    policy_diags_free(&d);
    unlink(file);
    rmdir(dir);
  }
}

static void test_warnings(void) {
  /* an earlier `true` wins always */
  CHECK_WARNING(HEAD
                "rules:\n  - if: 'true'\n    action: block\n  - if: x == 1\n    action: block\n",
                "t.yaml:6:9: warning: rules[1]: rule 'rule-2' can never match: rule 'rule-1' "
                "(rules[0], line 4) always matches first");
  /* a subset of parts, written differently, with a different action */
  CHECK_WARNING(HEAD
                "rules:\n"
                "  - {name: a, if: 'x == 1 && y.startsWith(\"p\")', action: block}\n"
                "  - {name: b, if: \"z && y.startsWith('p') && (x==1)\", action: allow}\n",
                "t.yaml:5:20: warning: rules[1]: rule 'b' can never match: rule 'a' (rules[0], "
                "line 4) matches whenever it does, and comes first (unless a request's candidates "
                "leave out 'block', which passes rule 'a' over)");
  /* not a subset: no warning */
  {
    policy_diags d;
    policy_bundle *b = load_text(
        HEAD "rules:\n  - {if: 'x == 1 && y', action: block}\n  - {if: x == 1, action: block}\n",
        &d);
    CHECK(b != NULL && d.warnings == 0);
    policy_bundle_free(b);
    policy_diags_free(&d);
  }
  CHECK_WARNING(HEAD "rules:\n  - if: x > 1 && frob(x)\n    action: block\n",
                "t.yaml:4:18: warning: rules[0].if: no library defines a function 'frob': "
                "evaluating this expression fails (on_error)");
  CHECK_WARNING(HEAD "let:\n  f: x.frob()\n",
                "t.yaml:4:8: warning: let.f: no library defines a function 'frob': evaluating "
                "this expression fails (on_error)");
  CHECK_WARNING("strategy: s\nactions: {allow: true, block: false}\ndefault: alow\n",
                "t.yaml:3:10: warning: default: action 'alow' is not declared in 'actions' (did "
                "you mean 'allow'?); it gets the default meaning (allowed)");
  CHECK_WARNING(HEAD "constants: {path: /x}\ntests:\n  - context: {path: /y}\n    expect: allow\n",
                "t.yaml:5:5: warning: tests[0]: the context field 'path' is hidden by the constant "
                "of the same name: rules see the constant");
  CHECK_WARNING(HEAD "tests:\n  - expect: deny\n",
                "t.yaml:4:5: warning: tests[0]: expects 'deny', an action this strategy never "
                "answers");
}

int main(void) {
  TEST_RUN(test_keys);
  TEST_RUN(test_required);
  TEST_RUN(test_types);
  TEST_RUN(test_names);
  TEST_RUN(test_let_cycles);
  TEST_RUN(test_expression_places);
  TEST_RUN(test_yaml_syntax);
  TEST_RUN(test_nesting_depth);
  TEST_RUN(test_bundle_level);
  TEST_RUN(test_warnings);
  TEST_END();
}
