/* test_local.c — the local counter store keeps the GCRA rule of state.h
 * exactly: at the edges (a charge is paid back exactly one spacing later,
 * to the microsecond), against a second formulation of the rule
 * (limit_model.h) over thousands of irregular hits, with penalties,
 * read-only readings that change nothing, several threads charging one key
 * (exact totals), a memory bound that evicts (counted) and removes expired
 * keys (counted apart), and the counter file that keeps counts across
 * restarts (and ignores, saying so, a file of an earlier version). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "state/limit_model.h"
#include "state/state.h"
#include "test.h"

#define US 1000LL
#define MS 1000000LL
#define SEC 1000000000LL
#define T0 (1700000000LL * SEC) /* any wall-clock instant */

static state_store *open_store(size_t max_bytes) {
  state_opts o = {.max_bytes = max_bytes};
  state_store *s = NULL;
  char err[256];
  if (state_open_local(&o, &s, err, sizeof err)) {
    fprintf(stderr, "state_open_local: %s\n", err);
    exit(2);
  }
  return s;
}

static limit_reading hit(state_store *s, const char *key, const limit_spec *sp, int64_t t,
                         bool charge) {
  limit_reading r;
  state_hit(s, key, strlen(key), sp, t, charge, &r);
  return r;
}

static void test_window_edges(void) {
  state_store *s = open_store(0);
  /* 3 a window of 3 s: a burst of 3, then one a second */
  limit_spec sp = {.window_ns = 3 * SEC, .budget = 3};
  limit_reading r;
  for (uint32_t i = 0; i < 3; i++) {
    r = hit(s, "k", &sp, T0, true);
    CHECK_MSG(r.count == i && r.charged && !r.exceeded, "charge %u: count %u", i, r.count);
  }
  r = hit(s, "k", &sp, T0 + 500 * MS, true); /* budget used up: refused, not counted */
  CHECK(r.count == 3 && r.exceeded && !r.charged);
  /* one microsecond before the first charge is paid back: still 3 */
  r = hit(s, "k", &sp, T0 + SEC - US, true);
  CHECK_MSG(r.count == 3 && r.exceeded && !r.charged, "count %u", r.count);
  /* a nanosecond clock reading counts in whole microseconds: still before */
  r = hit(s, "k", &sp, T0 + SEC - 1, true);
  CHECK_MSG(r.count == 3 && r.exceeded, "count %u", r.count);
  /* at exactly T0 + 1 s one charge is paid back: this one is counted */
  r = hit(s, "k", &sp, T0 + SEC, true);
  CHECK_MSG(r.count == 2 && r.charged && !r.exceeded, "count %u", r.count);
  /* ... and the next room is one spacing later, not at once */
  r = hit(s, "k", &sp, T0 + 2 * SEC - US, true);
  CHECK_MSG(r.count == 3 && r.exceeded && !r.charged, "count %u", r.count);
  r = hit(s, "k", &sp, T0 + 2 * SEC, false);
  CHECK_MSG(r.count == 2 && !r.charged && !r.exceeded, "count %u", r.count);
  /* four charges in the first two seconds: budget + floor(2 s / 1 s) would
   * allow 5; a quiet key starts over after a whole window */
  r = hit(s, "k", &sp, T0 + 4 * SEC, false);
  CHECK_MSG(r.count == 0, "count %u", r.count);
  r = hit(s, "k", &sp, T0 + 4 * SEC - US, false);
  CHECK_MSG(r.count == 1, "count %u", r.count);
  /* other keys are other counters */
  r = hit(s, "k2", &sp, T0 + 500 * MS, false);
  CHECK(r.count == 0 && !r.exceeded);
  /* a spacing that is not a whole microsecond is rounded up: 1 s / 3 is
   * 333,334 µs */
  limit_spec third = {.window_ns = SEC, .budget = 3};
  for (int i = 0; i < 3; i++) CHECK(hit(s, "third", &third, T0, true).charged);
  CHECK(hit(s, "third", &third, T0 + 333334 * US - US, true).exceeded);
  CHECK(hit(s, "third", &third, T0 + 333334 * US, true).charged);
  state_close(s);
}

