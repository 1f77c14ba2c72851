/* test_ftoa.c — float32 to text: the fewest digits that read back to the
 * same float, in dtoa_shortest's layout, and float_decimal, the double
 * those digits stand for. The model's scores and feature rows are float32;
 * snapshots and answers print them with these. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtoa.h"
#include "test.h"

static void known_values(void) {
  static const struct {
    float f;
    const char *text;
  } cases[] = {
      {0.1f, "0.1"},           {0.9f, "0.9"},           {0.5f, "0.5"},
      {1.0f, "1"},             {-2.25f, "-2.25"},       {0.97848982f, "0.9784898"},
      {123456.789f, "123456.79"}, {16777216.0f, "1.6777216e+07"}, {1e-10f, "1e-10"},
      {0.0f, "0"},             {-0.0f, "-0"},           {3.4e38f, "3.4e+38"},
      {1.5e-45f, "1e-45"},     {1e20f, "1e+20"},
  };
  char out[32];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ftoa_shortest(cases[i].f, out);
    CHECK_STR(out, cases[i].text);
  }
  /* what people read: 0.9f is 0.9, so `model.score >= 0.9` holds for it */
  CHECK(float_decimal(0.9f) == 0.9);
  CHECK(float_decimal(0.1f) == 0.1);
  CHECK((double)0.9f != 0.9);
  CHECK(isnan(float_decimal(NAN)) && isinf(float_decimal(INFINITY)));
}

/* Every 40009th bit pattern (about 100,000 floats, every exponent): the
 * text reads back exactly with strtof and with strtod + cast, no longer
 * than %.9g, and float_decimal casts back to the float. */
static void round_trips(void) {
  char out[32], g[32];
  unsigned long bad = 0, longer = 0, n = 0;
  for (uint64_t u = 1; u < 0xffffffffu; u += 40009) {
    uint32_t w = (uint32_t)u;
    float f;
    memcpy(&f, &w, sizeof f);
    if (!isfinite(f)) continue;
    n++;
    size_t len = ftoa_shortest(f, out);
    if (strtof(out, NULL) != f || (float)strtod(out, NULL) != f || (float)float_decimal(f) != f) {
      if (bad++ < 5) fprintf(stderr, "%a -> %s does not read back\n", (double)f, out);
    }
    /* the digits (without sign, point and exponent) never exceed %.9g's */
    snprintf(g, sizeof g, "%.9g", (double)f);
    size_t dg = 0, df = 0;
    for (const char *p = g; *p && *p != 'e'; p++) dg += *p >= '0' && *p <= '9';
    for (const char *p = out; *p && *p != 'e'; p++) df += *p >= '0' && *p <= '9';
    if (df > dg + 1 && len > strlen(g)) { /* +1: a leading "0." */
      if (longer++ < 5) fprintf(stderr, "%a -> %s, longer than %s\n", (double)f, out, g);
    }
  }
  CHECK_MSG(bad == 0, "%lu of %lu floats do not read back", bad, n);
  CHECK_MSG(longer == 0, "%lu of %lu floats print longer than %%.9g", longer, n);
  CHECK(n > 100000);
}

/* Densely where scores and features live, [0.001, 10^6]: the fast path. */
static void round_trips_dense(void) {
  char out[32];
  unsigned long bad = 0, n = 0;
  float lo = 0.001f, hi = 1e6f;
  uint32_t a, b;
  memcpy(&a, &lo, 4);
  memcpy(&b, &hi, 4);
  for (uint32_t w = a; w <= b; w += 997) {
    float f;
    memcpy(&f, &w, sizeof f);
    n++;
    ftoa_shortest(f, out);
    if (strtof(out, NULL) != f || (float)float_decimal(f) != f) bad++;
  }
  CHECK_MSG(bad == 0, "%lu of %lu floats do not read back", bad, n);
}

int main(void) {
  known_values();
  round_trips();
  round_trips_dense();
  TEST_END();
}
