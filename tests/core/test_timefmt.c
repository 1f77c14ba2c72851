/* test_timefmt.c — RFC 3339 timestamps and durations as text, at the edges
 * of CEL's range, and the calendar arithmetic under them (checked against a
 * day-by-day walk of the proleptic Gregorian calendar). */
#include <stdint.h>

#include "core/timefmt.h"
#include "test.h"

static int parse_ts(const char *s, int64_t *sec, int32_t *ns) {
  return timefmt_parse_rfc3339(s, strlen(s), sec, ns);
}

static int parse_dur(const char *s, int64_t *sec, int32_t *ns) {
  return timefmt_parse_duration(s, strlen(s), sec, ns);
}

static void check_ts(const char *in, int64_t want_sec, int32_t want_ns, const char *out) {
  int64_t sec = 0;
  int32_t ns = 0;
  int rc = parse_ts(in, &sec, &ns);
  CHECK_MSG(rc == 0 && sec == want_sec && ns == want_ns, "parse %s: rc %d, %lld.%09d", in, rc,
            (long long)sec, ns);
  char buf[48];
  size_t n = timefmt_format_rfc3339(want_sec, want_ns, buf);
  CHECK_MSG(n == strlen(out) && strcmp(buf, out) == 0, "format %s: got %s, want %s", in, buf, out);
}

static void test_rfc3339_round_trips_at_range_edges(void) {
  check_ts("1970-01-01T00:00:00Z", 0, 0, "1970-01-01T00:00:00Z");
  check_ts("2009-02-13T23:31:30Z", 1234567890, 0, "2009-02-13T23:31:30Z");
  check_ts("0001-01-01T00:00:00Z", TIMEFMT_MIN_SEC, 0, "0001-01-01T00:00:00Z");
  check_ts("9999-12-31T23:59:59.999999999Z", TIMEFMT_MAX_SEC, 999999999,
           "9999-12-31T23:59:59.999999999Z");
  check_ts("1969-12-31T23:59:59.5Z", -1, 500000000, "1969-12-31T23:59:59.500Z");
  check_ts("2000-02-29T12:00:00.000001Z", 951825600, 1000, "2000-02-29T12:00:00.000001Z");
  check_ts("2023-02-03T23:31:20+00:00", 1675467080, 0, "2023-02-03T23:31:20Z");
  check_ts("2023-02-04T05:01:20+05:30", 1675467080, 0, "2023-02-03T23:31:20Z");
  check_ts("2023-02-03T15:31:20-08:00", 1675467080, 0, "2023-02-03T23:31:20Z");
  check_ts("2023-02-03t23:31:20z", 1675467080, 0, "2023-02-03T23:31:20Z");
  /* an offset may carry a time just inside the range */
  check_ts("0001-01-01T01:00:00+01:00", TIMEFMT_MIN_SEC, 0, "0001-01-01T00:00:00Z");
}

static void test_rfc3339_rejects_malformed_and_out_of_range(void) {
  const char *bad[] = {"0000-01-01T00:00:00Z",
                       "10000-01-01T00:00:00Z",
                       "9999-12-31T23:59:59-00:01",
                       "0001-01-01T00:00:00+00:01",
                       "2023-02-29T00:00:00Z",
                       "2024-02-30T00:00:00Z",
                       "2023-13-01T00:00:00Z",
                       "2023-00-01T00:00:00Z",
                       "2023-01-32T00:00:00Z",
                       "2023-01-01T24:00:00Z",
                       "2023-01-01T00:60:00Z",
                       "2023-01-01T00:00:60Z",
                       "2023-01-01T00:00:00",
                       "2023-01-01 00:00:00Z",
                       "2023-01-01T00:00:00.Z",
                       "2023-01-01T00:00:00.1234567891Z",
                       "2023-01-01T00:00:00+0100",
                       "2023-01-01T00:00:00+24:00",
                       "2023-1-01T00:00:00Z",
                       "2023-01-01T00:00:00Z ",
                       "",
                       "2009-02-13"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int64_t s;
    int32_t ns;
    CHECK_MSG(parse_ts(bad[i], &s, &ns) == -1, "should reject '%s'", bad[i]);
  }
  int64_t s;
  int32_t ns;
  CHECK(parse_ts("2024-02-29T00:00:00Z", &s, &ns) == 0); /* leap year */
  CHECK(parse_ts("2000-02-29T00:00:00Z", &s, &ns) == 0);
  CHECK(parse_ts("1900-02-29T00:00:00Z", &s, &ns) == -1);
}

static void check_dur(const char *in, int64_t want_sec, int32_t want_ns) {
  int64_t sec = 0;
  int32_t ns = 0;
  int rc = parse_dur(in, &sec, &ns);
  CHECK_MSG(rc == 0 && sec == want_sec && ns == want_ns, "parse %s: rc %d, %lld s %d ns", in, rc,
            (long long)sec, ns);
}

