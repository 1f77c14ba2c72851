/* test_findings.c — the behaviour behind each fuzzing finding, asserted
 * directly (the regression corpus in tests/fuzz/regressions/ only proves
 * that the inputs no longer crash or trip a target's checks):
 *   - `verdict hook --headless` writes a request the strict reader accepts
 *     (a stray NUL byte used to follow the candidates);
 *   - a backslash before a non-ASCII byte is an invalid escape, reported at
 *     the backslash (it used to surface as invalid UTF-8 further on);
 *   - repeated rule names are each reported against the first rule of that
 *     name, in rule order (the check is no longer quadratic);
 *   - a feature spec's places (line:column) stay exact on long lines and
 *     after multi-byte characters (they are now counted incrementally). */
#include <stdlib.h>
#include <string.h>

#include "agent/hook.h"
#include "core/arena.h"
#include "core/json.h"
#include "model/model.h"
#include "policy/policy.h"
#include "test.h"

static void headless_request_reads_back(void) {
  arena a;
  arena_init(&a, NULL, 0, 0);
  static const char in[] =
      "{\"session_id\":\"s1\",\"hook_event_name\":\"PreToolUse\",\"tool_name\":\"Bash\","
      "\"tool_input\":{\"command\":\"ls\"},\"cwd\":\"/tmp\"}";
  hook_call c;
  char why[256];
  CHECK_MSG(hook_parse(HOOK_CLAUDE, &a, in, sizeof in - 1, &c, why, sizeof why) == 0, "%s", why);
  for (int headless = 0; headless < 2; headless++) {
    json_buf b;
    json_buf_init(&b, NULL);
    CHECK(hook_write_request(&c, headless, &b) == 0);
    CHECK_MSG(strlen(b.data) == b.len, "a NUL byte inside the request (headless %d)", headless);
    value v;
    json_error e;
    CHECK_MSG(json_parse(&a, b.data, b.len, NULL, &v, &e) == 0, "%s: %s", e.message, b.data);
    CHECK(!headless || strstr(b.data, "\"candidates\":[\"allow\",\"deny\"],\"key\"") != NULL);
    json_buf_free(&b);
  }
  arena_free(&a);
}

static void escaped_non_ascii_byte(void) {
  arena a;
  arena_init(&a, NULL, 0, 0);
  static const char in[] = "[\"\\uD\\\xF0\x9F\x8C\x80\"]";
  value v;
  json_error e;
  CHECK(json_parse(&a, in, sizeof in - 1, NULL, &v, &e) != 0);
  CHECK_MSG(strstr(e.message, "invalid escape") != NULL, "%s", e.message);
  CHECK_MSG(e.offset == 5, "offset %zu", e.offset);
  static const char in2[] = "\"a\\\xC3\xA9\"";
  CHECK(json_parse(&a, in2, sizeof in2 - 1, NULL, &v, &e) != 0);
  CHECK_MSG(strstr(e.message, "invalid escape") != NULL && e.offset == 2, "%s at %zu", e.message,
            e.offset);
  arena_free(&a);
}

static void repeated_rule_names(void) {
  static const char y[] =
      "strategy: s\n"
      "rules:\n"
      "  - {name: b, if: 'true', action: allow}\n"
      "  - {name: a, if: 'true', action: allow}\n"
      "  - {name: b, if: 'true', action: allow}\n"
      "  - {name: a, if: 'true', action: allow}\n"
      "  - {name: b, if: 'true', action: allow}\n"
      "default: allow\n";
  policy_bundle *b = NULL;
  policy_diags d;
  memset(&d, 0, sizeof d);
  CHECK(policy_bundle_from_text("t.yaml", y, sizeof y - 1, &b, &d) != 0);
  const char *want[][2] = {{"rules[2].name", "duplicate rule name 'b' (rules[0] has it too)"},
                           {"rules[3].name", "duplicate rule name 'a' (rules[1] has it too)"},
                           {"rules[4].name", "duplicate rule name 'b' (rules[0] has it too)"}};
  size_t k = 0;
  for (size_t i = 0; i < d.n; i++) {
    if (!strstr(d.items[i].message, "duplicate rule name")) continue;
    CHECK_MSG(k < 3, "more duplicates than expected: %s", d.items[i].message);
    if (k < 3) {
      CHECK_STR(d.items[i].key, want[k][0]);
      CHECK_STR(d.items[i].message, want[k][1]);
    }
    k++;
  }
  CHECK_MSG(k == 3, "%zu duplicate diagnostics", k);
  policy_diags_free(&d);
  policy_bundle_free(b);
}

static void feature_spec_places(void) {
  /* The error is on line 3; the bad type sits after a multi-byte string. */
  static const char y[] =
      "model: m\n"
      "features:\n"
      "  - {name: \"\xC3\xA9\xC3\xA9\", expr: x, type: nope}\n";
  feature_spec *fs = NULL;
  char err[512];
  CHECK(features_load_yaml(y, sizeof y - 1, "f.yaml", NULL, &fs, err, sizeof err) != 0);
  CHECK_MSG(strncmp(err, "f.yaml:3:", 9) == 0, "%s", err);
  /* Column in characters: "  - {name: "éé", expr: x, type: " is 32 of them. */
  CHECK_MSG(strncmp(err, "f.yaml:3:33:", 12) == 0, "%s", err);
  features_free(fs);
}

int main(void) {
  TEST_RUN(headless_request_reads_back);
  TEST_RUN(escaped_non_ascii_byte);
  TEST_RUN(repeated_rule_names);
  TEST_RUN(feature_spec_places);
  TEST_END();
}
