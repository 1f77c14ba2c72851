/* test_mcp.c — the MCP protocol core (src/agent/mcp.h) without a transport:
 * that every request gets exactly one answer that is a JSON-RPC 2.0 object
 * with the request's id, notifications none, and that mangled messages
 * (cut, spliced, byte-flipped versions of real ones) never crash it and
 * always get a well-formed answer or none. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/mcp.h"
#include "core/json.h"
#include "test.h"
#include "verdict.h"

static const char policy[] =
    "strategy: guard\n"
    "decision_points: [tool_call]\n"
    "rules:\n"
    "  - name: no-rm\n"
    "    if: 'tool == \"Bash\" && shellCommands(input.command).exists(c, c[0] == \"rm\")'\n"
    "    action: deny\n"
    "    reason: no deleting\n"
    "default: allow\n"
    "on_error: deny\n";

static const char *const seeds[] = {
    "{\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},"
    "\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}},\"jsonrpc\":\"2.0\",\"id\":0}",
    "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}",
    "{\"method\":\"tools/list\",\"jsonrpc\":\"2.0\",\"id\":1}",
    "{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"tools/"
    "call\",\"params\":{\"name\":\"decide_action\","
    "\"arguments\":{\"tool_name\":\"Bash\",\"tool_input\":{\"command\":\"sudo rm -rf "
    "/\"},\"cwd\":\"/p\"}}}",
    "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/"
    "call\",\"params\":{\"name\":\"explain_decision\","
    "\"arguments\":{\"snapshot_id\":\"01a22a0e-7b96-7334-9407-a3a0e60c7a4a\"}}}",
    "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/list\",\"params\":{\"_meta\":{\"io."
    "modelcontextprotocol/protocolVersion\":\"2026-07-28\",\"io.modelcontextprotocol/"
    "clientCapabilities\":{}}}}",
    "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"ping\"}",
};

/* One message in; checks the shape of what comes out. */
static void roundtrip(mcp_session *s, const char *msg, size_t len, int expect_answer) {
  json_buf out;
  json_buf_init(&out, NULL);
  int rc = mcp_handle(s, msg, len, &out);
  CHECK(rc == 0 || rc == 1);
  if (expect_answer >= 0) CHECK_MSG(rc == expect_answer, "%.*s -> rc %d", (int)len, msg, rc);
  if (rc == 1) {
    arena a;
    arena_init(&a, NULL, 0, 0);
    value v;
    int ok = json_parse(&a, out.data, out.len, NULL, &v, NULL) == 0 && v.kind == V_MAP;
    CHECK_MSG(ok, "the answer is not a JSON object: %s", out.data);
    if (ok) {
      const value *j = value_map_get(&v, "jsonrpc", 7);
      CHECK(j && j->kind == V_STRING && j->n == 3 && memcmp(j->s, "2.0", 3) == 0);
      CHECK(value_map_get(&v, "id", 2) != NULL);
      CHECK((value_map_get(&v, "result", 6) != NULL) != (value_map_get(&v, "error", 5) != NULL));
      CHECK(memchr(out.data, '\n', out.len) == NULL); /* one line on stdio */
    }
    arena_free(&a);
  }
  json_buf_free(&out);
}

int main(void) {
  char dir[256];
  test_tmpdir(dir, sizeof dir, "mcp");
  char path[320];
  snprintf(path, sizeof path, "%s/guard.yaml", dir);
  FILE *f = fopen(path, "w");
  CHECK(f != NULL);
  fputs(policy, f);
  fclose(f);
  vd_engine_opts o;
  memset(&o, 0, sizeof o);
  o.store_dir = "";
  vd_engine *e;
  vd_error err;
  int orc = vd_engine_open(dir, &o, &e, &err);
  CHECK_MSG(orc == 0, "%s", err.message);
  if (orc != 0) TEST_END();
  mcp_session *s = mcp_session_new(e, NULL);
  CHECK(s != NULL);

  /* The seeds: answers where answers are due. */
  for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++)
    roundtrip(s, seeds[i], strlen(seeds[i]), i == 1 ? 0 : 1);
  CHECK(mcp_version_supported("2025-11-25", 10) && mcp_version_supported("2026-07-28", 10));
  CHECK(!mcp_version_supported("2025-11-2", 9) && !mcp_version_supported("1.0", 3));

  /* The decision itself, through the tool. */
  json_buf out;
  json_buf_init(&out, NULL);
  CHECK(mcp_handle(s, seeds[3], strlen(seeds[3]), &out) == 1);
  CHECK(strstr(out.data, "\"structuredContent\":{\"action\":\"deny\"") != NULL);
  CHECK(strstr(out.data, "\"rule\":\"no-rm\"") != NULL);
  json_buf_free(&out);

  /* Mangled messages: cut, byte-flipped and spliced. */
  unsigned seed = 7;
  char buf[2048];
  for (int round = 0; round < 20000; round++) {
    seed = seed * 1103515245u + 12345u;
    const char *a = seeds[(seed >> 8) % (sizeof seeds / sizeof seeds[0])];
    size_t n = strlen(a);
    memcpy(buf, a, n);
    seed = seed * 1103515245u + 12345u;
    switch ((seed >> 12) % 4) {
      case 0: /* cut */
        n = (seed >> 16) % (n + 1);
        break;
      case 1: /* flip a few bytes */
        for (int k = 0; k < 3; k++) {
          seed = seed * 1103515245u + 12345u;
          buf[(seed >> 10) % n] = (char)(seed >> 20);
        }
        break;
      case 2: { /* splice in part of another seed */
        const char *b = seeds[(seed >> 16) % (sizeof seeds / sizeof seeds[0])];
        size_t at = (seed >> 4) % n, bl = strlen(b), from = (seed >> 20) % bl;
        size_t take = bl - from;
        if (at + take > sizeof buf) take = sizeof buf - at;
        memcpy(buf + at, b + from, take);
        n = at + take;
        break;
      }
      default: /* duplicate a key's worth of text */
        if (n < sizeof buf / 2) {
          memcpy(buf + n - 1, a, n);
          n = 2 * n - 1;
        }
    }
    roundtrip(s, buf, n, -1);
  }
  /* Deep nesting and a huge id are answered, not crashed on. */
  size_t dn = 100000;
  char *deep = malloc(dn + 1);
  for (size_t i = 0; i < dn; i++) deep[i] = i < dn / 2 ? '[' : ']';
  deep[dn] = '\0';
  roundtrip(s, deep, dn, 1);
  free(deep);

  mcp_session_free(s);
  vd_engine_close(e);
  snprintf(path, sizeof path, "rm -rf '%s'", dir);
  CHECK(system(path) == 0);
  TEST_END();
}