static void test_durations_parse_go_syntax(void) {
  check_dur("0", 0, 0);
  check_dur("1s", 1, 0);
  check_dur("1.5s", 1, 500000000);
  check_dur("-1.5s", -1, -500000000);
  check_dur("+2m", 120, 0);
  check_dur("1h45m47s", 6347, 0);
  check_dur("2h", 7200, 0);
  check_dur("1.5h", 5400, 0);
  check_dur(".5s", 0, 500000000);
  check_dur("1.s", 1, 0);
  check_dur("100ms", 0, 100000000);
  check_dur("1500ms", 1, 500000000);
  check_dur("2us", 0, 2000);
  check_dur("2\xc2\xb5s", 0, 2000); /* µs, MICRO SIGN */
  check_dur("2\xce\xbcs", 0, 2000); /* μs, GREEK SMALL LETTER MU */
  check_dur("3ns", 0, 3);
  check_dur("-999999999ns", 0, -999999999);
  check_dur("1.0000000019s", 1, 1); /* beyond nanoseconds: truncated */
  check_dur("123.321456789s", 123, 321456789);
  check_dur("315576000000s", TIMEFMT_MAX_DURATION_SEC, 0);
  check_dur("-315576000000s", -TIMEFMT_MAX_DURATION_SEC, 0);
  check_dur("87660000h", 315576000000LL, 0);
  check_dur("1h1h", 7200, 0);
  const char *bad[] = {"",
                       "s",
                       "1",
                       "-",
                       "1d",
                       "1hh",
                       "1.2.3s",
                       "..5s",
                       "1 s",
                       " 1s",
                       "1s ",
                       "--1s",
                       "320000000000s",
                       "-320000000000s",
                       "99999999999999999999999s",
                       "87660001h",
                       "0x10s"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int64_t s;
    int32_t ns;
    CHECK_MSG(parse_dur(bad[i], &s, &ns) == -1, "should reject '%s'", bad[i]);
  }
}

static void check_dur_text(int64_t sec, int32_t ns, const char *want) {
  char buf[48];
  size_t n = timefmt_format_duration(sec, ns, buf);
  CHECK_MSG(n == strlen(want) && strcmp(buf, want) == 0, "got %s, want %s", buf, want);
  /* and it reads back */
  int64_t s2;
  int32_t ns2;
  CHECK_MSG(parse_dur(buf, &s2, &ns2) == 0 && s2 == sec && ns2 == ns, "round trip of %s", buf);
}

static void test_durations_format_and_round_trip(void) {
  check_dur_text(0, 0, "0s");
  check_dur_text(1000000, 0, "1000000s");
  check_dur_text(1, 500000000, "1.5s");
  check_dur_text(-1, -500000000, "-1.5s");
  check_dur_text(0, -1, "-0.000000001s");
  check_dur_text(0, 1, "0.000000001s");
  check_dur_text(123, 321456789, "123.321456789s");
  check_dur_text(TIMEFMT_MAX_DURATION_SEC, 999999999, "315576000000.999999999s");
  check_dur_text(-TIMEFMT_MAX_DURATION_SEC, -999999999, "-315576000000.999999999s");
}

/* Walks the calendar one day at a time from 0001-01-01 to 9999-12-31 and
 * checks both directions of the arithmetic against the walk. */
static void test_civil_days_match_a_day_by_day_walk(void) {
  static const int dim[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  int64_t days = TIMEFMT_MIN_SEC / 86400;
  int mismatches = 0;
  for (int64_t y = 1; y <= 9999; y++) {
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    for (int m = 1; m <= 12; m++) {
      int len = dim[m - 1] + (m == 2 && leap);
      for (int d = 1; d <= len; d++, days++) {
        if (timefmt_days_from_civil(y, m, d) != days) mismatches++;
        int64_t yy;
        int mm, dd;
        timefmt_civil_from_days(days, &yy, &mm, &dd);
        if (yy != y || mm != m || dd != d) mismatches++;
      }
    }
  }
  CHECK_MSG(mismatches == 0, "%d mismatches", mismatches);
  CHECK(days - 1 == TIMEFMT_MAX_SEC / 86400);
  CHECK(timefmt_days_from_civil(1970, 1, 1) == 0);
}

int main(void) {
  TEST_RUN(test_rfc3339_round_trips_at_range_edges);
  TEST_RUN(test_rfc3339_rejects_malformed_and_out_of_range);
  TEST_RUN(test_durations_parse_go_syntax);
  TEST_RUN(test_durations_format_and_round_trip);
  TEST_RUN(test_civil_days_match_a_day_by_day_walk);
  TEST_END();
}