static void test_read_only(void) {
  state_store *s = open_store(0);
  limit_spec sp = {.window_ns = SEC, .budget = 2};
  for (int i = 0; i < 5; i++) {
    limit_reading r = hit(s, "ro", &sp, T0 + i, false);
    CHECK(r.count == 0 && !r.charged && !r.exceeded);
  }
  state_stats st;
  state_get_stats(s, &st);
  CHECK(st.keys == 0 && st.charges == 0); /* reading an absent key creates nothing */
  hit(s, "ro", &sp, T0 + 10, true);
  CHECK(hit(s, "ro", &sp, T0 + 11, false).count == 1);
  CHECK(hit(s, "ro", &sp, T0 + 12, false).count == 1);
  state_close(s);
}

static void test_penalty(void) {
  state_store *s = open_store(0);
  limit_spec sp = {.window_ns = SEC, .budget = 2, .penalty_ns = 10 * SEC};
  limit_reading r;
  hit(s, "p", &sp, T0, true);
  r = hit(s, "p", &sp, T0 + 100 * MS, true); /* brings the count to the budget: penalty */
  CHECK(r.count == 1 && r.charged && !r.exceeded);
  r = hit(s, "p", &sp, T0 + 2 * SEC, true); /* everything paid back, the penalty runs */
  CHECK(r.count == 0 && r.penalized && r.exceeded && !r.charged);
  r = hit(s, "p", &sp, T0 + 100 * MS + 10 * SEC - US, false);
  CHECK(r.penalized && r.exceeded);
  r = hit(s, "p", &sp, T0 + 100 * MS + 10 * SEC, true); /* over at exactly its end */
  CHECK(!r.penalized && !r.exceeded && r.charged);
  /* without a penalty, a used-up budget of 1 refuses for exactly one window */
  limit_spec np = {.window_ns = SEC, .budget = 1};
  CHECK(hit(s, "np", &np, T0, true).charged);
  CHECK(hit(s, "np", &np, T0 + SEC - US, true).exceeded);
  CHECK(hit(s, "np", &np, T0 + SEC, true).charged);
  state_close(s);
}

/* Thousands of hits at irregular times against the rule's second form,
 * and the documented bound over the charges that were made. */
static void test_against_model(void) {
  state_store *s = open_store(0);
  static const limit_spec specs[] = {
      {.window_ns = 100 * MS, .budget = 5},
      {.window_ns = 100 * MS, .budget = 7, .penalty_ns = 150 * MS}, /* 14,286 µs: rounded */
      {.window_ns = 30 * MS, .budget = 1},
  };
  enum { N = 5000 };
  int64_t *charged = malloc(N * sizeof *charged);
  for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++) {
    const limit_spec *sp = &specs[k];
    limit_model m = {0};
    size_t nc = 0;
    int64_t t = T0;
    unsigned seed = 12345 + (unsigned)k;
    int mismatches = 0, refusals = 0;
    char key[16];
    snprintf(key, sizeof key, "m%zu", k);
    for (int i = 0; i < N; i++) {
      seed = seed * 1103515245u + 12345u;
      t += (seed >> 16) % (40 * MS) / 1000 * 1000;           /* gaps of 0 to 40 ms, some zero */
      if (i % 7 == 0) t += 20 * MS - ((seed >> 8) % 3) * US; /* land near edges */
      if (i % 11 == 0) t += (seed >> 4) % 1000;              /* a ns reading */
      bool charge = (seed >> 4) % 5 != 0;
      limit_reading want = model_hit(&m, sp, t, charge);
      limit_reading r = hit(s, key, sp, t, charge);
      if (r.count != want.count || r.exceeded != want.exceeded || r.charged != want.charged ||
          r.penalized != want.penalized) {
        if (mismatches++ < 3)
          fprintf(stderr, "spec %zu hit %d: count %u want %u, charged %d want %d\n", k, i, r.count,
                  want.count, r.charged, want.charged);
      }
      if (r.charged) charged[nc++] = t;
      refusals += r.exceeded;
    }
    CHECK_MSG(mismatches == 0, "spec %zu: %d readings differ from the model", k, mismatches);
    CHECK_MSG(refusals > 100 && nc > 300, "spec %zu: %d refused, %zu charged", k, refusals, nc);
    CHECK(model_bound_violations(charged, nc, sp) == 0);
  }
  free(charged);
  state_close(s);
}

