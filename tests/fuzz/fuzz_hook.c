/* fuzz_hook.c — each agent hook's stdin (Claude Code, Codex, Gemini CLI,
 * OpenCode) on arbitrary bytes: hook_parse, then, when it reads, the
 * decision request written from it (interactive and headless). Checks: no
 * crash, leak, UB or hang; a refusal says why; the request written is JSON
 * the strict reader accepts (no duplicate keys, valid UTF-8) with the
 * fields the engine needs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/hook.h"
#include "core/arena.h"
#include "core/json.h"
#include "fuzz.h"

static arena A;
static int A_ready;

static const value *member(const value *m, const char *k) {
  if (m->kind != V_MAP) return NULL;
  size_t n = strlen(k);
  for (uint32_t i = 0; i < m->n; i++)
    if (m->entries[i].key.n == n && memcmp(m->entries[i].key.s, k, n) == 0)
      return &m->entries[i].val;
  return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!A_ready) {
    arena_init(&A, NULL, 0, 256u << 20);
    A_ready = 1;
  }
  static const hook_agent agents[] = {HOOK_CLAUDE, HOOK_CODEX, HOOK_GEMINI, HOOK_OPENCODE};
  for (size_t i = 0; i < sizeof agents / sizeof agents[0]; i++) {
    hook_call c;
    memset(&c, 0, sizeof c);
    char why[512];
    why[0] = '\0';
    if (hook_parse(agents[i], &A, (const char *)data, size, &c, why, sizeof why) != 0) {
      FUZZ_CHECK(why[0] != '\0', "hook_parse refused without saying why");
      json_buf out, err;
      json_buf_init(&out, NULL);
      json_buf_init(&err, NULL);
      (void)hook_fail(agents[i], HOOK_EV_PRE, why, &out, &err);
      json_buf_free(&out);
      json_buf_free(&err);
      arena_reset(&A);
      continue;
    }
    if (c.ev == HOOK_EV_OTHER) { /* not guarded: no request at all */
      json_buf out, err;
      json_buf_init(&out, NULL);
      json_buf_init(&err, NULL);
      FUZZ_CHECK(hook_pass(agents[i], &c, &out, &err) == 0, "no opinion must exit 0");
      json_buf_free(&out);
      json_buf_free(&err);
      arena_reset(&A);
      continue;
    }
    size_t nparts = hook_part_count(&c);
    for (size_t k = 0; k < 2 * nparts; k++) {
      int headless = (int)(k & 1);
      hook_call part;
      FUZZ_CHECK(hook_part(&c, &A, k / 2, &part) == 0, "hook_part failed");
      json_buf b;
      json_buf_init(&b, NULL);
      if (hook_write_request(&part, headless, &b) == 0) {
        value v;
        json_error e;
        int rc = json_parse(&A, b.data, b.len, NULL, &v, &e);
        FUZZ_CHECK(rc == 0, "the request written does not read back: %s at %s: %s", e.message,
                   e.path, b.data);
        FUZZ_CHECK(member(&v, "action") && member(&v, "context"),
                   "the request lacks action or context: %s", b.data);
      }
      json_buf_free(&b);
    }
    arena_reset(&A);
  }
  return 0;
}
