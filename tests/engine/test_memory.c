/* test_memory.c — a reused vd_decision does not grow: after warm-up, 10,000
 * decisions (JSON and C requests, every decision path, traces rendered)
 * make the decision's arena malloc no new chunk, and (outside sanitizer
 * builds, whose allocator keeps its own books) the process's heap in use
 * stays where it was. */
#include <malloc.h>
#include <string.h>

#include "engine/engine.h"
#include "test.h"
#include "verdict.h"

#define PLAIN    \
  "\"path\":\"/" \
  "\",\"headers\":{\"user-agent\":\"curl\"},\"body_size\":1,\"env\":{\"country\":\"US\"}"

static const char *const requests[] = {
    /* rule */
    "{\"action\":\"gate\",\"context\":{\"path\":\"/\",\"headers\":{\"user-agent\":\"sqlmap\"},"
    "\"body_size\":1,\"env\":{}}}",
    /* default */
    "{\"action\":\"gate\",\"context\":{" PLAIN "}}",
    /* error */
    "{\"action\":\"gate\",\"context\":{\"path\":\"/\"}}",
    /* candidates, on_no_candidate: first */
    "{\"action\":\"http_request\",\"candidates\":[\"route_eu\",\"ask_mfa\"],\"context\":{" PLAIN
    "}}",
    /* lets, request.key */
    "{\"action\":\"gate\",\"key\":\"vip-1\",\"context\":{\"path\":\"/api/v2\",\"headers\":{\"user-"
    "agent\":\"Mozilla/5.0\"},\"body_size\":10,\"env\":{\"country\":\"US\"}}}",
};

static size_t heap_in_use(void) {
  struct mallinfo2 mi = mallinfo2();
  return mi.uordblks;
}

static int run(vd_engine *e, vd_decision *d, int i) {
  vd_error err;
  int rc;
  if (i % 7 == 3) {
    const char *c[] = {"allow", "block"};
    vd_request r = {.action = "gate",
                    .candidates = c,
                    .ncandidates = 2,
                    .context_json = "{" PLAIN "}",
                    .context_len = -1,
                    .key = "vip-2"};
    rc = vd_decide(e, &r, d, &err);
  } else {
    rc = vd_decide_json(e, requests[i % 5], -1, d, &err);
  }
  if (rc) return rc;
  const char *s;
  return vd_decision_render(d, i % 2 ? VD_JSON_TRACE : 0, &s, NULL);
}

int main(void) {
  vd_engine_opts o;
  memset(&o, 0, sizeof o);
  o.store_dir = "";
  vd_engine *e = NULL;
  vd_error err;
  int rc = vd_engine_open("tests/engine/bundles/gate", &o, &e, &err);
  CHECK_MSG(rc == 0, "%s", err.message);
  if (!e) TEST_END();
  vd_decision *d = vd_decision_new();
  vd_decision_set_trace(d, 1);

  int failures = 0;
  for (int i = 0; i < 200; i++) failures += run(e, d, i) != 0;
  size_t chunks = decision_arena_mallocs(d);
  size_t heap = heap_in_use();
  for (int i = 0; i < 10000; i++) failures += run(e, d, i) != 0;
  size_t chunks_after = decision_arena_mallocs(d);
  size_t heap_after = heap_in_use();

  CHECK(failures == 0);
  CHECK_MSG(chunks_after == chunks, "arena chunks %zu -> %zu over 10,000 decisions", chunks,
            chunks_after);
#ifndef VD_SANITIZE
  CHECK_MSG(heap_after == heap, "heap in use %zu -> %zu bytes over 10,000 decisions", heap,
            heap_after);
#else
  (void)heap;
  (void)heap_after;
#endif
  printf("arena chunks malloc'd: %zu (flat over 10,000 decisions); heap %zu -> %zu\n", chunks, heap,
         heap_after);

  /* A bigger request makes the arena grow (a few chunks, doubling), then it
   * is flat again. */
  char big[20000];
  size_t n =
      (size_t)snprintf(big, sizeof big, "{\"action\":\"gate\",\"context\":{" PLAIN ",\"pad\":[");
  for (int i = 0; i < 1500; i++)
    n += (size_t)snprintf(big + n, sizeof big - n, "%s%d", i ? "," : "", i);
  snprintf(big + n, sizeof big - n, "]}}");
  for (int i = 0; i < 50; i++) CHECK(vd_decide_json(e, big, -1, d, &err) == 0);
  CHECK(decision_arena_mallocs(d) > chunks);
  chunks = decision_arena_mallocs(d);
  for (int i = 0; i < 1000; i++) {
    CHECK(vd_decide_json(e, big, -1, d, &err) == 0);
    failures += run(e, d, i) != 0;
  }
  CHECK(failures == 0);
  CHECK_MSG(decision_arena_mallocs(d) == chunks, "after growth: %zu -> %zu", chunks,
            decision_arena_mallocs(d));

  vd_decision_free(d);
  vd_engine_close(e);
  TEST_END();
}
