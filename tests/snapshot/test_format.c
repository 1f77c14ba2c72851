/* test_format.c — the log's format hook (snapshot_log_opts.format): the
 * writer thread turns each appended payload into the one written, before
 * framing it. Producers append a short capture ("n=<n>"); what is read back
 * is the full payload the hook made from it, with the header fields as
 * appended, findable by id (the index follows the formatted frames). A
 * record the hook refuses is not written, is counted in `rejected`, leaves
 * no queue depth behind, and a wait for its ticket still returns. Raw
 * records (snapshot_log_reserve_raw, _append_raw: the payload alone in the
 * queue) get every header field from the hook, and are refused without one. */

#include "helpers.h"

typedef struct fmt_state {
  char out[4200];
  uint64_t calls;
} fmt_state;

/* n % 50 == 13: refused. Else the payload trec_make would have written. */
static int format(void *ud, snapshot_rec *rec) {
  fmt_state *st = ud;
  st->calls++;
  char cap[32];
  if (rec->payload_len < 3 || rec->payload_len >= sizeof cap || memcmp(rec->payload, "n=", 2) != 0)
    return -1;
  memcpy(cap, rec->payload, rec->payload_len);
  cap[rec->payload_len] = '\0';
  unsigned long long n = strtoull(cap + 2, NULL, 10);
  if (n % 50 == 13) return -1;
  char idt[SNAPSHOT_ID_TEXT];
  snapshot_id_format(rec->id, idt);
  size_t pad = (size_t)((n * 7919) % 4001);
  int w = snprintf(st->out, sizeof st->out, "{\"id\":\"%s\",\"n\":%llu,\"pad\":\"", idt, n);
  memset(st->out + w, 'x', pad);
  memcpy(st->out + w + pad, "\"}", 3);
  rec->payload = st->out;
  rec->payload_len = (size_t)w + pad + 2;
  return 0;
}

#define N 3000

static void test_format_hook(void) {
  char *dir = scratch_dir("format");
  fmt_state st = {.calls = 0};
  snapshot_log_opts o;
  snapshot_log_opts_init(&o);
  o.durability = SNAPSHOT_DURABLE_ALWAYS;
  o.queue_records = 64;      /* the producer outruns the writer: BLOCK, rounds */
  o.segment_bytes = 1 << 20; /* several segments: rotation re-formats */
  o.format = format;
  o.format_ud = &st;
  snapshot_log *log;
  char err[SNAPSHOT_ERRLEN];
  CHECK(snapshot_log_open(dir, &o, &log, err, sizeof err) == 0);
  snapshot_idgen g;
  snapshot_idgen_init(&g);
  static uint8_t ids[N][16];
  uint64_t refused = 0;
  for (uint64_t n = 0; n < N; n++) {
    trec t;
    trec_make(&t, &g, 0, n, 4000);
    char cap[32];
    t.r.payload_len = (size_t)snprintf(cap, sizeof cap, "n=%llu", (unsigned long long)n);
    t.r.payload = cap;
    memcpy(ids[n], t.r.id, 16);
    uint64_t ticket;
    CHECK(snapshot_log_append(log, &t.r, &ticket) == 0);
    refused += n % 50 == 13;
    /* a refused record alone in the writer's hands: its ticket still comes due */
    if (n % 500 == 13) CHECK(snapshot_log_wait_durable(log, ticket) == 0);
  }
  snapshot_log_status s;
  CHECK(snapshot_log_close(log, &s) == 0);
  CHECK_MSG(s.appended == N, "appended %llu", (unsigned long long)s.appended);
  CHECK_MSG(s.written == N - refused, "written %llu, want %llu", (unsigned long long)s.written,
            (unsigned long long)(N - refused));
  CHECK_MSG(s.rejected == refused, "rejected %llu, want %llu", (unsigned long long)s.rejected,
            (unsigned long long)refused);
  CHECK(s.queue_depth == 0);
  CHECK(s.segments > 1);
  CHECK(st.calls >= N);

  /* every record read back whole, formatted, in order; none refused */
  snapshot_reader *r;
  CHECK(snapshot_reader_open(dir, NULL, &r, err, sizeof err) == 0);
  snapshot_rec rec;
  long long last = -1;
  uint64_t got = 0, bad = 0;
  while (snapshot_reader_next(r, &rec) == 1) {
    long long n = trec_check(&rec);
    if (n < 0 || n <= last || n % 50 == 13) bad++;
    last = n;
    got++;
  }
  CHECK_MSG(bad == 0, "%llu records not as the hook formatted them", (unsigned long long)bad);
  CHECK(got == N - refused);
  /* found by id through the index; a refused one is not there */
  for (uint64_t n = 0; n < N; n += 97) {
    int f = snapshot_reader_find(r, ids[n], &rec);
    if (n % 50 == 13)
      CHECK(f == 0);
    else
      CHECK(f == 1 && trec_check(&rec) == (long long)n);
  }
  CHECK(snapshot_reader_find(r, ids[13], &rec) == 0);
  snapshot_reader_close(r);
  rm_rf(dir);
  free(dir);
}

/* Raw records: the capture is "r=<n>:<32 hex digits of the id>"; the hook
 * makes the whole record trec_make would have (header fields and payload). */
