/* lib_time.c — timestamps and durations in the condition language:
 * timestamp(string|int), duration(string), and the accessors getFullYear,
 * getMonth, getDayOfYear, getDayOfMonth, getDate, getDayOfWeek, getHours,
 * getMinutes, getSeconds, getMilliseconds (on timestamps, optionally in a
 * time zone; getHours..getMilliseconds also on durations).
 *
 * Time zones are either fixed offsets ("+05:30", "-08:00", "02:00") or IANA
 * names ("America/Los_Angeles", "UTC"). Names are read from the system's
 * compiled tz database (TZif files under /usr/share/zoneinfo, Debian package
 * tzdata), parsed here: libc's localtime_r would need setenv("TZ"), which is
 * process-global and not thread-safe. A TZif file lists the transitions of a
 * zone; times after the last one follow the POSIX TZ rule in its footer
 * ("PST8PDT,M3.2.0,M11.1.0"), which is evaluated here as well. "Local" is
 * refused: a decision must not depend on the machine it runs on.
 *
 * A constant zone argument is loaded once, when the expression is compiled
 * (prepare); an unknown constant zone is then a compile error. A zone
 * computed at run time is read from disk on each call — a system call on the
 * hot path, so policies should name their zones literally.
 *
 * Accessor semantics are CEL's: months, days of the year and days of the
 * month count from 0, getDate from 1; Sunday is day 0 of the week. Duration
 * accessors give the whole duration in that unit, truncated toward zero,
 * except getMilliseconds, which is the millisecond part of the second. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/timefmt.h"
#include "expr/lib.h"

#define NO_OVERLOAD VALUE_ERR("no such overload")
#define OOM_ERROR VALUE_ERR("out of memory")

#define TZ_DIR "/usr/share/zoneinfo/"
#define TZ_MAX_FILE (1 << 20)

/* ------------------------------------------------- constructors */

static value fn_timestamp(eval_ctx *ctx, const value *args, uint32_t nargs, void *aux) {
  const value *v = &args[0];
  switch (v->kind) {
    case V_TIMESTAMP:
      return *v;
    case V_INT:
      if (v->i < TIMEFMT_MIN_SEC || v->i > TIMEFMT_MAX_SEC)
        return VALUE_ERR("timestamp: seconds out of range (years 0001 to 9999)");
      return value_timestamp(v->i, 0);
    case V_STRING: {
      int64_t sec;
      int32_t ns;
      if (timefmt_parse_rfc3339(v->s, v->n, &sec, &ns))
        return value_errorf(ctx->arena,
                            "timestamp: '%.*s' is not an RFC 3339 time between years 0001 and "
                            "9999 (e.g. 2024-01-31T12:00:00Z)",
                            (int)(v->n > 64 ? 64 : v->n), v->s);
      return value_timestamp(sec, ns);
    }
    default:
      return NO_OVERLOAD;
  }
}

static value fn_duration(eval_ctx *ctx, const value *args, uint32_t nargs, void *aux) {
  const value *v = &args[0];
  if (v->kind == V_DURATION) return *v;
  if (v->kind != V_STRING) return NO_OVERLOAD;
  int64_t sec;
  int32_t ns;
  if (timefmt_parse_duration(v->s, v->n, &sec, &ns))
    return value_errorf(ctx->arena,
                        "duration: '%.*s' is not a duration within ±10000 years (e.g. 1h30m, "
                        "1.5s, 250ms)",
                        (int)(v->n > 64 ? 64 : v->n), v->s);
  return value_duration(sec, ns);
}

/* --------------------------------------------------- time zones */

/* A date rule of a POSIX TZ string: Mm.w.d, Jn (1..365, no Feb 29) or n
 * (0..365), plus the local time of day of the change in seconds. */
typedef struct tz_date {
  char kind; /* 'M', 'J' or 'N' */
  int m, w, d, n;
  int32_t secs;
} tz_date;

