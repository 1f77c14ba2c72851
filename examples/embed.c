/* embed.c — verdict inside your own program, in one page.
 *
 * Opens an engine on a policy bundle, decides one request built in C and one
 * given as JSON, prints what came out, and closes. Build it against the
 * installed library:
 *
 *   cc -o embed examples/embed.c $(pkg-config --cflags --libs verdict)
 *   cc -static -o embed examples/embed.c $(pkg-config --static --cflags --libs verdict)
 *   ./embed [BUNDLE_DIR [DECISION_POINT]]     (default: examples/policies http_request)
 */
#include <stdio.h>
#include <stdlib.h>

#include "verdict.h"

static void show(const char *label, const vd_decision *d) {
  const char *action = vd_decision_action(d);
  const char *rule = vd_decision_rule(d);
  const char *reason = vd_decision_reason(d);
  printf("%s: %s (%s, source %s%s%s, confidence %.2f)\n", label, action ? action : "(none)",
         vd_decision_allowed(d) ? "allowed" : "not allowed", vd_decision_source(d),
         rule ? ", rule " : "", rule ? rule : "", vd_decision_confidence(d));
  if (reason) printf("  reason: %s\n", reason);
  printf("  strategy %s, policy version %.12s..., %.1f us\n", vd_decision_strategy(d),
         vd_decision_policy_version(d), vd_decision_latency_us(d));
}

int main(int argc, char **argv) {
  const char *bundle = argc > 1 ? argv[1] : "examples/policies";
  const char *point = argc > 2 ? argv[2] : "http_request";
  vd_error err;

  /* 1. Open an engine. The options may be NULL; here we keep no version
   *    store, so the example writes nothing beside the bundle. */
  vd_engine_opts opts = {.store_dir = ""};
  vd_engine *engine;
  if (vd_engine_open(bundle, &opts, &engine, &err) != 0) {
    fprintf(stderr, "embed: %s\n", err.message);
    return 1;
  }
  char version[65];
  printf("bundle %s, version %.12s...\n", bundle, vd_engine_policy_version(engine, version));

  /* 2. A decision object: reuse it for every request on this thread. */
  vd_decision *d = vd_decision_new();
  if (!d) {
    vd_engine_close(engine);
    return 1;
  }

  /* 3. A request built in C: the decision point, the answers the caller
   *    can act on, and the context the rules read (as JSON). */
  const char *candidates[] = {"allow", "block", "ask_mfa"};
  vd_request req = {
      .action = point,
      .candidates = candidates,
      .ncandidates = 3,
      .context_json =
          "{\"path\": \"/api/v1/orders\", \"method\": \"GET\", \"client_ip\": \"203.0.113.7\","
          " \"body_size\": 512, \"env\": {\"country\": \"CN\"},"
          " \"headers\": {\"user-agent\": \"Mozilla/5.0\"}}",
      .context_len = -1,
      .key = "203.0.113.7",
  };
  int rc = vd_decide(engine, &req, d, &err);
  if (rc == 0)
    show("from C", d);
  else
    fprintf(stderr, "embed: request refused: %s (at %s)\n", err.message, err.path);

  /* 4. The same kind of request as JSON, as a server would receive it, and
   *    the decision back as JSON. */
  char json[512];
  snprintf(
      json, sizeof json,
      "{\"action\": \"%s\", \"context\": {\"path\": \"/wp-admin/setup.php\", \"method\": "
      "\"GET\", \"client_ip\": \"192.0.2.10\", \"body_size\": 0, \"env\": {\"country\": \"US\"}, "
      "\"headers\": {\"user-agent\": \"sqlmap/1.7\"}}}",
      point);
  if (rc == 0) {
    rc = vd_decide_json(engine, json, -1, d, &err);
    if (rc == 0) {
      show("from JSON", d);
      char *out;
      if (vd_decision_json(d, 0, &out) == 0) {
        printf("  %s\n", out);
        vd_free(out);
      }
    } else {
      fprintf(stderr, "embed: request refused: %s (at %s)\n", err.message, err.path);
    }
  }

  /* 5. Clean up: decisions first, then the engine. */
  vd_decision_free(d);
  vd_engine_close(engine);
  return rc == 0 ? 0 : 1;
}
