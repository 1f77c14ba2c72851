/* dtoa.c — shortest round-trip digits of a double, laid out like Go's
 * strconv.FormatFloat(d, 'g', -1, 64). See dtoa.h for the format.
 *
 * How the digits are found, and why this is correct without a big-number
 * library:
 *
 * 1. Fast path. For k = 0, 1, 2, ... compute m = d × 10^k. When m is an
 *    integer below 10^15 and m / 10^k == d, the decimal m × 10^-k reads back
 *    to d: m and 10^k (k <= 22) are exact doubles, so the division is the
 *    correctly rounded value of that decimal, which is what a correct
 *    strtod returns. It is also the shortest: a double carries 15 decimal
 *    digits faithfully (DBL_DIG), so two different decimals of at most 15
 *    significant digits never read back to the same normal double — the one
 *    we found is the only candidate of its length or less. Typical values
 *    (0.93, 123.456, 1500) finish here in a few multiplications.
 *
 * 2. Otherwise, for n = 15, 16, 17 significant digits (1..17 for subnormals,
 *    where the DBL_DIG argument does not hold) take the correctly rounded
 *    n-digit decimal from printf("%.*e") and check that strtod reads it back
 *    to d. The nearest n-digit decimal is the best candidate; it can miss
 *    while a neighbour one unit away still reads back when d is a power of
 *    two (the gap below it is half the gap above), so the two neighbours are
 *    tried too, which is the choice Go's shortest algorithm makes. 17 digits
 *    always succeed.
 *
 * The round-trip check builds "DIGITSe-N" (no decimal point) so the C
 * locale's decimal separator never matters; the digits are read out of the
 * printf text by skipping whatever separator the locale printed. */
#include "core/dtoa.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The decimal d = 0.D1D2...Dnd × 10^dp, digits without trailing zeros. */
typedef struct decimal {
  char digits[20];
  int nd;
  int dp;
} decimal;