typedef struct tz_rule {
  int32_t std_off, dst_off; /* seconds east of UTC */
  int has_dst;
  tz_date start, end;
} tz_rule;

typedef struct tz_zone {
  int32_t fixed; /* offset for fixed zones (ntypes == 0 and !has_rule) */
  uint32_t ntrans, ntypes;
  int64_t *trans; /* transition times, ascending */
  uint8_t *tidx;  /* type of each transition */
  int32_t *utoff; /* offset of each type */
  int has_rule;
  tz_rule rule;
} tz_zone;

typedef void *(*tz_alloc_fn)(void *ud, size_t size);

static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* [+-]h[h][:mm[:ss]] with hours up to max_h; returns seconds or -1 (sets *ok). */
static int32_t posix_time(const char **pp, const char *end, int max_h, int *ok) {
  const char *p = *pp;
  int sign = 1;
  if (p < end && (*p == '+' || *p == '-')) sign = *p++ == '-' ? -1 : 1;
  int32_t parts[3] = {0, 0, 0};
  for (int k = 0; k < 3; k++) {
    if (k) {
      if (p >= end || *p != ':') break;
      p++;
    }
    const char *start = p;
    int v = 0;
    while (p < end && is_digit(*p) && p - start < 3) v = v * 10 + (*p++ - '0');
    if (p == start || (k && (p - start != 2 || v > 59)) || (!k && v > max_h)) {
      *ok = 0;
      return 0;
    }
    parts[k] = v;
  }
  *pp = p;
  return sign * (parts[0] * 3600 + parts[1] * 60 + parts[2]);
}