static int format_raw(void *ud, snapshot_rec *rec) {
  fmt_state *st = ud;
  st->calls++;
  char cap[80];
  if (rec->point || rec->payload_len < 36 || rec->payload_len >= sizeof cap ||
      memcmp(rec->payload, "r=", 2) != 0)
    return -1;
  memcpy(cap, rec->payload, rec->payload_len);
  cap[rec->payload_len] = '\0';
  char *colon = strchr(cap, ':');
  if (!colon || strlen(colon + 1) != 32) return -1;
  unsigned long long n = strtoull(cap + 2, NULL, 10);
  if (n % 50 == 13) return -1;
  for (int i = 0; i < 16; i++) {
    unsigned b;
    if (sscanf(colon + 1 + 2 * i, "%2x", &b) != 1) return -1;
    rec->id[i] = (uint8_t)b;
  }
  rec->time_ns = (int64_t)snapshot_id_time_ms(rec->id) * 1000000 + (int64_t)(n % 1000000);
  rec->allowed = n % 3 != 1;
  rec->review = n % 7 == 3;
  rec->source = (uint8_t)(n % 4);
  rec->confidence = (float)((n * 37) % 100) / 100.0f;
  rec->point = trec_points[n % 3];
  rec->point_len = strlen(rec->point);
  rec->action = trec_actions[n % 4];
  rec->action_len = strlen(rec->action);
  rec->policy_version = n % 2 ? "aaaa1111bbbb2222" : "cccc3333dddd4444";
  rec->policy_version_len = 16;
  char idt[SNAPSHOT_ID_TEXT];
  snapshot_id_format(rec->id, idt);
  size_t pad = (size_t)((n * 7919) % 4001);
  int w = snprintf(st->out, sizeof st->out, "{\"id\":\"%s\",\"n\":%llu,\"pad\":\"", idt, n);
  memset(st->out + w, 'x', pad);
  memcpy(st->out + w + pad, "\"}", 3);
  rec->payload = st->out;
  rec->payload_len = (size_t)w + pad + 2;
  return 0;
}

#define NRAW 1500

static void test_raw_records(void) {
  char *dir = scratch_dir("raw");
  fmt_state st = {.calls = 0};
  snapshot_log_opts o;
  snapshot_log_opts_init(&o);
  o.queue_records = 64;
  o.segment_bytes = 1 << 20;
  o.format = format_raw;
  o.format_ud = &st;
  snapshot_log *log;
  char err[SNAPSHOT_ERRLEN];
  CHECK(snapshot_log_open(dir, &o, &log, err, sizeof err) == 0);
  snapshot_idgen g;
  snapshot_idgen_init(&g);
  uint64_t refused = 0;
  static uint8_t ids[NRAW][16];
  for (uint64_t n = 0; n < NRAW; n++) {
    uint8_t id[16];
    snapshot_id_new(&g, id);
    memcpy(ids[n], id, 16);
    char cap[80];
    int w = snprintf(cap, sizeof cap, "r=%llu:", (unsigned long long)n);
    for (int i = 0; i < 16; i++) w += snprintf(cap + w, sizeof cap - (size_t)w, "%02x", id[i]);
    snapshot_slot slot;
    if (n % 3 == 0) { /* reserved, written in place, committed */
      CHECK(snapshot_log_reserve_raw(log, 100, &slot) == 0);
      memcpy(slot.payload, cap, (size_t)w);
      snapshot_log_commit(log, &slot, (size_t)w, NULL);
    } else if (n % 3 == 1) { /* reserved, given up, then appended */
      CHECK(snapshot_log_reserve_raw(log, 100, &slot) == 0);
      snapshot_log_cancel(log, &slot);
      CHECK(snapshot_log_append_raw(log, cap, (size_t)w, NULL) == 0);
    } else {
      CHECK(snapshot_log_append_raw(log, cap, (size_t)w, NULL) == 0);
    }
    refused += n % 50 == 13;
  }
  snapshot_log_status s;
  CHECK(snapshot_log_close(log, &s) == 0);
  CHECK_MSG(s.appended == NRAW, "appended %llu", (unsigned long long)s.appended);
  CHECK(s.written == NRAW - refused && s.rejected == refused && s.queue_depth == 0);

  /* read back whole, with the header fields the hook gave, findable by id */
  snapshot_reader *r;
  CHECK(snapshot_reader_open(dir, NULL, &r, err, sizeof err) == 0);
  snapshot_rec rec;
  long long last = -1;
  uint64_t got = 0, bad = 0;
  while (snapshot_reader_next(r, &rec) == 1) {
    long long n = trec_check(&rec);
    if (n < 0 || n <= last || n % 50 == 13 || memcmp(rec.id, ids[n], 16) != 0) bad++;
    last = n;
    got++;
  }
  CHECK_MSG(bad == 0, "%llu records not as the hook made them", (unsigned long long)bad);
  CHECK(got == NRAW - refused);
  CHECK(snapshot_reader_find(r, ids[100], &rec) == 1 && trec_check(&rec) == 100);
  snapshot_reader_close(r);
  rm_rf(dir);

  /* without a hook there is no one to make the header: refused */
  snapshot_log_opts_init(&o);
  CHECK(snapshot_log_open(dir, &o, &log, err, sizeof err) == 0);
  snapshot_slot slot;
  CHECK(snapshot_log_reserve_raw(log, 100, &slot) == SNAPSHOT_EINVAL);
  CHECK(snapshot_log_append_raw(log, "r=1:", 4, NULL) == SNAPSHOT_EINVAL);
  CHECK(snapshot_log_close(log, &s) == 0);
  CHECK(s.appended == 0 && s.written == 0 && s.rejected == 1);
  rm_rf(dir);
  free(dir);
}

int main(void) {
  TEST_RUN(test_format_hook);
  TEST_RUN(test_raw_records);
  TEST_END();
}
