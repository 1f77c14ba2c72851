/* timefmt.c — timestamps and durations as text, and the calendar arithmetic
 * under them (see timefmt.h).
 *
 * Written by hand rather than on top of libc: timegm/gmtime_r depend on the
 * platform's time_t range and strptime on the locale, and verdict must give
 * the same answer on every machine and in every thread. The calendar is the
 * proleptic Gregorian one, computed with the era/day-of-era method (400-year
 * eras of 146097 days), which is exact for any year and needs no tables.
 *
 * Durations are kept as seconds plus nanoseconds with the same sign, never as
 * one nanosecond count: CEL's range (about ±10000 years) does not fit in
 * int64 nanoseconds. Parsing accepts Go's duration syntax ("1h30m", "1.5s",
 * "-2us", "300ms"), of which the protobuf JSON form ("1.5s") is a subset;
 * fraction digits past the ninth are ignored (truncated), as a nanosecond is
 * the finest unit there is. Leap seconds do not exist here, as in CEL. */
#include "core/timefmt.h"

#include <stdbool.h>

#define NANOS_PER_SEC 1000000000LL
#define SECS_PER_DAY 86400LL

int64_t timefmt_days_from_civil(int64_t year, int month, int day) {
  int64_t y = year - (month <= 2);
  int64_t era = (y >= 0 ? y : y - 399) / 400;
  int64_t yoe = y - era * 400;                         /* [0, 399] */
  int64_t mp = month > 2 ? month - 3 : month + 9;      /* March = 0 */
  int64_t doy = (153 * mp + 2) / 5 + day - 1;          /* [0, 365] */
  int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy; /* [0, 146096] */
  return era * 146097 + doe - 719468; /* 719468: days from 0000-03-01 to 1970-01-01 */
}

void timefmt_civil_from_days(int64_t days, int64_t *year, int *month, int *day) {
  int64_t z = days + 719468;
  int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  int64_t doe = z - era * 146097;
  int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  int64_t mp = (5 * doy + 2) / 153;
  int d = (int)(doy - (153 * mp + 2) / 5 + 1);
  int m = (int)(mp < 10 ? mp + 3 : mp - 9);
  *year = yoe + era * 400 + (m <= 2);
  *month = m;
  *day = d;
}

