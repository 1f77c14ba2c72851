/* test_id.c — snapshot ids are RFC 9562 UUIDv7: version and variant bits in
 * place, the unix-ms time readable back, strictly increasing per generator
 * (one thread, many threads, within one millisecond, past 4096 ids in a
 * millisecond, when the clock steps back), unique across threads, and the
 * text form round-trips and rejects malformed input. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "snapshot/snapshot.h"
#include "test.h"

static void test_format_parse(void) {
  /* RFC 9562 appendix A.6 example UUIDv7 */
  const char *text = "017f22e2-79b0-7cc3-98c4-dc0c0c07398f";
  uint8_t id[16];
  CHECK(snapshot_id_parse(text, strlen(text), id) == 0);
  CHECK(id[0] == 0x01 && id[5] == 0xb0 && id[6] == 0x7c && id[15] == 0x8f);
  CHECK(snapshot_id_time_ms(id) == 0x017F22E279B0ull); /* 2022-02-22T19:22:22Z */
  CHECK(snapshot_id_time_ms(id) == 1645557742000ull);
  char out[SNAPSHOT_ID_TEXT];
  CHECK_STR(snapshot_id_format(id, out), text);
  /* every byte value in every position, against printf */
  for (int b = 0; b < 256; b++) {
    uint8_t all[16];
    char want[SNAPSHOT_ID_TEXT];
    for (int i = 0; i < 16; i++) all[i] = (uint8_t)(b + 17 * i);
    snprintf(want, sizeof want,
             "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", all[0], all[1],
             all[2], all[3], all[4], all[5], all[6], all[7], all[8], all[9], all[10], all[11],
             all[12], all[13], all[14], all[15]);
    CHECK_STR(snapshot_id_format(all, out), want);
    uint8_t back[16];
    CHECK(snapshot_id_parse(out, 36, back) == 0 && memcmp(back, all, 16) == 0);
  }
  uint8_t up[16];
  CHECK(snapshot_id_parse("017F22E2-79B0-7CC3-98C4-DC0C0C07398F", 36, up) == 0);
  CHECK(memcmp(up, id, 16) == 0);
  /* malformed */
  CHECK(snapshot_id_parse("017f22e2-79b0-7cc3-98c4-dc0c0c07398", 35, id) == SNAPSHOT_EINVAL);
  CHECK(snapshot_id_parse("017f22e279b07cc398c4dc0c0c07398f", 32, id) == SNAPSHOT_EINVAL);
  CHECK(snapshot_id_parse("017f22e2-79b0-7cc3-98c4-dc0c0c07398g", 36, id) == SNAPSHOT_EINVAL);
  CHECK(snapshot_id_parse("017f22e2_79b0-7cc3-98c4-dc0c0c07398f", 36, id) == SNAPSHOT_EINVAL);
  CHECK(snapshot_id_parse("017f22e2-79b07-cc3-98c4-dc0c0c07398f", 36, id) == SNAPSHOT_EINVAL);
  CHECK(snapshot_id_parse(NULL, 36, id) == SNAPSHOT_EINVAL);
  /* a failed parse leaves out alone */
  uint8_t keep[16];
  memcpy(keep, id, 16);
  CHECK(snapshot_id_parse("017f22e2-79b0-7cc3-98c4-dc0c0c07398z", 36, id) < 0);
  CHECK(memcmp(keep, id, 16) == 0);
}

static void test_bits_and_time(void) {
  snapshot_idgen g;
  snapshot_idgen_init(&g);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t before = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
  int bad_bits = 0, bad_round = 0;
  for (int i = 0; i < 100000; i++) {
    uint8_t id[16], back[16];
    snapshot_id_new(&g, id);
    if ((id[6] >> 4) != 7 || (id[8] >> 6) != 2) bad_bits++;
    char t[SNAPSHOT_ID_TEXT];
    snapshot_id_format(id, t);
    if (strlen(t) != 36 || snapshot_id_parse(t, 36, back) != 0 || memcmp(back, id, 16) != 0)
      bad_round++;
  }
  CHECK(bad_bits == 0);
  CHECK(bad_round == 0);
  uint8_t id[16];
  snapshot_id_new(&g, id);
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t after = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
  uint64_t t = snapshot_id_time_ms(id);
  /* 100k ids may run ahead of the clock by at most 100000/2048 ms */
  CHECK_MSG(t >= before && t <= after + 100000 / 2048 + 1, "id time %llu not in [%llu, %llu]",
            (unsigned long long)t, (unsigned long long)before, (unsigned long long)after);
  /* two generators do not make the same ids */
  snapshot_idgen g2;
  snapshot_idgen_init(&g2);
  uint8_t a[16], b[16];
  snapshot_id_new_at(&g, 1700000000000ull + 99999, a);
  snapshot_id_new_at(&g2, 1700000000000ull + 99999, b);
  CHECK(memcmp(a + 8, b + 8, 8) != 0);
}