/* A zone abbreviation: three or more letters, or <...>. */
static int posix_name(const char **pp, const char *end) {
  const char *p = *pp;
  if (p < end && *p == '<') {
    while (p < end && *p != '>') p++;
    if (p >= end) return 0;
    *pp = p + 1;
    return 1;
  }
  const char *start = p;
  while (p < end && ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z'))) p++;
  if (p - start < 3) return 0;
  *pp = p;
  return 1;
}

static int posix_date(const char **pp, const char *end, tz_date *d) {
  const char *p = *pp;
  int ok = 1;
  memset(d, 0, sizeof *d);
  if (p < end && *p == 'M') {
    int vals[3];
    p++;
    for (int k = 0; k < 3; k++) {
      if (k) {
        if (p >= end || *p != '.') return 0;
        p++;
      }
      const char *start = p;
      int v = 0;
      while (p < end && is_digit(*p) && p - start < 2) v = v * 10 + (*p++ - '0');
      if (p == start) return 0;
      vals[k] = v;
    }
    if (vals[0] < 1 || vals[0] > 12 || vals[1] < 1 || vals[1] > 5 || vals[2] > 6) return 0;
    d->kind = 'M', d->m = vals[0], d->w = vals[1], d->d = vals[2];
  } else {
    d->kind = 'N';
    if (p < end && *p == 'J') d->kind = 'J', p++;
    const char *start = p;
    int v = 0;
    while (p < end && is_digit(*p) && p - start < 3) v = v * 10 + (*p++ - '0');
    if (p == start || v > 365 || (d->kind == 'J' && v < 1)) return 0;
    d->n = v;
  }
  d->secs = 7200; /* 02:00 local by default */
  if (p < end && *p == '/') {
    p++;
    d->secs = posix_time(&p, end, 167, &ok); /* RFC 8536 allows -167..167 hours */
    if (!ok) return 0;
  }
  *pp = p;
  return 1;
}

/* "std offset [dst [offset] [,start[/time],end[/time]]]" */
static int posix_rule_parse(const char *s, size_t n, tz_rule *r) {
  const char *p = s, *end = s + n;
  int ok = 1;
  memset(r, 0, sizeof *r);
  if (!posix_name(&p, end)) return 0;
  r->std_off = -posix_time(&p, end, 24, &ok); /* POSIX offsets count west of UTC */
  if (!ok) return 0;
  if (p == end) return 1;
  if (!posix_name(&p, end)) return 0;
  r->has_dst = 1;
  r->dst_off = r->std_off + 3600;
  if (p < end && *p != ',') {
    r->dst_off = -posix_time(&p, end, 24, &ok);
    if (!ok) return 0;
  }
  if (p == end) { /* no rule given: POSIX leaves it to the system; use the US rule */
    r->start = (tz_date){'M', 3, 2, 0, 0, 7200};
    r->end = (tz_date){'M', 11, 1, 0, 0, 7200};
    return 1;
  }
  if (*p++ != ',' || !posix_date(&p, end, &r->start)) return 0;
  if (p >= end || *p++ != ',' || !posix_date(&p, end, &r->end)) return 0;
  return p == end;
}

static int is_leap(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

/* Days since the epoch of rule date d in year y. */
static int64_t rule_day(const tz_date *d, int64_t y) {
  if (d->kind == 'J')
    return timefmt_days_from_civil(y, 1, 1) + d->n - 1 + (is_leap(y) && d->n >= 60);
  if (d->kind == 'N') return timefmt_days_from_civil(y, 1, 1) + d->n;
  static const int dim[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  int64_t first = timefmt_days_from_civil(y, d->m, 1);
  int wd = (int)(((first + 4) % 7 + 7) % 7); /* 1970-01-01 was a Thursday */
  int64_t day = first + (d->d - wd + 7) % 7 + 7 * (d->w - 1);
  int len = dim[d->m - 1] + (d->m == 2 && is_leap(y));
  while (day >= first + len) day -= 7;
  return day;
}

static int32_t rule_offset(const tz_rule *r, int64_t t) {
  if (!r->has_dst) return r->std_off;
  int64_t local = t + r->std_off;
  int64_t days = local >= 0 ? local / 86400 : -((-local + 86399) / 86400);
  int64_t y;
  int m, d;
  timefmt_civil_from_days(days, &y, &m, &d);
  /* The change to DST happens at a standard-time moment, the change back at
   * a daylight-time one. */
  int64_t start = rule_day(&r->start, y) * 86400 + r->start.secs - r->std_off;
  int64_t end = rule_day(&r->end, y) * 86400 + r->end.secs - r->dst_off;
  int in_dst = start < end ? (t >= start && t < end) : !(t >= end && t < start);
  return in_dst ? r->dst_off : r->std_off;
}

static int32_t zone_offset(const tz_zone *z, int64_t t) {
  if (z->ntypes == 0 && !z->has_rule) return z->fixed;
  if (z->ntrans == 0 || t < z->trans[0]) {
    if (z->ntrans == 0 && z->has_rule) return rule_offset(&z->rule, t);
    return z->ntypes ? z->utoff[0] : z->fixed;
  }
  if (t >= z->trans[z->ntrans - 1] && z->has_rule) return rule_offset(&z->rule, t);
  uint32_t lo = 0, hi = z->ntrans; /* last transition <= t */
  while (hi - lo > 1) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (z->trans[mid] <= t)
      lo = mid;
    else
      hi = mid;
  }
  return z->utoff[z->tidx[lo]];
}

static uint32_t be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int64_t be64(const uint8_t *p) { return (int64_t)((uint64_t)be32(p) << 32 | be32(p + 4)); }

/* Parses a TZif file (RFC 8536, versions 1 to 4). */
static int tzif_parse(const uint8_t *d, size_t n, tz_zone *z, tz_alloc_fn alloc, void *ud) {
  memset(z, 0, sizeof *z);
  if (n < 44 || memcmp(d, "TZif", 4) != 0) return -1;
  int version = d[4];
  size_t off = 0;
  int tsize = 4;
  for (int pass = 0;; pass++) {
    if (off + 44 > n || memcmp(d + off, "TZif", 4) != 0) return -1;
    uint32_t isut = be32(d + off + 20), isstd = be32(d + off + 24), leap = be32(d + off + 28),
             timecnt = be32(d + off + 32), typecnt = be32(d + off + 36),
             charcnt = be32(d + off + 40);
    size_t body = (size_t)timecnt * (size_t)(tsize + 1) + (size_t)typecnt * 6 + charcnt +
                  (size_t)leap * (size_t)(tsize + 4) + isstd + isut;
    if (timecnt > 100000 || typecnt > 256 || body > n - off - 44) return -1;
    if (pass == 0 && version >= '2') { /* skip the 32-bit data for the 64-bit block */
      off += 44 + body;
      tsize = 8;
      continue;
    }
    const uint8_t *p = d + off + 44;
    z->ntrans = timecnt;
    z->ntypes = typecnt;
    z->trans = alloc(ud, (timecnt ? timecnt : 1) * sizeof(int64_t));
    z->tidx = alloc(ud, timecnt ? timecnt : 1);
    z->utoff = alloc(ud, (typecnt ? typecnt : 1) * sizeof(int32_t));
    if (!z->trans || !z->tidx || !z->utoff) return -2;
    for (uint32_t i = 0; i < timecnt; i++, p += tsize)
      z->trans[i] = tsize == 8 ? be64(p) : (int64_t)(int32_t)be32(p);
    for (uint32_t i = 0; i < timecnt; i++) {
      z->tidx[i] = *p++;
      if (z->tidx[i] >= typecnt) return -1;
    }
    for (uint32_t i = 0; i < typecnt; i++, p += 6) z->utoff[i] = (int32_t)be32(p);
    off += 44 + body;
    break;
  }
  if (version >= '2' && off < n && d[off] == '\n') { /* footer: "\n<POSIX TZ>\n" */
    const uint8_t *s = d + off + 1, *e = memchr(s, '\n', n - off - 1);
    if (e && e > s && posix_rule_parse((const char *)s, (size_t)(e - s), &z->rule)) z->has_rule = 1;
  }
  if (z->ntypes == 0 && !z->has_rule) return -1;
  return 0;
}

/* "+05:30", "-08:00", "02:00", "-0:30": hours and minutes east of UTC. */
static int parse_fixed_offset(const char *s, size_t n, int32_t *off) {
  size_t i = 0;
  int sign = 1;
  if (i < n && (s[i] == '+' || s[i] == '-')) sign = s[i++] == '-' ? -1 : 1;
  int h = 0, digits = 0;
  while (i < n && is_digit(s[i]) && digits < 2) h = h * 10 + (s[i++] - '0'), digits++;
  if (!digits || i >= n || s[i++] != ':') return -1;
  if (n - i != 2 || !is_digit(s[i]) || !is_digit(s[i + 1])) return -1;
  int m = (s[i] - '0') * 10 + (s[i + 1] - '0');
  if (h > 23 || m > 59) return -1;
  *off = sign * (h * 3600 + m * 60);
  return 0;
}

/* Whether name is safe to append to TZ_DIR: "Area/Location" style only. */
static int tz_name_ok(const char *s, size_t n) {
  if (n == 0 || n > 64 || s[0] == '/' || s[0] == '.') return 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    int ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || is_digit(c) || c == '_' ||
             c == '-' || c == '+' || c == '/' || c == '.';
    if (!ok) return 0;
    if (c == '.' && i + 1 < n && s[i + 1] == '.') return 0;
    if (c == '/' && i + 1 < n && s[i + 1] == '.') return 0;
  }
  return 1;
}

static void *heap_alloc(void *ud, size_t size) {
  (void)ud;
  return malloc(size);
}

/* Loads zone `name` (a fixed offset or an IANA name). Returns 0, -1 when
 * unknown, -2 when out of memory. */
static int tz_load(const char *name, size_t n, tz_zone *z, tz_alloc_fn alloc, void *ud) {
  memset(z, 0, sizeof *z);
  if (memchr(name, ':', n)) return parse_fixed_offset(name, n, &z->fixed);
  if ((n == 3 && memcmp(name, "UTC", 3) == 0) || n == 0) return 0;
  if (!tz_name_ok(name, n)) return -1;
  char path[128];
  snprintf(path, sizeof path, "%s%.*s", TZ_DIR, (int)n, name);
  FILE *f = fopen(path, "rbe");
  if (!f) return -1;
  long size = -1;
  if (fseek(f, 0, SEEK_END) == 0) size = ftell(f);
  if (size <= 0 || size > TZ_MAX_FILE || fseek(f, 0, SEEK_SET) != 0) {
    fclose(f);
    return -1; /* a directory ("America"), or not a zone file */
  }
  uint8_t *buf = alloc(ud, (size_t)size);
  if (!buf) {
    fclose(f);
    return -2;
  }
  size_t len = fread(buf, 1, (size_t)size, f);
  fclose(f);
  int rc = tzif_parse(buf, len, z, alloc, ud);
  if (alloc == heap_alloc) free(buf);
  return rc;
}

static void *arena_tz_alloc(void *ud, size_t size) { return arena_alloc(ud, size); }

/* A zone loaded at compile time: one malloc'd block per array. */
static void release_tz(void *aux) {
  tz_zone *z = aux;
  if (!z) return;
  free(z->trans);
  free(z->tidx);
  free(z->utoff);
  free(z);
}

static void *prepare_tz(const value *args, const uint8_t *is_const, uint32_t nargs, int defer_jit,
                        char *err, size_t err_size) {
  if (err_size) err[0] = '\0';
  if (nargs < 2 || !is_const[1] || args[1].kind != V_STRING) return NULL;
  tz_zone *z = calloc(1, sizeof *z);
  if (!z) {
    snprintf(err, err_size, "out of memory loading a time zone");
    return NULL;
  }
  int rc = tz_load(args[1].s, args[1].n, z, heap_alloc, NULL);
  if (rc) {
    release_tz(z);
    if (rc == -2)
      snprintf(err, err_size, "out of memory loading a time zone");
    else
      snprintf(err, err_size,
               "unknown time zone '%.*s' (use an IANA name like 'America/New_York' with tzdata "
               "installed, or an offset like '+05:30')",
               (int)(args[1].n > 64 ? 64 : args[1].n), args[1].s);
    return NULL;
  }
  return z;
}

/* ----------------------------------------------------- accessors */

enum field {
  F_YEAR,
  F_MONTH,
  F_DAY_OF_YEAR,
  F_DAY_OF_MONTH,
  F_DATE,
  F_DAY_OF_WEEK,
  F_HOURS,
  F_MINUTES,
  F_SECONDS,
  F_MILLIS
};

static value timestamp_field(eval_ctx *ctx, const value *args, uint32_t nargs, void *aux,
                             enum field f) {
  const value *ts = &args[0];
  int64_t t = ts->i;
  if (nargs > 1) {
    const tz_zone *z = aux;
    tz_zone loaded;
    if (!z) {
      if (!eval_charge(ctx, 1000)) return VALUE_ERR("cost limit exceeded");
      int rc = tz_load(args[1].s, args[1].n, &loaded, arena_tz_alloc, ctx->arena);
      if (rc == -2) return OOM_ERROR;
      if (rc)
        return value_errorf(ctx->arena, "unknown time zone '%.*s'",
                            (int)(args[1].n > 64 ? 64 : args[1].n), args[1].s);
      z = &loaded;
    }
    t += zone_offset(z, ts->i);
  }
  int64_t days = t >= 0 ? t / 86400 : -((-t + 86399) / 86400);
  int64_t secs = t - days * 86400;
  int64_t y;
  int m, d;
  switch (f) {
    case F_HOURS:
      return value_int(secs / 3600);
    case F_MINUTES:
      return value_int(secs / 60 % 60);
    case F_SECONDS:
      return value_int(secs % 60);
    case F_MILLIS:
      return value_int(value_nanos(*ts) / 1000000);
    case F_DAY_OF_WEEK:
      return value_int(((days + 4) % 7 + 7) % 7);
    default:
      break;
  }
  timefmt_civil_from_days(days, &y, &m, &d);
  switch (f) {
    case F_YEAR:
      return value_int(y);
    case F_MONTH:
      return value_int(m - 1);
    case F_DAY_OF_MONTH:
      return value_int(d - 1);
    case F_DATE:
      return value_int(d);
    default:
      return value_int(days - timefmt_days_from_civil(y, 1, 1)); /* F_DAY_OF_YEAR */
  }
}

static value duration_field(const value *dur, enum field f) {
  switch (f) {
    case F_HOURS:
      return value_int(dur->i / 3600);
    case F_MINUTES:
      return value_int(dur->i / 60);
    case F_SECONDS:
      return value_int(dur->i);
    default:
      return value_int(value_nanos(*dur) / 1000000); /* F_MILLIS */
  }
}

#define TS_ACCESSOR(fname, field)                                                   \
  static value fname(eval_ctx *ctx, const value *args, uint32_t nargs, void *aux) { \
    if (args[0].kind == V_DURATION) return duration_field(&args[0], field);         \
    return timestamp_field(ctx, args, nargs, aux, field);                           \
  }

TS_ACCESSOR(fn_full_year, F_YEAR)
TS_ACCESSOR(fn_month, F_MONTH)
TS_ACCESSOR(fn_day_of_year, F_DAY_OF_YEAR)
TS_ACCESSOR(fn_day_of_month, F_DAY_OF_MONTH)
TS_ACCESSOR(fn_date, F_DATE)
TS_ACCESSOR(fn_day_of_week, F_DAY_OF_WEEK)
TS_ACCESSOR(fn_hours, F_HOURS)
TS_ACCESSOR(fn_minutes, F_MINUTES)
TS_ACCESSOR(fn_seconds, F_SECONDS)
TS_ACCESSOR(fn_millis, F_MILLIS)

#define T V_TIMESTAMP
#define S V_STRING
#define ACCESSOR(name, fn) \
  {name, 1, 1, {T}, fn, NULL, NULL, 0}, { name, 1, 2, {T, S}, fn, prepare_tz, release_tz, 0 }

const builtin lib_time_builtins[] = {
    {"timestamp", 0, 1, {S}, fn_timestamp, NULL, NULL, 0},
    {"timestamp", 0, 1, {V_INT}, fn_timestamp, NULL, NULL, 0},
    {"timestamp", 0, 1, {T}, fn_timestamp, NULL, NULL, 0},
    {"duration", 0, 1, {S}, fn_duration, NULL, NULL, 0},
    {"duration", 0, 1, {V_DURATION}, fn_duration, NULL, NULL, 0},
    ACCESSOR("getFullYear", fn_full_year),
    ACCESSOR("getMonth", fn_month),
    ACCESSOR("getDayOfYear", fn_day_of_year),
    ACCESSOR("getDayOfMonth", fn_day_of_month),
    ACCESSOR("getDate", fn_date),
    ACCESSOR("getDayOfWeek", fn_day_of_week),
    ACCESSOR("getHours", fn_hours),
    ACCESSOR("getMinutes", fn_minutes),
    ACCESSOR("getSeconds", fn_seconds),
    ACCESSOR("getMilliseconds", fn_millis),
    {"getHours", 1, 1, {V_DURATION}, fn_hours, NULL, NULL, 0},
    {"getMinutes", 1, 1, {V_DURATION}, fn_minutes, NULL, NULL, 0},
    {"getSeconds", 1, 1, {V_DURATION}, fn_seconds, NULL, NULL, 0},
    {"getMilliseconds", 1, 1, {V_DURATION}, fn_millis, NULL, NULL, 0},
    {0},
};
