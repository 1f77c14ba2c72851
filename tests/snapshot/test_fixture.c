/* test_fixture.c — a known snapshot directory for the CLI tests (cli.sh).
 *
 *   snapshot_test_fixture --make DIR   writes the fixture into DIR
 *   snapshot_test_fixture --make-odd DIR  a few unusual payloads (nesting,
 *                                      escapes, empty containers, text that
 *                                      is not JSON, nothing at all)
 *   snapshot_test_fixture              (as a CTest test) writes it into a
 *                                      scratch directory and checks it
 *
 * The fixture is fully determined: its dated ids are made here from their
 * number (the generator's random bits come from the kernel), so every run
 * gives the same ones and cli.sh can compare them. It
 * holds 60 snapshots from 2024-01-01T00:00:00Z, one a minute (points login,
 * payment, tool_call in turn; actions allow, deny, review, ask_mfa in turn;
 * sources rule, model, default, error in turn; policy versions alternating
 * "aaaa1111..." and "cccc3333..."), then 12 from the last half hour. */
#include "helpers.h"

#define FIXTURE_START_MS 1704067200000ull /* 2024-01-01T00:00:00Z */

/* A UUIDv7 at ms with counter and "random" bits derived from n alone. */
static void fixed_id(uint64_t ms, uint64_t n, uint8_t out[16]) {
  uint64_t hi = ms << 16 | 0x7000 | (n & 0x7ff), lo = (n + 20240101) * 0x9E3779B97F4A7C15ull;
  lo ^= lo >> 29;
  lo = (lo >> 2) | (1ull << 63);
  for (int i = 0; i < 8; i++) out[i] = (uint8_t)(hi >> (56 - 8 * i));
  for (int i = 0; i < 8; i++) out[8 + i] = (uint8_t)(lo >> (56 - 8 * i));
}

static int make_fixture(const char *dir) {
  snapshot_log_opts o;
  snapshot_log_opts_init(&o);
  o.durability = SNAPSHOT_DURABLE_NONE;
  o.node = "fixture";
  o.segment_bytes = 4096; /* several segments, so list and show cross them */
  snapshot_log *log;
  char err[SNAPSHOT_ERRLEN];
  if (snapshot_log_open(dir, &o, &log, err, sizeof err) < 0) {
    fprintf(stderr, "fixture: %s\n", err);
    return 1;
  }
  trec t;
  for (uint64_t i = 0; i < 60; i++) {
    uint8_t id[16];
    fixed_id(FIXTURE_START_MS + i * 60000, i, id);
    trec_make_id(&t, id, i, 40);
    if (snapshot_log_append(log, &t.r, NULL) < 0) return 1;
  }
  snapshot_idgen g2;
  snapshot_idgen_init(&g2); /* recent ones: random ids (their time is now) */
  uint64_t now_ms = (uint64_t)(wall_ns() / 1000000);
  for (uint64_t i = 60; i < 72; i++) {
    trec_make(&t, &g2, now_ms - (72 - i) * 120000, i, 40);
    if (snapshot_log_append(log, &t.r, NULL) < 0) return 1;
  }
  return snapshot_log_close(log, NULL) == 0 ? 0 : 1;
}

static const char *const odd_payloads[] = {
    ("{\"a\":{\"b\":[1,2,{\"c\":null}],\"d\":[]},\"e\":{},\"f\":\"q\\\"uote \\\\ "
     "back\\nline é\",\"g\":[true,false,-1.5,[[]]],\"h\":\"{not: [an object]}\"}"),
    "[]",
    "\"just a string, with, commas: and colons\"",
    "this is not JSON",
    "",
};

static int make_odd(const char *dir) {
  snapshot_log *log;
  char err[SNAPSHOT_ERRLEN];
  if (snapshot_log_open(dir, NULL, &log, err, sizeof err) < 0) {
    fprintf(stderr, "fixture: %s\n", err);
    return 1;
  }
  snapshot_idgen g;
  snapshot_idgen_init(&g);
  for (size_t i = 0; i < sizeof odd_payloads / sizeof odd_payloads[0]; i++) {
    snapshot_rec r;
    memset(&r, 0, sizeof r);
    snapshot_id_new(&g, r.id);
    r.point = "odd";
    r.point_len = 3;
    r.allowed = 1;
    r.payload = odd_payloads[i];
    r.payload_len = strlen(odd_payloads[i]);
    if (snapshot_log_append(log, &r, NULL) < 0) return 1;
  }
  return snapshot_log_close(log, NULL) == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--make") == 0) return make_fixture(argv[2]);
  if (argc == 3 && strcmp(argv[1], "--make-odd") == 0) return make_odd(argv[2]);
  if (argc != 1) {
    fprintf(stderr, "usage: %s [--make DIR]\n", argv[0]);
    return 2;
  }
  char *a = scratch_dir("fixa"), *b = scratch_dir("fixb");
  CHECK(make_fixture(a) == 0);
  CHECK(make_fixture(b) == 0);
  readback ra, rb;
  CHECK(read_all(a, NULL, &ra) == 72);
  CHECK(read_all(b, NULL, &rb) == 72);
  CHECK(ra.bad == 0 && rb.bad == 0);
  /* the dated part is the same every time */
  CHECK(memcmp(ra.ids, rb.ids, 60 * 16) == 0);
  CHECK(count_files(a, ".log") > 3);
  char first[SNAPSHOT_ID_TEXT];
  snapshot_id_format(ra.ids[0], first);
  printf("fixture's first id: %s\n", first);
  CHECK(snapshot_id_time_ms(ra.ids[0]) == FIXTURE_START_MS);
  readback_free(&ra);
  readback_free(&rb);
  rm_rf(a);
  rm_rf(b);
  free(a);
  free(b);
  TEST_END();
}