typedef struct worker {
  state_store *s;
  const limit_spec *sp;
  int hits;
  int charged, refused;
  char key[32];
} worker;

static void *work(void *p) {
  worker *w = p;
  for (int i = 0; i < w->hits; i++) {
    limit_reading r;
    state_hit(w->s, w->key, strlen(w->key), w->sp, T0 + i, true, &r);
    w->charged += r.charged;
    w->refused += r.exceeded;
  }
  return NULL;
}

static void test_threads_one_key(void) {
  state_store *s = open_store(0);
  limit_spec sp = {.window_ns = 3600 * SEC, .budget = 25000};
  enum { THREADS = 4, HITS = 10000 };
  pthread_t th[THREADS];
  worker w[THREADS];
  for (int i = 0; i < THREADS; i++) {
    w[i] = (worker){.s = s, .sp = &sp, .hits = HITS};
    snprintf(w[i].key, sizeof w[i].key, "shared");
    pthread_create(&th[i], NULL, work, &w[i]);
  }
  int charged = 0, refused = 0;
  for (int i = 0; i < THREADS; i++) {
    pthread_join(th[i], NULL);
    charged += w[i].charged;
    refused += w[i].refused;
  }
  CHECK_MSG(charged == 25000, "charged %d of a budget of 25000", charged);
  CHECK_MSG(refused == THREADS * HITS - 25000, "refused %d", refused);
  limit_reading r = hit(s, "shared", &sp, T0 + HITS, false);
  CHECK(r.count == 25000 && r.exceeded);
  state_stats st;
  state_get_stats(s, &st);
  CHECK(st.charges == 25000 && st.keys == 1);

  /* threads on keys of their own: each gets its whole budget */
  limit_spec small = {.window_ns = 3600 * SEC, .budget = 100};
  for (int i = 0; i < THREADS; i++) {
    w[i] = (worker){.s = s, .sp = &small, .hits = 1000};
    snprintf(w[i].key, sizeof w[i].key, "own-%d", i);
    pthread_create(&th[i], NULL, work, &w[i]);
  }
  for (int i = 0; i < THREADS; i++) {
    pthread_join(th[i], NULL);
    CHECK(w[i].charged == 100 && w[i].refused == 900);
  }
  state_close(s);
}

static void test_memory_bound(void) {
  size_t bound = 256 * 1024;
  state_store *s = open_store(bound);
  limit_spec sp = {.window_ns = 3600 * SEC, .budget = 10};
  enum { KEYS = 20000 };
  char key[32];
  for (int i = 0; i < KEYS; i++) {
    snprintf(key, sizeof key, "caller-%d", i);
    limit_reading r = hit(s, key, &sp, T0 + i, true);
    CHECK(r.charged);
  }
  state_stats st;
  state_get_stats(s, &st);
  CHECK_MSG(st.bytes <= bound, "%llu bytes over a bound of %zu", (unsigned long long)st.bytes,
            bound);
  CHECK(st.evictions > 0 && st.expired == 0);
  CHECK_MSG(st.keys + st.evictions == KEYS, "keys %llu + evicted %llu", (unsigned long long)st.keys,
            (unsigned long long)st.evictions);
  /* the most recent key is still there; the oldest was evicted (LRU) */
  snprintf(key, sizeof key, "caller-%d", KEYS - 1);
  CHECK(hit(s, key, &sp, T0 + KEYS, false).count == 1);
  CHECK(hit(s, "caller-0", &sp, T0 + KEYS, false).count == 0);
  state_close(s);

  /* expired keys make room without counting as evictions (a bound with
   * room for the 1,000 live keys: 64 slots a shard) */
  s = open_store(2 * bound);
  limit_spec brief = {.window_ns = MS, .budget = 10};
  for (int i = 0; i < 1000; i++) {
    snprintf(key, sizeof key, "old-%d", i);
    hit(s, key, &brief, T0, true);
  }
  for (int i = 0; i < 1000; i++) {
    snprintf(key, sizeof key, "new-%d", i);
    hit(s, key, &brief, T0 + SEC, true);
  }
  state_get_stats(s, &st);
  CHECK(st.expired > 0 && st.evictions == 0);
  CHECK(st.keys < 2000);
  /* an expired key met again starts over */
  CHECK(hit(s, "old-999", &brief, T0 + 2 * SEC, false).count == 0);
  state_close(s);
}

