/* test_json_put.c — the field-by-field writers of core/json (json_put_*)
 * write what json_write writes: a string of every length from 0 to 40 with
 * every byte kind that needs care (a quote, a backslash, a control byte,
 * UTF-8, invalid UTF-8, DEL) at every place, numbers at their limits, the
 * minifier on text with whitespace in and out of strings; and a buffer that
 * cannot grow stops writing and says so, never writing past its end. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/json.h"
#include "test.h"

static void test_strings_as_json_write_string(void) {
  static const char *const odd[] = {"\"", "\\", "\n", "\x01", "\x7f", "\xc3\xa9", "\xff", "/"};
  arena a;
  arena_init(&a, NULL, 0, 0);
  size_t checked = 0, wrong = 0;
  for (size_t n = 0; n <= 40; n++) {
    for (size_t k = 0; k <= sizeof odd / sizeof *odd; k++) { /* 0: plain */
      size_t on = k ? strlen(odd[k - 1]) : 0;
      for (size_t at = 0; k ? at + on <= n : at == 0; at++) {
        char s[64];
        for (size_t i = 0; i < n; i++) s[i] = (char)('a' + i % 26);
        if (k) memcpy(s + at, odd[k - 1], on);
        arena_reset(&a);
        json_buf p, r;
        json_buf_init(&p, &a);
        json_buf_init(&r, &a);
        JSON_PUT(&p, "x"); /* not at the start of the buffer */
        json_put_strn(&p, s, n);
        json_put_char(&p, ',');
        CHECK(json_put_end(&p) == 0);
        json_buf_put(&r, "x", 1);
        json_write_string(&r, s, n);
        json_buf_putc(&r, ',');
        checked++;
        if (p.len != r.len || memcmp(p.data, r.data, r.len) != 0 || p.data[p.len] != '\0') {
          if (wrong++ < 5)
            fprintf(stderr, "length %zu, kind %zu at %zu: %s vs %s\n", n, k, at, p.data, r.data);
        }
      }
    }
  }
  printf("%zu strings written, %zu different\n", checked, wrong);
  CHECK(checked > 1000 && wrong == 0);
  arena_free(&a);
}

static void test_numbers_and_literals(void) {
  arena a;
  arena_init(&a, NULL, 0, 0);
  json_buf b;
  json_buf_init(&b, &a);
  json_put_u64(&b, 0);
  json_put_char(&b, ' ');
  json_put_u64(&b, 9);
  json_put_char(&b, ' ');
  json_put_u64(&b, 10);
  json_put_char(&b, ' ');
  json_put_u64(&b, UINT64_MAX);
  json_put_char(&b, ' ');
  json_put_i64(&b, INT64_MIN);
  json_put_char(&b, ' ');
  json_put_i64(&b, -7);
  json_put_char(&b, ' ');
  json_put_bool(&b, true);
  json_put_bool(&b, false);
  json_put_str(&b, NULL);
  json_put_str(&b, "ok");
  CHECK(json_put_end(&b) == 0);
  CHECK_MSG(strcmp(b.data,
                   "0 9 10 18446744073709551615 -9223372036854775808 -7 truefalsenull\"ok\"") == 0,
            "%s", b.data);
  json_buf_init(&b, &a);
  const char *in = " { \"a b\" : [ 1 , 2.50e+1 ,\t\"x\\\" y\\\\\" ] ,\n \"c\":{} } ";
  json_put_minified(&b, in, strlen(in));
  CHECK(json_put_end(&b) == 0);
  CHECK_MSG(strcmp(b.data, "{\"a b\":[1,2.50e+1,\"x\\\" y\\\\\"],\"c\":{}}") == 0, "%s", b.data);
  arena_free(&a);
}

/* A buffer whose arena refuses to grow: writes stop, oom is set, and
 * json_put_end says so. */
static void test_no_room(void) {
  arena a;
  arena_init(&a, NULL, 0, 4096); /* the buffer cannot pass 4 KiB */
  json_buf b;
  json_buf_init(&b, &a);
  for (int i = 0; i < 100000 && !b.oom; i++) json_put_strn(&b, "0123456789abcdef", 16);
  CHECK(b.oom);
  CHECK(json_put_end(&b) != 0);
  /* the reservation refuses a size that would overflow (len + extra + 1
   * wrapped to 0 once read as room enough) */
  json_buf c;
  json_buf_init(&c, NULL);
  json_put_char(&c, 'x');
  CHECK(json_buf_reserve(&c, SIZE_MAX - 1) == -1 && c.oom);
  json_buf_free(&c);
  arena_free(&a);
}

int main(void) {
  TEST_RUN(test_strings_as_json_write_string);
  TEST_RUN(test_numbers_and_literals);
  TEST_RUN(test_no_room);
  TEST_END();
}
