/* timefmt.h — timestamps and durations as text: RFC 3339 for timestamps
 * ("2009-02-13T23:31:30Z", fractional seconds and offsets accepted on input,
 * UTC with 0/3/6/9 fraction digits on output), protobuf JSON style for
 * durations ("1.5s", "-0.000000001s"), and the civil-calendar arithmetic both
 * need. CEL's valid range: 0001-01-01T00:00:00Z .. 9999-12-31T23:59:59.999999999Z
 * for timestamps, about ±10000 years for durations. */
#ifndef VD_CORE_TIMEFMT_H
#define VD_CORE_TIMEFMT_H

#include <stddef.h>
#include <stdint.h>

#define TIMEFMT_MIN_SEC (-62135596800LL) /* 0001-01-01T00:00:00Z */
#define TIMEFMT_MAX_SEC (253402300799LL) /* 9999-12-31T23:59:59Z */
#define TIMEFMT_MAX_DURATION_SEC (315576000000LL)

/* Parses RFC 3339. Returns 0, or -1 when malformed or out of range. */
int timefmt_parse_rfc3339(const char *s, size_t len, int64_t *sec, int32_t *nanos);
/* Writes RFC 3339 in UTC into out (at least 40 bytes); returns the length. */
size_t timefmt_format_rfc3339(int64_t sec, int32_t nanos, char *out);
/* Parses a duration: Go-style ("1h30m", "-1.5s", "100ms", "2us", "3ns") as CEL
 * accepts it. Returns 0, or -1. */
int timefmt_parse_duration(const char *s, size_t len, int64_t *sec, int32_t *nanos);
/* Writes "1.5s" style (protobuf JSON) into out (at least 40 bytes); returns the length. */
size_t timefmt_format_duration(int64_t sec, int32_t nanos, char *out);

/* Proleptic Gregorian calendar arithmetic, independent of the process time
 * zone: days since 1970-01-01 from a civil date and back. Valid far beyond
 * CEL's range (any year that fits in int32). */
int64_t timefmt_days_from_civil(int64_t year, int month, int day);
void timefmt_civil_from_days(int64_t days, int64_t *year, int *month, int *day);

#endif