static int64_t wall(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * SEC + ts.tv_nsec;
}

static state_store *open_file(const char *path, state_stats *st) {
  state_opts o = {.persist_path = path};
  state_store *s = NULL;
  char err[256];
  if (state_open_local(&o, &s, err, sizeof err)) exit(2);
  state_get_stats(s, st);
  return s;
}

/* --state-file: counts and penalties survive a restart; expired ones do
 * not; a damaged file leaves the counters empty and says so. */
static void test_persistence(void) {
  char dir[256];
  test_tmpdir(dir, sizeof dir, "state");
  char path[320];
  snprintf(path, sizeof path, "%s/counters", dir);
  int64_t now = wall();
  limit_spec hour = {.window_ns = 3600 * SEC, .budget = 3, .penalty_ns = 3600 * SEC};
  limit_spec brief = {.window_ns = 1, .budget = 3};
  state_stats st;
  state_store *s = open_file(path, &st);
  CHECK(st.keys == 0 && st.last_error[0] == '\0');                  /* no file yet: fine */
  for (int i = 0; i < 3; i++) hit(s, "kept", &hour, now + i, true); /* starts the penalty */
  hit(s, "half", &hour, now, true);
  hit(s, "gone", &brief, now - 10 * SEC, true); /* long expired by the reopen */
  state_close(s);

  s = open_file(path, &st);
  CHECK_MSG(st.keys == 2 && st.last_error[0] == '\0', "keys %llu, error '%s'",
            (unsigned long long)st.keys, st.last_error);
  limit_reading r = hit(s, "kept", &hour, now + 10, false);
  CHECK(r.count == 3 && r.penalized && r.exceeded);
  r = hit(s, "half", &hour, now + 10, true);
  CHECK(r.count == 1 && r.charged);
  CHECK(hit(s, "gone", &brief, now + 10, false).count == 0);
  state_close(s);

  /* damaged: truncated, then not ours */
  FILE *f = fopen(path, "r+");
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fclose(f);
  CHECK(truncate(path, size - 5) == 0);
  s = open_file(path, &st);
  CHECK(st.keys == 0 && strstr(st.last_error, "not a whole counter file"));
  state_close(s); /* writes a whole file again */
  f = fopen(path, "w");
  fputs("not a counter file at all", f);
  fclose(f);
  s = open_file(path, &st);
  CHECK(st.keys == 0 && st.last_error[0] != '\0');
  state_close(s);
  /* a file of an earlier version (sliding-window logs) is not read, and
   * the message says why */
  f = fopen(path, "w");
  fwrite("VDSTATE1", 1, 8, f);
  uint32_t klen = 1, n = 1;
  int64_t v[3] = {now + 3600 * SEC, now + 3600 * SEC, now};
  fwrite(&klen, 4, 1, f);
  fwrite("k", 1, 1, f);
  fwrite(v, 8, 2, f);
  fwrite(&n, 4, 1, f);
  fwrite(&v[2], 8, 1, f);
  fclose(f);
  s = open_file(path, &st);
  CHECK_MSG(st.keys == 0 && strstr(st.last_error, "earlier version"), "error '%s'", st.last_error);
  state_close(s);
  /* one whose keys were headed by names ("VDSTATE2", before the limit's
   * id) is read, each key turned into the id and the caller: an upgrade
   * keeps counts and penalties; a key without the two names is dropped */
  f = fopen(path, "w");
  fwrite("VDSTATE2", 1, 8, f);
  static const char named[] = "gate\x1fper_key\x1fkey-7";
  uint32_t nlen = sizeof named - 1;
  /* µs: three charges of 1,200 s each paid back in an hour, penalty an hour */
  int64_t pen[2] = {(now + 3600 * SEC) / 1000, (now + 3600 * SEC) / 1000};
  fwrite(&nlen, 4, 1, f);
  fwrite(named, 1, nlen, f);
  fwrite(pen, 8, 2, f);
  fwrite(&klen, 4, 1, f);
  fwrite("k", 1, 1, f);
  fwrite(pen, 8, 2, f);
  uint32_t end = UINT32_MAX;
  uint64_t n64 = 2;
  fwrite(&end, 4, 1, f);
  fwrite(&n64, 8, 1, f);
  fclose(f);
  s = open_file(path, &st);
  CHECK_MSG(st.keys == 1 && st.last_error[0] == '\0', "keys %llu, error '%s'",
            (unsigned long long)st.keys, st.last_error);
  char idkey[32];
  state_limit_id("gate", 4, "per_key", 7, idkey);
  memcpy(idkey + 8, "key-7", 5);
  limit_reading r2;
  state_hit(s, idkey, 13, &hour, now + 10, false, &r2);
  CHECK_MSG(r2.count == 3 && r2.penalized && r2.exceeded, "count %u penalized %d", r2.count,
            r2.penalized);
  state_close(s);
  unlink(path);
  rmdir(dir);
}

