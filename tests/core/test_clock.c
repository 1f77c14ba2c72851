/* test_clock.c — core/clock.h: the monotonic clock never steps back, the
 * wall clock is unix time in nanoseconds, the thread CPU clock counts this
 * thread's work, and a wall-clock deadline is a valid timespec ms ahead. */
#include <stdint.h>
#include <time.h>

#include "core/clock.h"
#include "test.h"

static void test_monotonic_never_steps_back(void) {
  uint64_t prev = clock_mono_ns();
  int back = 0;
  for (int i = 0; i < 100000; i++) {
    uint64_t now = clock_mono_ns();
    if (now < prev) back++;
    prev = now;
  }
  CHECK_MSG(back == 0, "%d readings went back", back);
  CHECK(prev > 0);
}

static void test_wall_is_unix_nanoseconds(void) {
  time_t before = time(NULL);
  int64_t ns = clock_wall_ns();
  time_t after = time(NULL);
  /* time() truncates to the second: the reading falls in [before, after+1) */
  CHECK_MSG(ns >= (int64_t)before * 1000000000 && ns < ((int64_t)after + 1) * 1000000000,
            "wall %lld ns outside [%lld, %lld] s", (long long)ns, (long long)before,
            (long long)after);
}

static void test_cpu_clock_counts_this_threads_work(void) {
  uint64_t c0 = clock_cpu_ns();
  volatile uint64_t x = 1;
  for (int i = 0; i < 20000000; i++) x = x * 6364136223846793005ull + 1;
  uint64_t c1 = clock_cpu_ns();
  CHECK_MSG(c1 > c0, "cpu clock %llu -> %llu", (unsigned long long)c0, (unsigned long long)c1);
}

static void test_wall_after_ms_is_a_valid_later_instant(void) {
  static const uint64_t ms[] = {0, 1, 999, 1000, 1001, 123456};
  for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) {
    int64_t now = clock_wall_ns();
    struct timespec ts = clock_wall_after_ms(ms[i]);
    int64_t at = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    CHECK_MSG(ts.tv_nsec >= 0 && ts.tv_nsec < 1000000000, "tv_nsec %ld", ts.tv_nsec);
    CHECK_MSG(at >= now + (int64_t)ms[i] * 1000000, "%llu ms: %lld < %lld",
              (unsigned long long)ms[i], (long long)at,
              (long long)(now + (int64_t)ms[i] * 1000000));
  }
}

int main(void) {
  TEST_RUN(test_monotonic_never_steps_back);
  TEST_RUN(test_wall_is_unix_nanoseconds);
  TEST_RUN(test_cpu_clock_counts_this_threads_work);
  TEST_RUN(test_wall_after_ms_is_a_valid_later_instant);
  TEST_END();
}
