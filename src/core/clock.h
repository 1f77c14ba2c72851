/* clock.h — the one clock of verdict: readings in nanoseconds as plain
 * integers, so that callers subtract and compare without struct timespec.
 *
 * Three clocks, each for one question:
 *   clock_mono_ns  how long something took, and deadlines (CLOCK_MONOTONIC:
 *                  never steps back, not the time of day);
 *   clock_wall_ns  what time it is (CLOCK_REALTIME, unix nanoseconds: what a
 *                  snapshot records, what a file age is compared with);
 *   clock_cpu_ns   the CPU time this thread has used (replay's cost figures);
 *   clock_wall_coarse_ns  the time of day to a few ms, cheaper (counting
 *                  events into seconds).
 *
 * They are inline: the engine reads the monotonic clock a few times per
 * decision, and a call through another function would cost more than the
 * vDSO read itself. This module does not format times (core/timefmt.h does). */
#ifndef VD_CORE_CLOCK_H
#define VD_CORE_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t clock_mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline int64_t clock_wall_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + (int64_t)ts.tv_nsec;
}

/* The wall clock as the kernel last ticked it (CLOCK_REALTIME_COARSE: a few
 * ms behind at most, and a quarter of the cost of clock_wall_ns): for
 * counting events into seconds on the hot path (the server's live figures). */
static inline int64_t clock_wall_coarse_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME_COARSE, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + (int64_t)ts.tv_nsec;
}

static inline uint64_t clock_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The wall-clock instant ms milliseconds from now, as pthread_cond_timedwait
 * takes it (a condition variable's default clock is CLOCK_REALTIME). */
static inline struct timespec clock_wall_after_ms(uint64_t ms) {
  int64_t at = clock_wall_ns() + (int64_t)ms * 1000000;
  struct timespec ts = {.tv_sec = (time_t)(at / 1000000000), .tv_nsec = (long)(at % 1000000000)};
  return ts;
}

#endif
