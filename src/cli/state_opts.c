/* state_opts.c — the counter-store options `verdict decide` and `verdict
 * serve` share: --state, --state-on-error, --state-timeout, --state-max-bytes
 * (docs/policy.md "Limits", docs/deploy.md).
 *
 * Not here: the stores (src/state/). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "verdict.h"

static long long number(const char *s, long long max) {
  char *end;
  if (!s || !*s || *s == '-') return -1;
  long long v = strtoll(s, &end, 10);
  if (*end || v <= 0 || v > max) return -1;
  return v;
}

static const char *const names[] = {"--state", "--state-on-error", "--state-timeout",
                                    "--state-max-bytes", "--state-file"};
enum { NNAMES = sizeof names / sizeof names[0] };

int cli_state_set(const char *name, const char *v, vd_engine_opts *o, const char **err) {
  size_t k;
  for (k = 0; k < NNAMES; k++)
    if (strcmp(name, names[k]) == 0) break;
  if (k == NNAMES) return -1;
  long long n;
  *err = NULL;
  switch (k) {
    case 0:
      if (strcmp(v, "local") != 0 && strncmp(v, "redis://", 8) != 0)
        *err = "takes local or redis://HOST:PORT, not";
      else
        o->state_url = v;
      break;
    case 1:
      if (strcmp(v, "local") == 0)
        o->state_on_error = VD_STATE_LOCAL;
      else if (strcmp(v, "allow") == 0)
        o->state_on_error = VD_STATE_ALLOW;
      else if (strcmp(v, "deny") == 0)
        o->state_on_error = VD_STATE_DENY;
      else
        *err = "takes local, allow or deny, not";
      break;
    case 2:
      if ((n = number(v, 60000)) < 0)
        *err = "wants milliseconds from 1 to 60000, not";
      else
        o->state_timeout_ms = (unsigned)n;
      break;
    case 4:
      if (!*v)
        *err = "needs a file";
      else
        o->state_file = v;
      break;
    default:
      if ((n = number(v, (long long)1 << 40)) < 65536)
        *err = "wants bytes, at least 65536, not";
      else
        o->state_max_bytes = (size_t)n;
      break;
  }
  return *err ? 1 : 0;
}

int cli_state_option(const char *cmd, int argc, char **argv, int *i, vd_engine_opts *o) {
  const char *a = argv[*i];
  size_t k;
  const char *v = NULL;
  for (k = 0; k < NNAMES; k++) {
    size_t n = strlen(names[k]);
    if (strcmp(a, names[k]) == 0) {
      if (*i + 1 >= argc) return cli_usage_error(cmd, "missing value after", a);
      v = argv[++*i];
      break;
    }
    if (strncmp(a, names[k], n) == 0 && a[n] == '=') {
      v = a + n + 1;
      break;
    }
  }
  if (k == NNAMES) return -1;
  const char *err;
  if (cli_state_set(names[k], v, o, &err) == 0) return 0;
  char msg[96];
  snprintf(msg, sizeof msg, "%s %s", names[k], err);
  return cli_usage_error(cmd, msg, *v ? v : NULL);
}
