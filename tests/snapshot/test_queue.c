/* test_queue.c — the queue between deciding threads and the writer: the
 * ring itself (full in bytes, full in records, wrapping with a pad entry,
 * nothing visible before commit), DROP counting every refusal exactly, and
 * BLOCK never losing a record when several fast producers share a tiny
 * queue. */
#include "helpers.h"

#include <pthread.h>

static void test_ring_basics(void) {
  ring q;
  CHECK(ring_init(&q, 4096, 1000) == 0);
  CHECK(q.cap == 4096);
  CHECK(ring_max_body(&q) == 1016);
  uint8_t *body;
  uint64_t ticket;
  const uint8_t *b;
  uint32_t len;
  uint64_t next;
  CHECK(ring_peek(&q, 0, &b, &len, &next) == 0); /* empty */
  /* reserved but not committed: invisible */
  CHECK(ring_reserve(&q, 100, &body, &ticket) == 0);
  CHECK(ticket == 112); /* 8 + 100, rounded up to 8 */
  CHECK(ring_peek(&q, 0, &b, &len, &next) == 0);
  memset(body, 'a', 100);
  ring_commit(&q, body, 100);
  CHECK(ring_peek(&q, 0, &b, &len, &next) == 1);
  CHECK(len == 100 && next == 112 && b[0] == 'a' && b[99] == 'a');
  /* fill the bytes: 4096 / 112 = 36 entries */
  int fit = 1;
  while (ring_reserve(&q, 100, &body, &ticket) == 0) {
    ring_commit(&q, body, 100);
    fit++;
  }
  CHECK_MSG(fit == 36, "%d fit", fit);
  CHECK(ring_count(&q) == 36);
  /* consume 10 and the room comes back */
  uint64_t pos = 0;
  for (int i = 0; i < 10; i++) {
    CHECK(ring_peek(&q, pos, &b, &len, &next) == 1);
    pos = next;
  }
  ring_release(&q, pos, 10);
  CHECK(ring_count(&q) == 26);
  /* the next entry would straddle the end: a pad fills it, the entry wraps */
  int more = 0;
  uint64_t last = 0;
  while (ring_reserve(&q, 100, &body, &ticket) == 0) {
    ring_commit(&q, body, 100);
    more++;
    last = ticket;
  }
  CHECK(more >= 8);
  CHECK(last > 4096);
  int pads = 0, recs = 0;
  while (1) {
    int k = ring_peek(&q, pos, &b, &len, &next);
    if (k == 0) break;
    if (k == 2)
      pads++;
    else
      recs++;
    pos = next;
  }
  CHECK(pads == 1);
  CHECK(recs == 26 + more);
  CHECK(pos == last);
  ring_release(&q, pos, (uint64_t)recs);
  CHECK(ring_count(&q) == 0);
  /* released space is zero again: the invariant the consumer relies on */
  int nonzero = 0;
  for (size_t i = 0; i < q.cap; i++) nonzero += q.buf[i] != 0;
  CHECK(nonzero == 0);
  ring_free(&q);

  /* the record bound alone */
  CHECK(ring_init(&q, 1 << 16, 3) == 0);
  int n = 0;
  while (ring_reserve(&q, 10, &body, &ticket) == 0) {
    ring_commit(&q, body, 10);
    n++;
  }
  CHECK(n == 3);
  ring_free(&q);
}

typedef struct prod_job {
  snapshot_log *log;
  snapshot_idgen *g;
  int id, n;
  uint64_t ok, full, other;
} prod_job;

static void *producer(void *arg) {
  prod_job *j = arg;
  trec t;
  for (int i = 0; i < j->n; i++) {
    /* the number says which producer and which of its records it is */
    trec_make(&t, j->g, 0, (uint64_t)j->id * 1000000 + (uint64_t)i, 300);
    int rc = snapshot_log_append(j->log, &t.r, NULL);
    if (rc == 0)
      j->ok++;
    else if (rc == SNAPSHOT_EFULL)
      j->full++;
    else
      j->other++;
  }
  return NULL;
}

enum { PRODUCERS = 4 };

static void run_producers(snapshot_log *log, snapshot_idgen *g, int per, prod_job *jobs) {
  pthread_t th[PRODUCERS];
  for (int i = 0; i < PRODUCERS; i++) {
    jobs[i] = (prod_job){log, g, i + 1, per, 0, 0, 0};
    pthread_create(&th[i], NULL, producer, &jobs[i]);
  }
  for (int i = 0; i < PRODUCERS; i++) pthread_join(th[i], NULL);
}

/* Each producer's records must appear in its own order, and exactly those
 * accepted must be there. */
