/* test_only_point.c — vd_engine_opts.only_point: an engine for one kind of
 * decision (an agent's hook) loads only the strategy files that can serve it,
 * decides those requests exactly as a full engine does, and refuses the
 * others as an unknown decision point. */
#include <string.h>

#include "test.h"
#include "verdict.h"

static const char TOOL[] =
    "{\"action\":\"tool_call\",\"context\":{\"agent\":\"claude\",\"tool_name\":\"Bash\","
    "\"tool_input\":{\"command\":\"rm -rf /\"},\"cwd\":\"/home/dev/proj\"}}";

int main(void) {
  vd_engine_opts o;
  memset(&o, 0, sizeof o);
  o.store_dir = "";
  vd_engine *full = NULL, *one = NULL;
  vd_error err;
  CHECK_MSG(vd_engine_open("examples/policies", &o, &full, &err) == 0, "%s", err.message);
  o.only_point = "tool_call";
  CHECK_MSG(vd_engine_open("examples/policies", &o, &one, &err) == 0, "%s", err.message);
  vd_decision *a = vd_decision_new(), *b = vd_decision_new();
  if (full && one) {
    CHECK(vd_decide_json(full, TOOL, -1, a, &err) == 0);
    CHECK(vd_decide_json(one, TOOL, -1, b, &err) == 0);
    CHECK_STR(vd_decision_action(b), vd_decision_action(a));
    CHECK_STR(vd_decision_rule(b), vd_decision_rule(a));
    CHECK_STR(vd_decision_policy_version(b), vd_decision_policy_version(a));
    CHECK_STR(vd_decision_action(b), "deny");
    /* request_gate's file never mentions tool_call: not loaded */
    int rc = vd_decide_json(one, "{\"action\":\"http_request\",\"context\":{}}", -1, b, &err);
    CHECK(rc == VD_ENOTFOUND);
    CHECK_MSG(strstr(err.message, "'http_request'") != NULL, "%s", err.message);
    char va[65], vb[65];
    vd_engine_policy_version(full, va);
    vd_engine_policy_version(one, vb);
    CHECK(strcmp(va, vb) != 0); /* a smaller bundle is another bundle */
  }
  vd_decision_free(a);
  vd_decision_free(b);
  vd_engine_close(full);
  vd_engine_close(one);
  TEST_END();
}