static void test_bad_urls(void) {
  state_store *s = NULL;
  char err[256];
  CHECK(state_open("memcached://x", NULL, &s, err, sizeof err) == -1 && !s);
  CHECK(strstr(err, "redis://") != NULL);
  CHECK(state_open("redis://", NULL, &s, err, sizeof err) == -1);
  CHECK(state_open("redis://host:notaport", NULL, &s, err, sizeof err) == -1);
  CHECK(state_open("redis://host:70000", NULL, &s, err, sizeof err) == -1);
  CHECK(state_open("local", NULL, &s, err, sizeof err) == 0 && s);
  CHECK_STR(state_describe(s), "local");
  state_close(s);
}

/* Eviction is least recently used, approximately (second chance): a key
 * charged all along keeps its counter while thousands of one-off keys pass
 * through a store too small for them; one charged once, long ago, is gone. */
static void test_eviction_spares_used_keys(void) {
  state_store *s = open_store(64 * 1024);
  limit_spec sp = {.window_ns = 3600 * SEC, .budget = 100000};
  char key[32];
  hit(s, "once", &sp, T0, true);
  int hot = 0;
  for (int i = 0; i < 20000; i++) {
    snprintf(key, sizeof key, "one-off-%d", i);
    hit(s, key, &sp, T0 + i, true);
    if (i % 16 == 0) {
      hit(s, "hot", &sp, T0 + i, true);
      hot++;
    }
  }
  state_stats st;
  state_get_stats(s, &st);
  CHECK(st.evictions > 10000);
  CHECK_MSG(hit(s, "hot", &sp, T0 + 20000, false).count == (uint32_t)hot, "hot: %u of %d",
            hit(s, "hot", &sp, T0 + 20000, false).count, hot);
  CHECK(hit(s, "once", &sp, T0 + 20000, false).count == 0);
  state_close(s);
}

/* Keys longer than a slot holds (40 bytes) are kept apart: counted exactly,
 * moved with their slots when others are removed, counted in the bound,
 * freed when evicted, and kept across a restart like short ones. */
