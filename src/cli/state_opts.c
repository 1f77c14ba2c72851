/* state_opts.c — the counter-store options `verdict decide` and `verdict
 * serve` share: --state, --state-on-error, --state-timeout, --state-max-bytes
 * (docs/policy.md "Limits", docs/deploy.md).
 *
 * Not here: the stores (src/state/). */
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

int cli_state_option(const char *cmd, int argc, char **argv, int *i, vd_engine_opts *o) {
  const char *a = argv[*i];
  static const char *const names[] = {"--state", "--state-on-error", "--state-timeout",
                                      "--state-max-bytes", "--state-file"};
  size_t k;
  const char *v = NULL;
  for (k = 0; k < 5; k++) {
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
  if (k == 5) return -1;
  long long n;
  switch (k) {
    case 0:
      if (strcmp(v, "local") != 0 && strncmp(v, "redis://", 8) != 0)
        return cli_usage_error(cmd, "--state takes local or redis://HOST:PORT, not", v);
      o->state_url = v;
      return 0;
    case 1:
      if (strcmp(v, "local") == 0)
        o->state_on_error = VD_STATE_LOCAL;
      else if (strcmp(v, "allow") == 0)
        o->state_on_error = VD_STATE_ALLOW;
      else if (strcmp(v, "deny") == 0)
        o->state_on_error = VD_STATE_DENY;
      else
        return cli_usage_error(cmd, "--state-on-error takes local, allow or deny, not", v);
      return 0;
    case 2:
      if ((n = number(v, 60000)) < 0)
        return cli_usage_error(cmd, "--state-timeout wants milliseconds from 1 to 60000, not", v);
      o->state_timeout_ms = (unsigned)n;
      return 0;
    case 4:
      if (!*v) return cli_usage_error(cmd, "--state-file needs a file", NULL);
      o->state_file = v;
      return 0;
    default:
      if ((n = number(v, (long long)1 << 40)) < 65536)
        return cli_usage_error(cmd, "--state-max-bytes wants bytes, at least 65536, not", v);
      o->state_max_bytes = (size_t)n;
      return 0;
  }
}