static bool is_leap(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

static int days_in_month(int64_t y, int m) {
  static const unsigned char dim[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && is_leap(y) ? 29 : dim[m - 1];
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* Reads exactly n digits at s[*i]; returns -1 when they are not there. */
static int fixed_digits(const char *s, size_t len, size_t *i, int n) {
  if (*i + (size_t)n > len) return -1;
  int v = 0;
  for (int k = 0; k < n; k++) {
    char c = s[*i + (size_t)k];
    if (!is_digit(c)) return -1;
    v = v * 10 + (c - '0');
  }
  *i += (size_t)n;
  return v;
}

static bool expect(const char *s, size_t len, size_t *i, char c) {
  if (*i >= len || s[*i] != c) return false;
  (*i)++;
  return true;
}

int timefmt_parse_rfc3339(const char *s, size_t len, int64_t *sec, int32_t *nanos) {
  size_t i = 0;
  int year = fixed_digits(s, len, &i, 4);
  if (year < 0 || !expect(s, len, &i, '-')) return -1;
  int mon = fixed_digits(s, len, &i, 2);
  if (mon < 1 || mon > 12 || !expect(s, len, &i, '-')) return -1;
  int day = fixed_digits(s, len, &i, 2);
  if (day < 1 || day > days_in_month(year, mon)) return -1;
  if (i >= len || (s[i] != 'T' && s[i] != 't')) return -1;
  i++;
  int hour = fixed_digits(s, len, &i, 2);
  if (hour < 0 || hour > 23 || !expect(s, len, &i, ':')) return -1;
  int min = fixed_digits(s, len, &i, 2);
  if (min < 0 || min > 59 || !expect(s, len, &i, ':')) return -1;
  int secs = fixed_digits(s, len, &i, 2);
  if (secs < 0 || secs > 59) return -1;
  int32_t ns = 0;
  if (i < len && s[i] == '.') {
    i++;
    int digits = 0;
    while (i < len && is_digit(s[i])) {
      if (digits == 9) return -1; /* more precision than a nanosecond */
      ns = ns * 10 + (s[i] - '0');
      digits++;
      i++;
    }
    if (digits == 0) return -1;
    for (; digits < 9; digits++) ns *= 10;
  }
  int64_t offset = 0;
  if (i < len && (s[i] == 'Z' || s[i] == 'z')) {
    i++;
  } else if (i < len && (s[i] == '+' || s[i] == '-')) {
    int sign = s[i] == '-' ? -1 : 1;
    i++;
    int oh = fixed_digits(s, len, &i, 2);
    if (oh < 0 || oh > 23 || !expect(s, len, &i, ':')) return -1;
    int om = fixed_digits(s, len, &i, 2);
    if (om < 0 || om > 59) return -1;
    offset = sign * (oh * 3600LL + om * 60LL);
  } else {
    return -1;
  }
  if (i != len) return -1;
  int64_t t = timefmt_days_from_civil(year, mon, day) * SECS_PER_DAY + hour * 3600LL + min * 60LL +
              secs - offset;
  if (t < TIMEFMT_MIN_SEC || t > TIMEFMT_MAX_SEC) return -1;
  *sec = t;
  *nanos = ns;
  return 0;
}

/* Writes v as exactly `width` digits (v >= 0, fits). */
static char *put_fixed(char *p, uint64_t v, int width) {
  for (int k = width - 1; k >= 0; k--) {
    p[k] = (char)('0' + v % 10);
    v /= 10;
  }
  return p + width;
}

/* Writes v in decimal, no padding. */
static char *put_uint(char *p, uint64_t v) {
  char tmp[20];
  int n = 0;
  do {
    tmp[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  while (n) *p++ = tmp[--n];
  return p;
}

size_t timefmt_format_rfc3339(int64_t sec, int32_t nanos, char *out) {
  /* Floor division so that times before 1970 land on the right day. */
  int64_t days = sec / SECS_PER_DAY, rem = sec % SECS_PER_DAY;
  if (rem < 0) {
    rem += SECS_PER_DAY;
    days--;
  }
  int64_t y;
  int m, d;
  timefmt_civil_from_days(days, &y, &m, &d);
  char *p = out;
  if (y < 0) {
    *p++ = '-';
    y = -y;
  }
  p = y > 9999 ? put_uint(p, (uint64_t)y) : put_fixed(p, (uint64_t)y, 4);
  *p++ = '-';
  p = put_fixed(p, (uint64_t)m, 2);
  *p++ = '-';
  p = put_fixed(p, (uint64_t)d, 2);
  *p++ = 'T';
  p = put_fixed(p, (uint64_t)(rem / 3600), 2);
  *p++ = ':';
  p = put_fixed(p, (uint64_t)(rem / 60 % 60), 2);
  *p++ = ':';
  p = put_fixed(p, (uint64_t)(rem % 60), 2);
  if (nanos > 0 && nanos < NANOS_PER_SEC) {
    *p++ = '.';
    if (nanos % 1000000 == 0) {
      p = put_fixed(p, (uint64_t)(nanos / 1000000), 3);
    } else if (nanos % 1000 == 0) {
      p = put_fixed(p, (uint64_t)(nanos / 1000), 6);
    } else {
      p = put_fixed(p, (uint64_t)nanos, 9);
    }
  }
  *p++ = 'Z';
  *p = '\0';
  return (size_t)(p - out);
}

/* A unit of Go's duration syntax: whole seconds per unit for units of a
 * second or more, else nanoseconds per unit. */
typedef struct duration_unit {
  const char *name;
  uint8_t len;
  int64_t secs;
  int64_t nanos;
} duration_unit;

static const duration_unit duration_units[] = {
    {"ns", 2, 0, 1},
    {"us", 2, 0, 1000},
    {"\xc2\xb5s", 3, 0, 1000}, /* µs */
    {"\xce\xbcs", 3, 0, 1000},
    /* μs */ {"ms", 2, 0, 1000000},
    {"s", 1, 1, 0},
    {"m", 1, 60, 0},
    {"h", 1, 3600, 0},
};

static const duration_unit *find_unit(const char *s, size_t n) {
  for (size_t k = 0; k < sizeof duration_units / sizeof duration_units[0]; k++) {
    const duration_unit *u = &duration_units[k];
    if (u->len != n) continue;
    size_t j = 0;
    while (j < n && u->name[j] == s[j]) j++;
    if (j == n) return u;
  }
  return NULL;
}

int timefmt_parse_duration(const char *s, size_t len, int64_t *sec, int32_t *nanos) {
  size_t i = 0;
  bool neg = false;
  if (i < len && (s[i] == '-' || s[i] == '+')) {
    neg = s[i] == '-';
    i++;
  }
  if (i == len) return -1;
  if (len - i == 1 && s[i] == '0') { /* the one number that needs no unit */
    *sec = 0;
    *nanos = 0;
    return 0;
  }
  /* Magnitude so far; kept below the limit so nothing overflows. */
  const uint64_t limit = (uint64_t)TIMEFMT_MAX_DURATION_SEC + 1;
  uint64_t tsec = 0, tns = 0;
  while (i < len) {
    uint64_t whole = 0;
    bool have_whole = false, have_frac = false;
    while (i < len && is_digit(s[i])) {
      if (whole > (UINT64_MAX - 9) / 10) return -1; /* out of range whatever the unit */
      whole = whole * 10 + (uint64_t)(s[i] - '0');
      have_whole = true;
      i++;
    }
    uint64_t frac9 = 0; /* first nine fraction digits, as nanoseconds of one unit */
    int fdigits = 0;
    if (i < len && s[i] == '.') {
      i++;
      while (i < len && is_digit(s[i])) {
        if (fdigits < 9) {
          frac9 = frac9 * 10 + (uint64_t)(s[i] - '0');
          fdigits++;
        }
        have_frac = true;
        i++;
      }
    }
    if (!have_whole && !have_frac) return -1;
    for (; fdigits < 9; fdigits++) frac9 *= 10;
    size_t ustart = i;
    while (i < len && s[i] != '.' && !is_digit(s[i])) i++;
    const duration_unit *u = find_unit(s + ustart, i - ustart);
    if (!u) return -1;
    if (u->secs) {
      if (whole > limit / (uint64_t)u->secs) return -1;
      tsec += whole * (uint64_t)u->secs;
      tns += frac9 * (uint64_t)u->secs; /* < 1e9 * 3600: fits */
    } else {
      uint64_t per_sec = (uint64_t)(NANOS_PER_SEC / u->nanos);
      tsec += whole / per_sec;
      tns += (whole % per_sec) * (uint64_t)u->nanos + frac9 * (uint64_t)u->nanos / NANOS_PER_SEC;
    }
    tsec += tns / NANOS_PER_SEC;
    tns %= NANOS_PER_SEC;
    if (tsec > limit) return -1;
  }
  if (tsec > (uint64_t)TIMEFMT_MAX_DURATION_SEC) return -1;
  *sec = neg ? -(int64_t)tsec : (int64_t)tsec;
  *nanos = neg ? -(int32_t)tns : (int32_t)tns;
  return 0;
}

size_t timefmt_format_duration(int64_t sec, int32_t nanos, char *out) {
  char *p = out;
  uint64_t s;
  uint32_t ns;
  if (sec < 0 || (sec == 0 && nanos < 0)) {
    *p++ = '-';
    s = (uint64_t)0 - (uint64_t)sec;
    ns = (uint32_t)(nanos < 0 ? -(int64_t)nanos : nanos);
  } else {
    s = (uint64_t)sec;
    ns = (uint32_t)nanos;
  }
  p = put_uint(p, s);
  if (ns) {
    *p++ = '.';
    int digits = 9;
    while (ns % 10 == 0) {
      ns /= 10;
      digits--;
    }
    p = put_fixed(p, ns, digits);
  }
  *p++ = 's';
  *p = '\0';
  return (size_t)(p - out);
}
