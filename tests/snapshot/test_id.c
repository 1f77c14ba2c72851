/* test_id.c — snapshot ids are RFC 9562 UUIDv7: version and variant bits in
 * place, the unix-ms time readable back, strictly increasing per generator
 * (one thread, many threads, within one millisecond, past 4096 ids in a
 * millisecond, when the clock steps back), unique across threads, and the
 * text form round-trips and rejects malformed input. The random bits are
 * unpredictable: the attack that recovered an earlier generator's seed from
 * two ids and predicted the next one fails, no tail repeats over a million
 * ids, every bit varies, and a forked child does not repeat its parent's. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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

/* ---- the prediction attack ----
 * An earlier generator made each id's 62 random bits as splitmix64(w * G +
 * seed) >> 2, w = the id's (ms << 12 | counter) word, and each millisecond's
 * counter start as splitmix64(seed ^ ms) >> 53, with one seed a process.
 * splitmix64 is a bijection, so an attacker holding one id guesses the two
 * bits the id drops, inverts the mix, subtracts w * G and has four candidate
 * seeds; a second id picks the right one, and from then on every id of the
 * process is known: the next in this millisecond and the start of any other.
 * Below, exactly that attacker, checked first against the old construction
 * (it must win there, or it proves nothing), then against the generator. */
#define G 0x9E3779B97F4A7C15ull

static uint64_t splitmix64(uint64_t x) {
  x += G;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

static uint64_t unxorshift(uint64_t y, int k) {
  uint64_t x = y;
  for (int i = 0; i < 64 / k + 1; i++) x = y ^ (x >> k);
  return x;
}

static uint64_t inverse_mod64(uint64_t a) { /* a odd; Newton's iteration */
  uint64_t x = a;
  for (int i = 0; i < 6; i++) x *= 2 - a * x;
  return x;
}

static uint64_t unsplitmix64(uint64_t z) {
  z = unxorshift(z, 31) * inverse_mod64(0x94D049BB133111EBull);
  z = unxorshift(z, 27) * inverse_mod64(0xBF58476D1CE4E5B9ull);
  return unxorshift(z, 30) - G;
}

static uint64_t be64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v = v << 8 | p[i];
  return v;
}

/* The (ms << 12 | counter) word an id shows in its first 8 bytes. */
static uint64_t id_word(const uint8_t id[16]) {
  uint64_t hi = be64(id);
  return (hi >> 16) << 12 | (hi & 0xfff);
}

/* The old construction, for the attacker's self-check. */
static void old_id(uint64_t seed, uint64_t word, uint8_t out[16]) {
  uint64_t tail = splitmix64(word * G + seed), hi = (word >> 12) << 16 | 0x7000 | (word & 0xfff);
  uint64_t lo = (tail >> 2) | (1ull << 63);
  for (int i = 0; i < 8; i++) out[i] = (uint8_t)(hi >> (56 - 8 * i));
  for (int i = 0; i < 8; i++) out[8 + i] = (uint8_t)(lo >> (56 - 8 * i));
}

/* From two ids of one's own, the seeds that explain both; returns how many
 * (at most 4), in seeds[]. */
static int recover_seeds(const uint8_t a[16], const uint8_t b[16], uint64_t seeds[4]) {
  int n = 0;
  uint64_t shown = be64(a + 8) & ((1ull << 62) - 1);
  for (uint64_t dropped = 0; dropped < 4; dropped++) {
    uint64_t seed = unsplitmix64(shown << 2 | dropped) - id_word(a) * G;
    uint8_t again[16];
    old_id(seed, id_word(b), again);
    if (memcmp(again, b, 16) == 0) seeds[n++] = seed;
  }
  return n;
}

/* The attacker's guess at the id after b in the same millisecond. */
static void predict_next(uint64_t seed, const uint8_t b[16], uint8_t out[16]) {
  old_id(seed, id_word(b) + 1, out);
}

static void test_prediction_attack_fails(void) {
  /* The attacker wins against the old construction: it finds the seed, the
   * next id in the millisecond, and the counter start of a later one. */
  uint64_t secret = 0x243F6A8885A308D3ull, seeds[4];
  uint64_t w = (1750000000123ull << 12) | 1000;
  uint8_t a[16], b[16], c[16], guess[16];
  old_id(secret, w, a);
  old_id(secret, w + 1, b);
  old_id(secret, w + 2, c);
  int n = recover_seeds(a, b, seeds);
  CHECK(n >= 1);
  int found = 0;
  for (int i = 0; i < n; i++) found |= seeds[i] == secret;
  CHECK(found);
  predict_next(seeds[0], b, guess);
  CHECK(memcmp(guess, c, 16) == 0);
  CHECK(splitmix64(seeds[0] ^ 1750000000999ull) >> 53 ==
        splitmix64(secret ^ 1750000000999ull) >> 53);

  /* The same attacker against the generator, over many pairs (consecutive
   * ids of one millisecond, the easiest case for it): no seed explains two
   * ids, and no guess at the next id is right. */
  snapshot_idgen g;
  snapshot_idgen_init(&g);
  int explained = 0, predicted = 0, tail_predicted = 0;
  for (int k = 0; k < 2000; k++) {
    uint64_t ms = 1760000000000ull + (uint64_t)k;
    snapshot_id_new_at(&g, ms, a);
    snapshot_id_new_at(&g, ms, b);
    snapshot_id_new_at(&g, ms, c);
    CHECK(id_word(b) == id_word(a) + 1 && id_word(c) == id_word(b) + 1);
    n = recover_seeds(a, b, seeds);
    explained += n > 0;
    /* even a seed from a wrong guess of the dropped bits must not help */
    uint64_t shown = be64(a + 8) & ((1ull << 62) - 1);
    for (uint64_t dropped = 0; dropped < 4; dropped++) {
      uint64_t seed = unsplitmix64(shown << 2 | dropped) - id_word(a) * G;
      predict_next(seed, b, guess);
      predicted += memcmp(guess, c, 16) == 0;
      tail_predicted += memcmp(guess + 8, c + 8, 8) == 0;
    }
  }
  CHECK_MSG(explained == 0, "%d id pairs gave away a seed", explained);
  CHECK_MSG(predicted == 0 && tail_predicted == 0, "%d next ids (%d tails) predicted", predicted,
            tail_predicted);
}