static void test_long_keys(void) {
  char dir[256];
  test_tmpdir(dir, sizeof dir, "state");
  char path[320], key[128];
  snprintf(path, sizeof path, "%s/counters", dir);
  int64_t now = wall();
  limit_spec sp = {.window_ns = 3600 * SEC, .budget = 1000};
  const char *pad = "-a-key-long-enough-not-to-fit-in-a-slot-of-forty-bytes";
  /* long and short keys together in a store small enough to evict */
  state_store *s = open_store(128 * 1024);
  enum { KEYS = 6000 };
  for (int i = 0; i < KEYS; i++) {
    snprintf(key, sizeof key, i % 2 ? "s%d" : "long-%d%s", i, pad);
    CHECK(hit(s, key, &sp, now, true).charged);
  }
  state_stats st;
  state_get_stats(s, &st);
  CHECK_MSG(st.bytes <= 128 * 1024 && st.evictions > 0 && st.keys + st.evictions == KEYS,
            "bytes %llu keys %llu evictions %llu", (unsigned long long)st.bytes,
            (unsigned long long)st.keys, (unsigned long long)st.evictions);
  state_close(s);
  /* no eviction: every long key counted exactly, and kept across a restart */
  state_opts o = {.persist_path = path};
  char err[256];
  s = NULL;
  if (state_open_local(&o, &s, err, sizeof err)) return;
  for (int round = 0; round < 3; round++)
    for (int i = 0; i < 500; i++) {
      snprintf(key, sizeof key, "long-%d%s", i, pad);
      hit(s, key, &sp, now + round, true);
    }
  state_close(s);
  if (state_open_local(&o, &s, err, sizeof err)) return;
  state_get_stats(s, &st);
  CHECK_MSG(st.keys == 500, "keys %llu", (unsigned long long)st.keys);
  int exact = 0;
  for (int i = 0; i < 500; i++) {
    snprintf(key, sizeof key, "long-%d%s", i, pad);
    exact += hit(s, key, &sp, now + 3, false).count == 3;
  }
  CHECK_MSG(exact == 500, "%d of 500 long keys at 3", exact);
  state_close(s);
  unlink(path);
  rmdir(dir);
}

/* Keys of every length up to well past a slot's 40 bytes, and keys that
 * differ in one byte only (at any place) or in their length only, are all
 * different counters, each with exactly its own charges (the store's hash
 * reads every byte, in words that overlap at the end). */
static void test_key_bytes(void) {
  state_store *s = open_store(0);
  limit_spec sp = {.window_ns = 3600 * SEC, .budget = 1000};
  int64_t now = wall();
  char key[128];
  enum { MAXLEN = 100 };
  /* for each length, the key of all 'a' (at == len) and the keys with one
   * 'b' at each place; each charged 1 + at % 3 times, so that neighbours
   * have different counts */
  for (int pass = 0; pass < 2; pass++) {
    int wrong = 0;
    for (int len = 1; len <= MAXLEN; len++)
      for (int at = 0; at <= len; at++) {
        memset(key, 'a', (size_t)len);
        key[len] = '\0';
        if (at < len) key[at] = 'b';
        uint32_t want = 1 + (uint32_t)(at % 3);
        if (pass == 0) {
          for (uint32_t k = 0; k < want; k++) hit(s, key, &sp, now, true);
        } else {
          uint32_t got = hit(s, key, &sp, now, false).count;
          if (got != want && wrong++ < 5)
            fprintf(stderr, "len %d, 'b' at %d: count %u, want %u\n", len, at, got, want);
        }
      }
    CHECK_MSG(wrong == 0, "%d keys with a wrong count", wrong);
  }
  /* and the empty key is a key too */
  CHECK(hit(s, "", &sp, now, true).charged);
  CHECK(hit(s, "", &sp, now, false).count == 1);
  state_close(s);
}

int main(void) {
  test_key_bytes();
  test_window_edges();
  test_read_only();
  test_penalty();
  test_against_model();
  test_threads_one_key();
  test_memory_bound();
  test_eviction_spares_used_keys();
  test_persistence();
  test_long_keys();
  test_bad_urls();
  TEST_END();
}