static const double pow10_exact[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                       1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                       1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* Sets dec from the integer m > 0 and the exponent e (value m × 10^e). */
static void decimal_from_int(decimal *dec, uint64_t m, int e) {
  char tmp[24];
  int n = 0;
  while (m % 10 == 0) {
    m /= 10;
    e++;
  }
  while (m > 0) {
    tmp[n++] = (char)('0' + m % 10);
    m /= 10;
  }
  for (int i = 0; i < n; i++) dec->digits[i] = tmp[n - 1 - i];
  dec->nd = n;
  dec->dp = n + e;
}

static int fast_digits(double d, decimal *dec) {
#if !defined(FLT_EVAL_METHOD) || FLT_EVAL_METHOD != 0
  /* x87-style excess precision would round twice: take the slow path. */
  (void)d;
  (void)dec;
  return 0;
#endif
  for (int k = 0; k <= 22; k++) {
    double m = d * pow10_exact[k];
    if (m >= 1e15) return 0;
    if (m == floor(m) && m / pow10_exact[k] == d) {
      decimal_from_int(dec, (uint64_t)m, -k);
      return 1;
    }
  }
  return 0;
}

/* Does the decimal m × 10^e read back to d? */
static int reads_back(uint64_t m, int e, double d) {
  char buf[48];
  snprintf(buf, sizeof buf, "%llue%d", (unsigned long long)m, e);
  return strtod(buf, NULL) == d;
}

/* The correctly rounded n-digit decimal of d > 0 as m × 10^e. */
static void nearest_digits(double d, int n, uint64_t *m, int *e) {
  char buf[64];
  snprintf(buf, sizeof buf, "%.*e", n - 1, d);
  uint64_t v = 0;
  const char *p = buf;
  for (; *p && *p != 'e'; p++)
    if (*p >= '0' && *p <= '9') v = v * 10 + (uint64_t)(*p - '0');
  int x = (*p == 'e') ? atoi(p + 1) : 0;
  *m = v;
  *e = x - (n - 1);
}

static void slow_digits(double d, decimal *dec) {
  int first = d < DBL_MIN ? 1 : 15;
  for (int n = first; n <= 17; n++) {
    uint64_t m;
    int e;
    nearest_digits(d, n, &m, &e);
    if (reads_back(m, e, d)) {
      decimal_from_int(dec, m, e);
      return;
    }
    if (n == 17) break; /* cannot happen: 17 digits always read back */
    /* The neighbours one unit away: at most one of them can read back
     * (if both did, m between them would too). */
    uint64_t lo = m - 1, hi = m + 1;
    if (lo > 0 && reads_back(lo, e, d)) {
      decimal_from_int(dec, lo, e);
      return;
    }
    if (reads_back(hi, e, d)) {
      decimal_from_int(dec, hi, e);
      return;
    }
  }
  uint64_t m;
  int e;
  nearest_digits(d, 17, &m, &e);
  decimal_from_int(dec, m, e);
}

static size_t put_exponent(char *o, int x) {
  size_t n = 0;
  o[n++] = 'e';
  o[n++] = x < 0 ? '-' : '+';
  unsigned u = (unsigned)(x < 0 ? -x : x);
  if (u >= 100) {
    o[n++] = (char)('0' + u / 100);
    u %= 100;
  }
  o[n++] = (char)('0' + u / 10);
  o[n++] = (char)('0' + u % 10);
  return n;
}

/* Writes dec after the n bytes already in out (a sign), in Go's 'g' layout. */
static size_t layout(const decimal *pd, char out[32], size_t n) {
  decimal dec = *pd;

  int x = dec.dp - 1;
  if (x < -4 || x >= 6) {
    out[n++] = dec.digits[0];
    if (dec.nd > 1) {
      out[n++] = '.';
      memcpy(out + n, dec.digits + 1, (size_t)dec.nd - 1);
      n += (size_t)dec.nd - 1;
    }
    n += put_exponent(out + n, x);
  } else if (dec.dp <= 0) {
    out[n++] = '0';
    out[n++] = '.';
    for (int i = dec.dp; i < 0; i++) out[n++] = '0';
    memcpy(out + n, dec.digits, (size_t)dec.nd);
    n += (size_t)dec.nd;
  } else if (dec.dp >= dec.nd) {
    memcpy(out + n, dec.digits, (size_t)dec.nd);
    n += (size_t)dec.nd;
    for (int i = dec.nd; i < dec.dp; i++) out[n++] = '0';
  } else {
    memcpy(out + n, dec.digits, (size_t)dec.dp);
    n += (size_t)dec.dp;
    out[n++] = '.';
    memcpy(out + n, dec.digits + dec.dp, (size_t)(dec.nd - dec.dp));
    n += (size_t)(dec.nd - dec.dp);
  }
  out[n] = '\0';
  return n;
}

size_t dtoa_shortest(double d, char out[32]) {
  size_t n = 0;
  if (isnan(d)) {
    memcpy(out, "NaN", 4);
    return 3;
  }
  if (signbit(d)) {
    out[n++] = '-';
    d = -d;
  }
  if (isinf(d)) {
    if (n == 0) out[n++] = '+';
    memcpy(out + n, "Inf", 4);
    return n + 3;
  }
  if (d == 0) {
    out[n++] = '0';
    out[n] = '\0';
    return n;
  }

  decimal dec;
  if (!fast_digits(d, &dec)) slow_digits(d, &dec);
  return layout(&dec, out, n);
}

/* ---- float32 ----
 *
 * The shortest decimal D that reads back to a float f, found as for
 * doubles: for k = 0, 1, ... take m, the integer nearest to f × 10^k, and
 * t = m / 10^k, the double nearest to D (m and 10^k are exact, the division
 * correctly rounded). When t rounds to f, D does too, unless t sits exactly
 * on a midpoint between f and its neighbour (double rounding: D could lie
 * on the other side of it); that case, and anything the loop misses, takes
 * the exact search below (float_slow) instead. Below 2^24 an integer is the
 * only integer that reads back to itself, and a decimal with more fraction
 * digits has more digits, so the first k that works gives the fewest. */
static int float_digits(float f, uint64_t *pm, int *pk, double *pt) {
#if !defined(FLT_EVAL_METHOD) || FLT_EVAL_METHOD != 0
  (void)f, (void)pm, (void)pk, (void)pt;
  return 0;
#endif
  double d = (double)f;
  /* From 2^24 up, floats are spaced more than 1 apart, and a decimal with
   * fewer digits than the nearest integer may read back too: slow path. */
  if (d >= 16777216.0) return 0;
  for (int k = 0; k <= 22; k++) {
    double m = nearbyint(d * pow10_exact[k]);
    if (m >= 1e10) return 0;
    if (m < 1) continue;
    double t = m / pow10_exact[k];
    if ((float)t != f) continue;
    if (t != d) {
      float nb = nextafterf(f, t > d ? INFINITY : 0.0f);
      if (t == (d + (double)nb) / 2) return 0; /* on the midpoint: exact path */
    }
    *pm = (uint64_t)m;
    *pk = k;
    *pt = t;
    return 1;
  }
  return 0;
}

/* Does the decimal m × 10^e read back to the float f? */
static int reads_back_float(uint64_t m, int e, float f) {
  char buf[48];
  snprintf(buf, sizeof buf, "%llue%d", (unsigned long long)m, e);
  return strtof(buf, NULL) == f;
}

/* Magnitudes the loop does not reach (and the rare midpoint): the nearest
 * n-digit decimal for n = 1..9, and its neighbours, checked with strtof —
 * as slow_digits does for doubles. 9 digits always read back. */
static void float_slow(float f, uint64_t *pm, int *pe) {
  double d = (double)f;
  for (int n = 1; n <= 9; n++) {
    uint64_t m;
    int e;
    nearest_digits(d, n, &m, &e);
    if (reads_back_float(m, e, f)) goto found;
    if (m > 1 && reads_back_float(m - 1, e, f)) {
      m--;
      goto found;
    }
    if (reads_back_float(m + 1, e, f)) {
      m++;
      goto found;
    }
    continue;
  found:
    *pm = m;
    *pe = e;
    return;
  }
  nearest_digits(d, 9, pm, pe);
}

double float_decimal(float f) {
  if (!isfinite(f) || f == 0) return (double)f;
  uint64_t m;
  int k;
  double t;
  float a = fabsf(f);
  if (!float_digits(a, &m, &k, &t)) {
    char buf[48];
    float_slow(a, &m, &k);
    snprintf(buf, sizeof buf, "%llue%d", (unsigned long long)m, k);
    t = strtod(buf, NULL);
  }
  return f < 0 ? -t : t;
}

size_t ftoa_shortest(float f, char out[32]) {
  if (!isfinite(f) || f == 0) return dtoa_shortest((double)f, out);
  uint64_t m;
  int k;
  double t;
  size_t n = 0;
  if (f < 0) out[n++] = '-';
  decimal dec;
  if (float_digits(fabsf(f), &m, &k, &t)) {
    decimal_from_int(&dec, m, -k);
  } else {
    int e;
    float_slow(fabsf(f), &m, &e);
    decimal_from_int(&dec, m, e);
  }
  return layout(&dec, out, n);
}
