/* test_error.c — the one error table (core/error.h): every VD_E* code has a
 * name and a message, the names are distinct identifiers that never change
 * (the documented "code" of the CLI's and the server's error objects), the
 * codes run 0, -1, -2 ... with no gap, a number that is no code is "unknown",
 * and error_fill / error_clear fill and clear what a reader looks at. */
#include <string.h>

#include "core/error.h"
#include "test.h"

static const struct {
  int code;
  const char *name, *message;
} table[] = {
#define X(c, n, m) {c, n, m},
    VD_ERR_MAP(X)
#undef X
};
#define NTABLE (sizeof table / sizeof table[0])

static int is_identifier(const char *s) {
  if (!*s) return 0;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || *s == '_')) return 0;
  return 1;
}

static void test_every_code_has_a_name_and_a_message(void) {
  for (size_t i = 0; i < NTABLE; i++) {
    const char *n = vd_err_name(table[i].code), *m = vd_strerror(table[i].code);
    CHECK_MSG(!strcmp(n, table[i].name) && !strcmp(m, table[i].message),
              "code %d: not the table's name and message", table[i].code);
    CHECK_MSG(is_identifier(n), "code %d: name '%s' is not a lower-case identifier", table[i].code,
              n);
    CHECK_MSG(strcmp(n, VD_ERR_UNKNOWN_NAME) != 0, "code %d is named unknown", table[i].code);
    CHECK_MSG(m[0] && strcmp(m, VD_ERR_UNKNOWN_MESSAGE) != 0, "code %d: message '%s'",
              table[i].code, m);
    for (size_t j = 0; j < i; j++) {
      CHECK_MSG(strcmp(n, table[j].name) != 0, "codes %d and %d share the name '%s'", table[i].code,
                table[j].code, n);
      CHECK_MSG(strcmp(m, table[j].message) != 0, "codes %d and %d share a message", table[i].code,
                table[j].code);
    }
  }
}

static void test_codes_run_without_a_gap(void) {
  /* The table lists VD_OK, VD_EINVAL (-1), ... in order: a code defined in
   * verdict.h but left out of the table would show as a gap or a short table. */
  for (size_t i = 0; i < NTABLE; i++)
    CHECK_MSG(table[i].code == -(int)i, "entry %zu is code %d", i, table[i].code);
  CHECK(table[NTABLE - 1].code == VD_EBUSY); /* the last code verdict.h defines */
}

static void test_documented_names_stay(void) {
  /* docs/server.md and docs/cli.md name these; a program matches on them. */
  CHECK_STR(vd_err_name(VD_EJSON), "json");
  CHECK_STR(vd_err_name(VD_EREQUEST), "request");
  CHECK_STR(vd_err_name(VD_ELIMIT), "limit");
  CHECK_STR(vd_err_name(VD_ENOMEM), "memory");
  CHECK_STR(vd_err_name(VD_ENOTFOUND), "not_found");
  CHECK_STR(vd_err_name(VD_ENOCANDIDATE), "no_candidate");
  CHECK_STR(vd_err_name(VD_ESNAPSHOT), "not_recorded");
  CHECK_STR(vd_err_name(VD_EPOLICY), "policy");
  CHECK_STR(vd_err_name(VD_EINVAL), "invalid");
}

static void test_unknown_numbers(void) {
  static const int odd[] = {1, 42, VD_EBUSY - 1, -1000, -2147483647 - 1};
  for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
    CHECK_STR(vd_err_name(odd[i]), VD_ERR_UNKNOWN_NAME);
    CHECK_STR(vd_strerror(odd[i]), VD_ERR_UNKNOWN_MESSAGE);
  }
}

static void test_fill_and_clear(void) {
  vd_error e;
  memset(&e, 'x', sizeof e);
  CHECK(error_fill(&e, VD_EREQUEST, 3, 9, "$.context", "%s must be %d", "it", 5) == VD_EREQUEST);
  CHECK(e.code == VD_EREQUEST && e.line == 3 && e.column == 9);
  CHECK_STR(e.path, "$.context");
  CHECK_STR(e.message, "it must be 5");
  CHECK(error_fill(&e, VD_EINVAL, 0, 0, NULL, "no path") == VD_EINVAL);
  CHECK_STR(e.path, "");
  /* a message longer than the buffer is cut, still terminated */
  char longer[2000];
  memset(longer, 'a', sizeof longer - 1);
  longer[sizeof longer - 1] = '\0';
  error_fill(&e, VD_ELIMIT, 0, 0, NULL, "%s", longer);
  CHECK(strlen(e.message) == sizeof e.message - 1);
  CHECK(error_fill(NULL, VD_EJSON, 1, 1, NULL, "nowhere") == VD_EJSON);
  error_clear(&e);
  CHECK(e.code == 0 && e.line == 0 && e.column == 0 && !e.path[0] && !e.message[0]);
  error_clear(NULL);
}

int main(void) {
  TEST_RUN(test_every_code_has_a_name_and_a_message);
  TEST_RUN(test_codes_run_without_a_gap);
  TEST_RUN(test_documented_names_stay);
  TEST_RUN(test_unknown_numbers);
  TEST_RUN(test_fill_and_clear);
  TEST_END();
}
