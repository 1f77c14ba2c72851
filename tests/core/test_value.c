/* Values: CEL equality across numeric types, ordering rules, map lookup
 * with numeric keys, hashing consistent with equality, and the arena. */
#include <math.h>

#include "core/arena.h"
#include "core/value.h"
#include "test.h"

static void test_numeric_equality_crosses_types(void) {
  value i1 = value_int(1), u1 = value_uint(1), d1 = value_double(1.0);
  CHECK(value_equal(&i1, &u1));
  CHECK(value_equal(&u1, &d1));
  CHECK(value_equal(&d1, &i1));
  value neg = value_int(-1), umax = value_uint(UINT64_MAX);
  CHECK(!value_equal(&neg, &umax));
  value nan = value_double(NAN);
  CHECK(!value_equal(&nan, &nan));
  value s = value_str("1", 1);
  CHECK(!value_equal(&s, &i1)); /* unrelated types: false, not an error */
  value n = value_null(), f = value_bool(false);
  CHECK(!value_equal(&n, &f));
  CHECK(value_equal(&n, &n));
}

static void test_ordering(void) {
  int c;
  value a = value_int(-1), b = value_uint(0);
  CHECK(value_compare(&a, &b, &c) == 0 && c < 0);
  value big = value_int(INT64_MAX), bigd = value_double(9223372036854775808.0);
  /* conversion to double: INT64_MAX becomes 2^63 */
  CHECK(value_compare(&big, &bigd, &c) == 0 && c == 0);
  value u = value_uint(9223372036854775808ull), i = value_int(1);
  CHECK(value_compare(&i, &u, &c) == 0 && c < 0);
  value nan = value_double(NAN);
  CHECK(value_compare(&i, &nan, &c) == 0 && c == 2);
  value s1 = value_str("abc", 3), s2 = value_str("abd", 3), s3 = value_str("ab", 2);
  CHECK(value_compare(&s1, &s2, &c) == 0 && c < 0);
  CHECK(value_compare(&s1, &s3, &c) == 0 && c > 0);
  value n = value_null();
  CHECK(value_compare(&n, &n, &c) == -1);
  CHECK(value_compare(&s1, &i, &c) == -1);
  value t1 = value_timestamp(10, 5), t2 = value_timestamp(10, 6);
  CHECK(value_compare(&t1, &t2, &c) == 0 && c < 0);
  value d1 = value_duration(-1, -500), d2 = value_duration(-1, 0);
  CHECK(value_compare(&d1, &d2, &c) == 0 && c < 0);
}

static void test_lists_and_maps(void) {
  value l1[] = {value_double(1.0), value_double(2.0), value_int(3)};
  value l2[] = {value_uint(1), value_int(2), value_uint(3)};
  value a = value_list(l1, 3), b = value_list(l2, 3);
  CHECK(value_equal(&a, &b));
  map_entry m1[] = {{value_int(1), value_double(1.0)}, {value_uint(2), value_uint(3)}};
  map_entry m2[] = {{value_uint(2), value_double(3.0)}, {value_uint(1), value_int(1)}};
  value ma = value_map(m1, 2), mb = value_map(m2, 2);
  CHECK(value_equal(&ma, &mb));
  value k = value_double(2.0);
  const value *got = value_map_find(&ma, &k);
  CHECK(got && got->kind == V_UINT && got->u == 3);
  value k2 = value_double(2.5);
  CHECK(value_map_find(&ma, &k2) == NULL);
  map_entry m3[] = {{value_str("country", 7), value_str("CN", 2)}};
  value mc = value_map(m3, 1);
  got = value_map_get(&mc, "country", 7);
  CHECK(got && got->kind == V_STRING && got->n == 2);
  CHECK(value_map_get(&mc, "count", 5) == NULL);
}

static void test_hash_agrees_with_equality(void) {
  value a = value_int(42), b = value_uint(42), c = value_double(42.0);
  CHECK(value_hash(&a) == value_hash(&b));
  CHECK(value_hash(&a) == value_hash(&c));
  value s1 = value_str("hello world, long", 17), s2 = value_str("hello world, lonG", 17);
  CHECK(value_hash(&s1) != value_hash(&s2));
  value z = value_double(0.0), nz = value_double(-0.0);
  CHECK(value_hash(&z) == value_hash(&nz));
}

static void test_arena(void) {
  char buf[256];
  arena a;
  arena_init(&a, buf, sizeof buf, 0);
  void *p = arena_alloc(&a, 100);
  CHECK(p == (void *)buf || ((char *)p >= buf && (char *)p < buf + sizeof buf));
  CHECK(a.mallocs == 0);
  void *q = arena_alloc(&a, 1000); /* does not fit the first buffer */
  CHECK(q != NULL && a.mallocs == 1);
  memset(q, 1, 1000);
  arena_reset(&a);
  CHECK(a.used == 0);
  arena_free(&a);

  arena lim;
  arena_init(&lim, NULL, 0, 1024);
  CHECK(arena_alloc(&lim, 800) != NULL);
  CHECK(arena_alloc(&lim, 800) == NULL); /* over the limit */
  char *s = arena_strndup(&lim, "abc", 3);
  CHECK(s && strcmp(s, "abc") == 0);
  arena_free(&lim);

  arena g;
  arena_init(&g, NULL, 0, 0);
  char *r = arena_alloc(&g, 16);
  memcpy(r, "0123456789abcdef", 16);
  char *r2 = arena_realloc(&g, r, 16, 64);
  CHECK(r2 == r && memcmp(r2, "0123456789abcdef", 16) == 0); /* grew in place */
  for (int i = 0; i < 1000; i++) CHECK(arena_alloc(&g, 4000) != NULL);
  arena_free(&g);
}

static void test_errorf(void) {
  arena a;
  arena_init(&a, NULL, 0, 0);
  value e = value_errorf(&a, "no such key: '%s'", "x");
  CHECK(e.kind == V_ERROR && e.n == strlen("no such key: 'x'"));
  CHECK(memcmp(e.s, "no such key: 'x'", e.n) == 0);
  arena_free(&a);
  CHECK(strcmp(value_kind_name(V_NULL), "null_type") == 0);
}

int main(void) {
  test_numeric_equality_crosses_types();
  test_ordering();
  test_lists_and_maps();
  test_hash_agrees_with_equality();
  test_arena();
  test_errorf();
  TEST_END();
}
