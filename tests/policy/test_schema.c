/* test_schema.c — the `input:` schema and what `verdict check` finds with
 * it: undefined names, undeclared fields and type mistakes, each at the
 * exact line:col inside the YAML scalar with its message and hint; a
 * realistic schema'd strategy with no diagnostic at all; unknown type names;
 * optional fields; and nothing new reported when no schema is declared. */
#include <stdlib.h>
#include <string.h>

#include "helpers.h"

#define HEAD              \
  "strategy: s\n"         \
  "default: allow\n"      \
  "input:\n"              \
  "  path: string\n"      \
  "  count: int\n"        \
  "  ratio: double\n"     \
  "  ok: bool\n"          \
  "  amount: number\n"    \
  "  tags: [string]\n"    \
  "  headers: {}\n"       \
  "  env:\n"              \
  "    country: string\n" \
  "  when?: timestamp\n"  \
  "  extra: any\n"        \
  "constants:\n"          \
  "  limit: 10\n"         \
  "  names: [a, b]\n"
/* HEAD is 17 lines: a rule's `if` is on line 19, its value at column 9 */
#define RULE(cond) HEAD "rules:\n  - if: " cond "\n    action: block\n"

/* Loads text and checks it loads with no diagnostic at all. */
static void check_clean(const char *text) {
  policy_diags d;
  policy_bundle *b = load_text(text, &d);
  CHECK_MSG(b != NULL && d.n == 0, "expected no diagnostic for:\n%s", text);
  if (d.n) dump_diags(&d);
  policy_bundle_free(b);
  policy_diags_free(&d);
}

static void test_undefined_names(void) {
  CHECK_ERROR(RULE("pat == \"x\""),
              "t.yaml:19:9: rules[0].if: undefined name 'pat' (not in input:, constants or "
              "let); did you mean 'path'?");
  CHECK_ERROR(RULE("count > 1 && zzz"),
              "t.yaml:19:22: rules[0].if: undefined name 'zzz' (not in input:, constants or let)");
  CHECK_ERROR(RULE("count < limt"),
              "t.yaml:19:17: rules[0].if: undefined name 'limt' (not in input:, constants or "
              "let); did you mean 'limit'?");
  /* in a let, with the let's key */
  CHECK_ERROR(HEAD "let:\n  p: pth.lowerAscii()\nrules:\n  - if: p == \"x\"\n    action: block\n",
              "t.yaml:19:6: let.p: undefined name 'pth' (not in input:, constants or let); "
              "did you mean 'path'?");
  /* every kind of known name passes */
  check_clean(HEAD
              "let:\n  p: path.lowerAscii()\n"
              "rules:\n"
              "  - if: p == \"x\" && count < limit && \"a\" in names && request.key == \"k\"\n"
              "    action: block\n"
              "  - if: context.path == \"/\" && tags.exists(t, t == \"x\") && type(count) == int\n"
              "    action: block\n"
              "  - if: cel.bind(x, count + 1, x > 2) && [1, 2].all(i, i > 0)\n"
              "    action: block\n"
              "  - if: has(context.when) && timestamp(when) < timestamp(\"2030-01-01T00:00:00Z\")\n"
              "    action: block\n");
}

static void test_fields(void) {
  CHECK_ERROR(RULE("env.contry == \"US\""),
              "t.yaml:19:13: rules[0].if: undeclared field 'contry' of 'env' (did you mean "
              "'country'?)");
  CHECK_ERROR(RULE("context.env.zone == \"x\""),
              "t.yaml:19:21: rules[0].if: undeclared field 'zone' of 'env'");
  CHECK_ERROR(RULE("context.pth == \"x\""),
              "t.yaml:19:17: rules[0].if: undeclared field 'pth' of 'input:' (did you mean "
              "'path'?)");
  CHECK_ERROR(RULE("request.kee == \"x\""),
              "t.yaml:19:17: rules[0].if: undeclared field 'kee' of 'request' (did you mean "
              "'key'?)");
  CHECK_ERROR(RULE("has(env.contry)"),
              "t.yaml:19:17: rules[0].if: undeclared field 'contry' of 'env' (did you mean "
              "'country'?)");
  CHECK_ERROR(RULE("path.x == 1"),
              "t.yaml:19:14: rules[0].if: selecting field 'x' of a string value: only maps "
              "have fields");
  /* maps ({} and any) have any field */
  check_clean(
      RULE("headers.accept == \"x\" && headers[\"user-agent\"] == \"y\" && extra.a.b == 1"));
}

