/* test_record_reference.c — the example traffic decided today gives, byte
 * for byte, the snapshot payloads and the answers it gave when the
 * reference was taken (tests/engine/record_reference.txt).
 *
 * The traffic: `verdict gen --count 5000 --seed 1` (the verdict binary
 * beside this test's), every request decided by the example bundle as it
 * was when the reference was taken, kept frozen in tests/engine/bundles/
 * reference/ (the shipped examples change with the product; a bundle's
 * version is in every payload and answer, so the test keeps its own). What a
 * decision reads from outside is pinned, so that the bytes depend on the
 * code alone: the clock (request.time: a fixed start plus 1.000003 ms a
 * request), the snapshot id (made from the request's number), the stage
 * times (zero), the model's deadline (met, as replay feeds it) and the
 * limit counters (none: every counter reads empty). The payload is made the
 * way the engine makes it — the deciding thread's capture, the writer's
 * format — both with names by pointer and copied; the answer is the one
 * vd_decision_render gives without flags.
 *
 * The reference keeps digests, not bytes: SHA-256 over every payload (each
 * followed by a newline), over every answer, and the same per block of 500
 * requests, to say where a difference starts. `--write FILE` writes it
 * anew: only when a change to the payload or the answer is meant (the
 * docs/snapshots.md format then says what changed). */
#define _GNU_SOURCE
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/json.h"
#include "core/sha256.h"
#include "engine/engine.h"
#include "policy/policy.h"
#include "snapshot/snapshot.h"
#include "test.h"
#include "verdict.h"

#define POLICY "tests/engine/bundles/reference"
#define REFERENCE "tests/engine/record_reference.txt"
#define NODE "reference-node"
#define COUNT 5000
#define BLOCK 500
#define CLOCK_START 1796212800000000000ll /* 2026-12-01T12:00:00Z */

typedef struct sha_state {
  char *buf; /* the text digested, kept whole: 5,000 payloads are ~12 MB */
  size_t len, cap;
} sha_state;

static void sha_add(sha_state *s, const char *p, size_t n) {
  if (s->len + n + 1 > s->cap) {
    while (s->len + n + 1 > s->cap) s->cap = s->cap ? s->cap * 2 : 1 << 20;
    s->buf = realloc(s->buf, s->cap);
    if (!s->buf) abort();
  }
  memcpy(s->buf + s->len, p, n);
  s->buf[s->len + n] = '\n';
  s->len += n + 1;
}

/* The traffic, from the verdict binary beside this test. */
static char **gen_requests(const char *self, size_t *count) {
  char exe[PATH_MAX], cmd[PATH_MAX + 64];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0)
    snprintf(exe, sizeof exe, "%s", self);
  else
    exe[n] = '\0';
  snprintf(cmd, sizeof cmd, "%s/verdict gen --count %d --seed 1", dirname(exe), COUNT);
  FILE *f = popen(cmd, "r");
  CHECK_MSG(f != NULL, "cannot run %s", cmd);
  if (!f) return NULL;
  char **out = calloc(COUNT + 1, sizeof *out);
  size_t k = 0, cap = 0;
  char *line = NULL;
  ssize_t l;
  while ((l = getline(&line, &cap, f)) > 0 && k < COUNT + 1) {
    while (l && (line[l - 1] == '\n' || line[l - 1] == '\r')) line[--l] = '\0';
    if (l) out[k++] = strndup(line, (size_t)l);
  }
  free(line);
  CHECK_MSG(pclose(f) == 0, "%s failed", cmd);
  *count = k;
  return out;
}

/* The payload of decision d, as the engine records it: the capture, copied
 * out (as the queue holds it), formatted; NULL when that failed. */
static const char *payload_of(vd_decision *d, const record_input *in, const char *id, arena *a,
                              size_t *len) {
  const char *cap;
  size_t cn;
  if (record_capture(d, in, &cap, &cn) != 0) return NULL;
  char *copy = arena_alloc(a, cn ? cn : 1);
  if (!copy) return NULL;
  memcpy(copy, cap, cn);
  json_buf b;
  json_buf_init(&b, a);
  if (record_format(copy, cn, id, NODE, &b) != 0) return NULL;
  *len = b.len;
  return b.data;
}