static void test_monotonic_one_thread(void) {
  snapshot_idgen g;
  snapshot_idgen_init(&g);
  uint8_t prev[16], id[16];
  snapshot_id_new(&g, prev);
  int bad = 0;
  for (int i = 0; i < 300000; i++) {
    snapshot_id_new(&g, id);
    if (memcmp(prev, id, 16) >= 0) bad++;
    memcpy(prev, id, 16);
  }
  CHECK_MSG(bad == 0, "%d ids not above the one before", bad);
}

static void test_monotonic_fixed_ms(void) {
  /* 10000 ids in one millisecond: the 12-bit counter overflows and carries
   * into the time field, and order holds throughout */
  snapshot_idgen g;
  snapshot_idgen_init(&g);
  const uint64_t ms = 1750000000000ull;
  uint8_t prev[16], id[16];
  snapshot_id_new_at(&g, ms, prev);
  CHECK(snapshot_id_time_ms(prev) == ms);
  CHECK(((prev[6] & 15) << 8 | prev[7]) < 2048); /* starts in the lower half */
  int bad = 0;
  for (int i = 0; i < 10000; i++) {
    snapshot_id_new_at(&g, ms, id);
    if (memcmp(prev, id, 16) >= 0) bad++;
    memcpy(prev, id, 16);
  }
  CHECK(bad == 0);
  CHECK(snapshot_id_time_ms(id) > ms); /* carried */
  CHECK(snapshot_id_time_ms(id) <= ms + 10000 / 2048 + 1);
  /* the clock stepping back does not break the order */
  snapshot_id_new_at(&g, ms - 60000, prev);
  CHECK(memcmp(prev, id, 16) > 0);
  /* the clock moving on restarts the counter at the new time */
  snapshot_id_new_at(&g, ms + 60000, id);
  CHECK(snapshot_id_time_ms(id) == ms + 60000);
  CHECK(memcmp(prev, id, 16) < 0);
}

#define THREADS 4
#define PER_THREAD 50000

typedef struct id_job {
  snapshot_idgen *g;
  uint8_t (*out)[16];
  int bad;
} id_job;

static void *id_worker(void *arg) {
  id_job *j = arg;
  for (int i = 0; i < PER_THREAD; i++) {
    snapshot_id_new(j->g, j->out[i]);
    if (i && memcmp(j->out[i - 1], j->out[i], 16) >= 0) j->bad++;
  }
  return NULL;
}

static int cmp16(const void *a, const void *b) { return memcmp(a, b, 16); }

static void test_monotonic_threads(void) {
  snapshot_idgen g;
  snapshot_idgen_init(&g);
  uint8_t(*all)[16] = malloc((size_t)THREADS * PER_THREAD * 16);
  pthread_t th[THREADS];
  id_job jobs[THREADS];
  for (int t = 0; t < THREADS; t++) {
    jobs[t] = (id_job){&g, all + (size_t)t * PER_THREAD, 0};
    pthread_create(&th[t], NULL, id_worker, &jobs[t]);
  }
  for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
  for (int t = 0; t < THREADS; t++)
    CHECK_MSG(jobs[t].bad == 0, "thread %d: %d out of order", t, jobs[t].bad);
  qsort(all, (size_t)THREADS * PER_THREAD, 16, cmp16);
  int dups = 0;
  for (size_t i = 1; i < (size_t)THREADS * PER_THREAD; i++)
    if (memcmp(all[i - 1], all[i], 16) == 0) dups++;
  CHECK_MSG(dups == 0, "%d duplicate ids across threads", dups);
  /* (ms, counter) alone is unique too: the counter, not luck, separates them */
  int dup_prefix = 0;
  for (size_t i = 1; i < (size_t)THREADS * PER_THREAD; i++)
    if (memcmp(all[i - 1], all[i], 8) == 0) dup_prefix++; /* bytes 0..7: ms, version, counter */
  CHECK_MSG(dup_prefix == 0, "%d ids share time and counter", dup_prefix);
  free(all);
}

int main(void) {
  TEST_RUN(test_format_parse);
  TEST_RUN(test_bits_and_time);
  TEST_RUN(test_monotonic_one_thread);
  TEST_RUN(test_monotonic_fixed_ms);
  TEST_RUN(test_monotonic_threads);
  TEST_END();
}