static void check_per_producer(const readback *b, const prod_job *jobs, int expect_all) {
  long long nextn[PRODUCERS + 1] = {0};
  size_t count[PRODUCERS + 1] = {0};
  int order = 1, strays = 0;
  for (size_t i = 0; i < b->n; i++) {
    long long p = b->nums[i] / 1000000, k = b->nums[i] % 1000000;
    if (p < 1 || p > PRODUCERS) {
      strays++;
      continue;
    }
    if (k < nextn[p] && order) {
      order = 0;
      fprintf(stderr, "out of order: record %zu of %zu is producer %lld's #%lld, after its #%lld\n",
              i, b->n, p, k, nextn[p] - 1);
    }
    nextn[p] = k + 1;
    count[p]++;
  }
  CHECK(order);
  CHECK(strays == 0);
  for (int i = 0; i < PRODUCERS; i++) {
    CHECK_MSG(count[i + 1] == jobs[i].ok, "producer %d: %zu on disk, %llu accepted", i + 1,
              count[i + 1], (unsigned long long)jobs[i].ok);
    if (expect_all) CHECK(jobs[i].ok == (uint64_t)jobs[i].n);
  }
}

static void test_drop_counts(void) {
  char *dir = scratch_dir("drop");
  snapshot_log_opts o;
  snapshot_log_opts_init(&o);
  o.on_full = SNAPSHOT_FULL_DROP;
  o.queue_records = 8;
  o.queue_bytes = 16 * 1024;
  o.durability = SNAPSHOT_DURABLE_ALWAYS; /* an fsync per batch: a slow writer */
  snapshot_log *log = log_open_or_die(dir, &o);
  snapshot_idgen g;
  snapshot_idgen_init(&g);
  prod_job jobs[PRODUCERS];
  run_producers(log, &g, 5000, jobs);
  uint64_t ok = 0, full = 0, other = 0;
  for (int i = 0; i < PRODUCERS; i++) {
    ok += jobs[i].ok;
    full += jobs[i].full;
    other += jobs[i].other;
  }
  snapshot_log_status st;
  snapshot_log_close(log, &st);
  CHECK(other == 0);
  CHECK_MSG(full > 0, "a queue of 8 behind fsync never filled?");
  CHECK(ok + full == PRODUCERS * 5000);
  CHECK(st.dropped == full); /* every refusal counted: drops are never silent */
  CHECK(st.appended == ok);
  CHECK(st.written == ok);
  printf("drop: %llu accepted, %llu dropped\n", (unsigned long long)ok, (unsigned long long)full);
  readback b;
  CHECK(read_all(dir, NULL, &b) == ok);
  CHECK(b.bad == 0);
  check_per_producer(&b, jobs, 0);
  readback_free(&b);
  rm_rf(dir);
  free(dir);
}

static void test_block_never_drops(void) {
  static const snapshot_durability modes[] = {SNAPSHOT_DURABLE_NONE, SNAPSHOT_DURABLE_ALWAYS};
  for (int m = 0; m < 2; m++) {
    char *dir = scratch_dir("block");
    snapshot_log_opts o;
    snapshot_log_opts_init(&o);
    o.on_full = SNAPSHOT_FULL_BLOCK;
    o.queue_records = 4;
    o.queue_bytes = 8 * 1024;
    o.durability = modes[m];
    o.segment_bytes = 256 * 1024; /* rotations while producers wait */
    snapshot_log *log = log_open_or_die(dir, &o);
    snapshot_idgen g;
    snapshot_idgen_init(&g);
    prod_job jobs[PRODUCERS];
    int per = m == 0 ? 20000 : 300;
    run_producers(log, &g, per, jobs);
    snapshot_log_status st;
    snapshot_log_close(log, &st);
    CHECK(st.dropped == 0);
    CHECK(st.appended == (uint64_t)PRODUCERS * per);
    CHECK(st.written == (uint64_t)PRODUCERS * per);
    readback b;
    CHECK(read_all(dir, NULL, &b) == (size_t)PRODUCERS * per);
    CHECK(b.bad == 0);
    check_per_producer(&b, jobs, 1);
    readback_free(&b);
    rm_rf(dir);
    free(dir);
  }
}

static void test_closed(void) {
  char *dir = scratch_dir("closed");
  snapshot_log *log = log_open_or_die(dir, NULL);
  snapshot_idgen g;
  snapshot_idgen_init(&g);
  trec t;
  trec_make(&t, &g, 0, 1, 10);
  uint64_t ticket;
  CHECK(snapshot_log_append(log, &t.r, &ticket) == 0);
  CHECK(snapshot_log_wait_durable(log, ticket) == 0);
  snapshot_log_status st;
  CHECK(snapshot_log_close(log, &st) == 0);
  CHECK(st.written == 1 && st.fsyncs >= 1); /* INTERVAL by default: synced at close */
  rm_rf(dir);
  free(dir);
}

int main(void) {
  TEST_RUN(test_ring_basics);
  TEST_RUN(test_drop_counts);
  TEST_RUN(test_block_never_drops);
  TEST_RUN(test_closed);
  TEST_END();
}