typedef struct digests {
  size_t decided;
  char payloads[65], answers[65];
  char block_payloads[COUNT / BLOCK][65], block_answers[COUNT / BLOCK][65];
} digests;

static void compute(char **reqs, size_t n, digests *out) {
  memset(out, 0, sizeof *out);
  policy_load_opts lo = {.store_dir = ""};
  policy_diags diags;
  memset(&diags, 0, sizeof diags);
  policy_bundle *b = NULL;
  int rc = policy_bundle_load(POLICY, &lo, &b, &diags);
  policy_diags_free(&diags);
  CHECK_MSG(rc == 0 && b, "the example bundle does not load");
  if (rc || !b) return;
  arena names_mem, a;
  arena_init(&names_mem, NULL, 0, 0);
  arena_init(&a, NULL, 0, 0);
  name_table *names = name_tables_build(&names_mem, b);
  decide_limits lim;
  decide_limits_init(&lim, NULL);
  vd_decision *d = vd_decision_new();
  sha_state all_p = {0}, all_a = {0}, blk_p = {0}, blk_a = {0};
  size_t copied_differ = 0;
  for (size_t i = 0; i < n; i++) {
    const char *json = reqs[i];
    size_t len = strlen(json);
    vd_error err;
    d->trace_on = 1; /* the snapshot carries the trace */
    int64_t clock = CLOCK_START + (int64_t)i * 1000003;
    rc = engine_decide_json_inputs(b, names, &lim, json, len, clock, 0, NULL, d, &err);
    if (rc == 0) {
      out->decided++;
      d->ns_parse = d->ns_decide = d->ns_render = d->latency_ns = d->ns_model = 0;
      d->latency_us = 0;
      uint8_t id[16] = {0x01, 0x93, 0xc0, 0xde, 0x7a, 0x1b, 0x7c, 0x3d, 0x8e};
      for (int k = 0; k < 4; k++) id[12 + k] = (uint8_t)(i >> (8 * (3 - k)));
      snapshot_id_format(id, d->snapshot_id_buf);
      d->snapshot_id = d->snapshot_id_buf;
      const char *ans;
      size_t alen;
      CHECK(decision_render(d, 0, &ans, &alen) == 0);
      decide_request req;
      CHECK(request_parse_json(&d->mem, json, len, &lim, &req, &err) == 0);
      record_input in = {.req = &req, .json = json, .json_len = len, .lim = &lim};
      memcpy(in.id, id, 16);
      arena_reset(&a);
      size_t pn = 0, cn = 0;
      d->trace_borrow = 1; /* names by pointer: the engine's usual capture */
      const char *p = payload_of(d, &in, d->snapshot_id, &a, &pn);
      d->trace_borrow = 0;
      const char *c = payload_of(d, &in, d->snapshot_id, &a, &cn); /* names copied */
      CHECK_MSG(p != NULL && c != NULL, "no payload for request %zu", i);
      if (!p || !c) continue;
      if (cn != pn || memcmp(p, c, pn) != 0) copied_differ++;
      sha_add(&all_p, p, pn);
      sha_add(&blk_p, p, pn);
      sha_add(&all_a, ans, alen);
      sha_add(&blk_a, ans, alen);
    } else {
      /* refused requests count too: the error is the answer */
      char e[64];
      int en = snprintf(e, sizeof e, "error %d", rc);
      sha_add(&all_a, e, (size_t)en);
      sha_add(&blk_a, e, (size_t)en);
    }
    if ((i + 1) % BLOCK == 0 && (i + 1) / BLOCK <= COUNT / BLOCK) {
      size_t k = (i + 1) / BLOCK - 1;
      sha256_hex(blk_p.buf, blk_p.len, out->block_payloads[k]);
      sha256_hex(blk_a.buf, blk_a.len, out->block_answers[k]);
      blk_p.len = blk_a.len = 0;
    }
  }
  CHECK_MSG(copied_differ == 0, "%zu payloads differ between names by pointer and copied",
            copied_differ);
  sha256_hex(all_p.buf, all_p.len, out->payloads);
  sha256_hex(all_a.buf, all_a.len, out->answers);
  free(all_p.buf);
  free(all_a.buf);
  free(blk_p.buf);
  free(blk_a.buf);
  vd_decision_free(d);
  arena_free(&a);
  arena_free(&names_mem);
  policy_bundle_free(b);
}