static void test_types(void) {
  CHECK_ERROR(RULE("path == 3"),
              "t.yaml:19:14: rules[0].if: comparing a string with an int: string == int is "
              "always false");
  CHECK_ERROR(RULE("count < \"3\""),
              "t.yaml:19:15: rules[0].if: comparing an int with a string: int < string fails "
              "when evaluated (no such overload)");
  CHECK_ERROR(RULE("ok != 1"),
              "t.yaml:19:12: rules[0].if: comparing a bool with an int: bool != int is always "
              "true");
  CHECK_ERROR(RULE("count + ratio > 1.0"),
              "t.yaml:19:15: rules[0].if: int + double: convert with double(x)");
  CHECK_ERROR(RULE("ratio * 2 > 1.0"),
              "t.yaml:19:15: rules[0].if: double * int: convert with double(x)");
  CHECK_ERROR(RULE("path - \"x\" == \"\""),
              "t.yaml:19:14: rules[0].if: arithmetic on a string: string - string");
  CHECK_ERROR(RULE("path + 1 == \"\""),
              "t.yaml:19:14: rules[0].if: arithmetic on a string: string + int (only string + "
              "string joins strings)");
  CHECK_ERROR(RULE("ok + 1 > 0"), "t.yaml:19:12: rules[0].if: arithmetic on a bool: bool + int");
  CHECK_ERROR(RULE("'\"a\" in path'"),
              "t.yaml:19:17: rules[0].if: 'in' needs a list or a map on its right, got string");
  CHECK_ERROR(RULE("count.startsWith(\"1\")"),
              "t.yaml:19:15: rules[0].if: 'startsWith' is a string method, called on an int");
  CHECK_ERROR(RULE("tags.lowerAscii() == \"\""),
              "t.yaml:19:14: rules[0].if: 'lowerAscii' is a string method, called on a list");
  CHECK_ERROR(RULE("size(count) > 1"),
              "t.yaml:19:9: rules[0].if: size() of an int: only strings, bytes, lists and maps "
              "have a size");
  CHECK_ERROR(RULE("count[0] == 1"),
              "t.yaml:19:14: rules[0].if: indexing an int value: only lists and maps can be "
              "indexed");
  CHECK_ERROR(RULE("path"), "t.yaml:19:9: rules[0].if: the condition is a string, not a bool");
  CHECK_ERROR(RULE("count + 1"), "t.yaml:19:9: rules[0].if: the condition is an int, not a bool");
  CHECK_ERROR(RULE("path && ok"), "t.yaml:19:9: rules[0].if: '&&' needs a bool, got string");
  /* through a let: its type is inferred */
  CHECK_ERROR(HEAD "let:\n  n: size(tags)\nrules:\n  - if: n == \"2\"\n    action: block\n",
              "t.yaml:21:11: rules[0].if: comparing an int with a string: int == string is "
              "always false");
  /* a comprehension variable has the list's element type */
  CHECK_ERROR(RULE("tags.exists(t, t > 1)"),
              "t.yaml:19:26: rules[0].if: comparing a string with an int: string > int fails "
              "when evaluated (no such overload)");
  CHECK_ERROR(RULE("count.exists(x, x > 1)"),
              "t.yaml:19:9: rules[0].if: 'exists' iterates over a list or a map, not an int");
  /* unsure (dyn) is never an error */
  check_clean(RULE("'(ok ? path : 1) == extra'"));
  /* what CEL allows: mixed numeric comparisons, number, string + string, dyn */
  check_clean(
      RULE("count < ratio && amount + 1 > 2 && path + \"/\" == \"//\" && extra + 1 > 0 && "
           "double(count) + ratio > 1.0 && \"x\" in headers && size(path) > 0 && "
           "request.time > timestamp(\"2026-01-01T00:00:00Z\")"));
}