static int cmp8(const void *a, const void *b) { return memcmp(a, b, 8); }

static void test_random_bits(void) {
  /* A million ids: no two share their 62 random bits (a collision among
   * 2^20 random 62-bit values has odds of about 1 in 10^7), and each of the
   * 62 bits is set in about half of them. */
  enum { N = 1000000 };
  snapshot_idgen g;
  snapshot_idgen_init(&g);
  uint8_t(*tails)[8] = malloc((size_t)N * 8);
  CHECK(tails != NULL);
  if (!tails) return;
  static unsigned ones[64];
  memset(ones, 0, sizeof ones);
  for (int i = 0; i < N; i++) {
    uint8_t id[16];
    snapshot_id_new(&g, id);
    memcpy(tails[i], id + 8, 8);
    uint64_t t = be64(id + 8);
    for (int bit = 0; bit < 62; bit++) ones[bit] += (unsigned)(t >> bit) & 1;
  }
  qsort(tails, N, 8, cmp8);
  int repeats = 0;
  for (int i = 1; i < N; i++) repeats += memcmp(tails[i - 1], tails[i], 8) == 0;
  CHECK_MSG(repeats == 0, "%d repeated tails in %d ids", repeats, N);
  int skewed = 0;
  for (int bit = 0; bit < 62; bit++) skewed += ones[bit] < N * 49 / 100 || ones[bit] > N * 51 / 100;
  CHECK_MSG(skewed == 0, "%d of the 62 random bits are set in under 49%% or over 51%% of ids",
            skewed);
  free(tails);

  /* Each new millisecond's counter start: below 2048, and spread over that
   * range (both halves, and not one value), not a function of the time. */
  snapshot_idgen g2;
  snapshot_idgen_init(&g2);
  int low = 0, high = 0, same = 0, prev = -1;
  for (int k = 0; k < 10000; k++) {
    uint8_t id[16];
    snapshot_id_new_at(&g2, 1770000000000ull + 10ull * (uint64_t)k, id);
    int start = (id[6] & 15) << 8 | id[7];
    CHECK(start < 2048);
    if (start < 1024)
      low++;
    else
      high++;
    same += start == prev;
    prev = start;
  }
  CHECK_MSG(low > 4500 && high > 4500, "counter starts: %d below 1024, %d above", low, high);
  CHECK_MSG(same < 50, "%d milliseconds started where the one before did", same);
}

static void test_fork_does_not_repeat(void) {
  /* A child forked after the parent took ids (its pool is half used) must
   * not hand out the parent's next random bits. */
  snapshot_idgen g;
  snapshot_idgen_init(&g);
  uint8_t id[16];
  snapshot_id_new(&g, id);
  int fd[2];
  CHECK(pipe(fd) == 0);
  pid_t pid = fork();
  if (pid == 0) {
    close(fd[0]);
    for (int i = 0; i < 16; i++) {
      snapshot_id_new(&g, id);
      if (write(fd[1], id + 8, 8) != 8) _exit(2);
    }
    _exit(0);
  }
  close(fd[1]);
  uint8_t child[16][8], mine[16][8];
  for (int i = 0; i < 16; i++) {
    snapshot_id_new(&g, id);
    memcpy(mine[i], id + 8, 8);
  }
  size_t got = 0;
  while (got < sizeof child) {
    ssize_t k = read(fd[0], (uint8_t *)child + got, sizeof child - got);
    if (k <= 0) break;
    got += (size_t)k;
  }
  close(fd[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  CHECK(got == sizeof child && WIFEXITED(st) && WEXITSTATUS(st) == 0);
  int shared = 0;
  for (int i = 0; i < 16; i++)
    for (int j = 0; j < 16; j++) shared += memcmp(child[i], mine[j], 8) == 0;
  CHECK_MSG(shared == 0, "%d random tails both in the parent's and the child's ids", shared);
}

int main(void) {
  TEST_RUN(test_format_parse);
  TEST_RUN(test_bits_and_time);
  TEST_RUN(test_monotonic_one_thread);
  TEST_RUN(test_monotonic_fixed_ms);
  TEST_RUN(test_monotonic_threads);
  TEST_RUN(test_prediction_attack_fails);
  TEST_RUN(test_random_bits);
  TEST_RUN(test_fork_does_not_repeat);
  TEST_END();
}