static void write_reference(const char *path, const digests *g) {
  FILE *f = fopen(path, "w");
  CHECK_MSG(f != NULL, "cannot write %s", path);
  if (!f) return;
  fprintf(f,
          "# tests/engine/test_record_reference.c: `verdict gen --count %d --seed 1`, decided\n"
          "# with the clock, ids, stage times and counters pinned. Digests (SHA-256) of\n"
          "# every snapshot payload and every answer, then per block of %d requests.\n",
          COUNT, BLOCK);
  fprintf(f, "decided %zu\npayloads %s\nanswers %s\n", g->decided, g->payloads, g->answers);
  for (int k = 0; k < COUNT / BLOCK; k++)
    fprintf(f, "block %d %s %s\n", k, g->block_payloads[k], g->block_answers[k]);
  fclose(f);
}

static void check_reference(const digests *g) {
  FILE *f = fopen(REFERENCE, "r");
  CHECK_MSG(f != NULL, "cannot read %s", REFERENCE);
  if (!f) return;
  char line[512], want_p[65] = "", want_a[65] = "";
  size_t decided = 0;
  int blocks = 0, first_bad = -1;
  while (fgets(line, sizeof line, f)) {
    int k;
    char p[65], a[65];
    if (line[0] == '#') continue;
    if (sscanf(line, "decided %zu", &decided) == 1) continue;
    if (sscanf(line, "payloads %64s", want_p) == 1) continue;
    if (sscanf(line, "answers %64s", want_a) == 1) continue;
    if (sscanf(line, "block %d %64s %64s", &k, p, a) == 3 && k >= 0 && k < COUNT / BLOCK) {
      blocks++;
      int bad_p = strcmp(p, g->block_payloads[k]) != 0, bad_a = strcmp(a, g->block_answers[k]);
      if ((bad_p || bad_a) && first_bad < 0) first_bad = k;
      if (bad_p)
        fprintf(stderr, "block %d (requests %d-%d): the payloads differ\n", k, k * BLOCK,
                k * BLOCK + BLOCK - 1);
      if (bad_a)
        fprintf(stderr, "block %d (requests %d-%d): the answers differ\n", k, k * BLOCK,
                k * BLOCK + BLOCK - 1);
    }
  }
  fclose(f);
  printf("%zu of %d requests decided (reference: %zu); payloads %s, answers %s\n", g->decided,
         COUNT, decided, g->payloads, g->answers);
  CHECK(blocks == COUNT / BLOCK);
  CHECK(decided == g->decided);
  CHECK_MSG(strcmp(want_p, g->payloads) == 0, "the snapshot payloads differ from the reference");
  CHECK_MSG(strcmp(want_a, g->answers) == 0, "the answers differ from the reference");
  CHECK(first_bad < 0);
}

int main(int argc, char **argv) {
  const char *write = NULL;
  if (argc == 3 && strcmp(argv[1], "--write") == 0) {
    write = argv[2];
  } else if (argc != 1) {
    fprintf(stderr, "usage: engine_test_record_reference [--write FILE]\n");
    return 2;
  }
  size_t n = 0;
  char **reqs = gen_requests(argv[0], &n);
  CHECK_MSG(n == COUNT, "verdict gen gave %zu requests, want %d", n, COUNT);
  if (reqs && n == COUNT) {
    static digests g;
    compute(reqs, n, &g);
    CHECK(g.decided > COUNT / 2);
    if (write)
      write_reference(write, &g);
    else
      check_reference(&g);
  }
  for (size_t i = 0; reqs && i < n; i++) free(reqs[i]);
  free(reqs);
  TEST_END();
}