static void test_schema_errors(void) {
  CHECK_ERROR("strategy: s\ndefault: allow\ninput:\n  path: strng\n",
              "t.yaml:4:9: input.path: unknown type 'strng' (did you mean 'string'?)");
  CHECK_ERROR("strategy: s\ndefault: allow\ninput:\n  env:\n    n: [boool]\n",
              "t.yaml:5:9: input.env.n[]: unknown type 'boool' (did you mean 'bool'?)");
  CHECK_ERROR("strategy: s\ndefault: allow\ninput:\n  x: zebra\n",
              "t.yaml:4:6: input.x: unknown type 'zebra': use string, int, uint, double, number, "
              "bool, timestamp, any, map, list, a mapping of fields or [type]");
  CHECK_ERROR("strategy: s\ndefault: allow\ninput:\n  x: [string, int]\n",
              "t.yaml:4:6: input.x: a list type has exactly one item, the type of its elements "
              "(e.g. [string])");
  CHECK_ERROR("strategy: s\ndefault: allow\ninput: [string]\n",
              "t.yaml:3:8: input: expected a mapping of the context's fields to their types");
  CHECK_ERROR("strategy: s\ndefault: allow\ninput:\n  a b: string\n",
              "t.yaml:4:3: input: 'a b' is not a valid field name: use a letter or '_' then "
              "letters, digits, '_' or '-' (and a final '?' for an optional field)");
  CHECK_ERROR("strategy: s\ndefault: allow\ninpt:\n  a: string\n",
              "t.yaml:3:1: unknown key 'inpt' (did you mean 'input'?)");
}

static void test_optional(void) {
  /* `name?:` declares the field `name`; it is read and tested like any other */
  check_clean(
      "strategy: s\ndefault: allow\ninput:\n  session?:\n    mfa_age_s?: int\n"
      "rules:\n  - if: has(context.session) && has(session.mfa_age_s) && "
      "session.mfa_age_s < 900\n    action: block\n");
  CHECK_ERROR(
      "strategy: s\ndefault: allow\ninput:\n  session?:\n    mfa_age_s?: int\n"
      "rules:\n  - if: session.mfa_age_s == \"1\"\n    action: block\n",
      "t.yaml:7:27: rules[0].if: comparing an int with a string: int == string is always "
      "false");
  CHECK_ERROR(
      "strategy: s\ndefault: allow\ninput:\n  session?: {a: int}\n"
      "rules:\n  - if: has(context.session) || sesion.a > 1\n    action: block\n",
      "t.yaml:6:33: rules[0].if: undefined name 'sesion' (not in input:, constants or "
      "let); did you mean 'session'?");
}

static void test_no_schema(void) {
  /* without input:, unknown names are context fields and types are not checked */
  check_clean(
      "strategy: s\ndefault: allow\nrules:\n"
      "  - if: pat == 3 && env.contry == \"US\" && size(count) > 1\n    action: block\n");
}

static void test_realistic(void) {
  policy_load_opts o = {.store_dir = ""}; /* write no version store */
  policy_diags d;
  policy_bundle *b = NULL;
  memset(&d, 0, sizeof d);
  policy_bundle_load("tests/policy/fixtures/schema_good", &o, &b, &d);
  CHECK(b != NULL);
  CHECK_MSG(d.errors == 0 && d.warnings == 0, "schema_good: %zu errors, %zu warnings", d.errors,
            d.warnings);
  if (d.n) dump_diags(&d);
  policy_bundle_free(b);
  policy_diags_free(&d);

  /* the same strategy with a typo in a field is caught */
  b = NULL;
  memset(&d, 0, sizeof d);
  policy_bundle_load("tests/policy/fixtures/schema_bad", &o, &b, &d);
  CHECK(b == NULL);
  CHECK(d.errors == 2);
  CHECK(has_diag(&d,
                 "tests/policy/fixtures/schema_bad/gate.yaml:14:13: rules[0].if: "
                 "undeclared field 'contry' of 'env' (did you mean 'country'?)"));
  CHECK(has_diag(&d,
                 "tests/policy/fixtures/schema_bad/gate.yaml:17:53: rules[1].if: "
                 "comparing an int with a string: int >= string fails when evaluated (no such "
                 "overload)"));
  if (d.errors != 2) dump_diags(&d);
  policy_bundle_free(b);
  policy_diags_free(&d);

  /* the examples declare no input: and stay clean */
  b = NULL;
  memset(&d, 0, sizeof d);
  policy_bundle_load("examples/policies", &o, &b, &d);
  CHECK(b != NULL);
  CHECK(d.errors == 0 && d.warnings == 0);
  policy_bundle_free(b);
  policy_diags_free(&d);
}

int main(void) {
  TEST_RUN(test_undefined_names);
  TEST_RUN(test_fields);
  TEST_RUN(test_types);
  TEST_RUN(test_schema_errors);
  TEST_RUN(test_optional);
  TEST_RUN(test_no_schema);
  TEST_RUN(test_realistic);
  TEST_END();
}
