/* test_mutations.c — damaged policy files never crash the loader and never
 * fail silently.
 *
 * Deterministic random damage (bytes flipped, deleted, duplicated; lines
 * swapped or cut; characters YAML cares about inserted) to the good example
 * strategies. Every load either succeeds or fails with at least one error,
 * and every diagnostic names a place inside the file (or none) and carries a
 * message. Run under ASan/UBSan this is a small fuzzer of its own. (It found
 * that libfyaml loops forever on invalid UTF-8 after a '%' directive
 * marker; yaml.c now rejects invalid UTF-8 before parsing.) */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint32_t rnd(uint32_t n) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return n ? (uint32_t)(rng % n) : 0;
}

static char *read_fixture(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *buf = malloc(1 << 16);
  *len = fread(buf, 1, (1 << 16) - 1, f);
  buf[*len] = 0;
  fclose(f);
  return buf;
}

static size_t mutate(char *buf, size_t len, size_t cap) {
  static const char specials[] = ":-[]{}#&*!|>'\"\n\t ,?%@`\\";
  int edits = 1 + (int)rnd(4);
  for (int e = 0; e < edits && len > 1; e++) {
    size_t at = rnd((uint32_t)len);
    switch (rnd(6)) {
      case 0:
        buf[at] = specials[rnd(sizeof specials - 1)];
        break;
      case 1: /* mostly ASCII: invalid UTF-8 stops at the first check */
        buf[at] = (char)(rnd(8) ? rnd(128) : rnd(256));
        break;
      case 2: /* delete a run */ {
        size_t n = 1 + rnd(8);
        if (at + n > len) n = len - at;
        memmove(buf + at, buf + at + n, len - at - n);
        len -= n;
        break;
      }
      case 3: /* duplicate a run */ {
        size_t n = 1 + rnd(16);
        if (at + n > len) n = len - at;
        if (len + n >= cap) break;
        memmove(buf + at + n, buf + at, len - at);
        len += n;
        break;
      }
      case 4: /* cut at a point */
        len = at + 1;
        break;
      default: /* insert a special character */
        if (len + 1 >= cap) break;
        memmove(buf + at + 1, buf + at, len - at);
        buf[at] = specials[rnd(sizeof specials - 1)];
        len++;
    }
  }
  buf[len] = 0;
  return len;
}

static void run(const char *path, int rounds) {
  size_t len;
  char *orig = read_fixture(path, &len);
  CHECK(orig != NULL);
  if (!orig) return;
  size_t cap = len * 2 + 64;
  char *buf = malloc(cap);
  int loaded = 0, failed = 0;
  for (int r = 0; r < rounds; r++) {
    memcpy(buf, orig, len + 1);
    size_t n = mutate(buf, len, cap);
    int lines = 1;
    for (size_t i = 0; i < n; i++) /* YAML breaks lines at LF, CRLF and a lone CR */
      lines += buf[i] == '\n' || (buf[i] == '\r' && (i + 1 >= n || buf[i + 1] != '\n'));
    policy_diags d = {0};
    policy_bundle *b = NULL;
    int rc = policy_bundle_from_text("m.yaml", buf, n, &b, &d);
    if (rc == 0) {
      loaded++;
      CHECK(b != NULL && d.errors == 0);
    } else {
      failed++;
      CHECK(b == NULL);
      CHECK_MSG(d.errors > 0, "a failed load without an error (round %d)", r);
    }
    for (size_t i = 0; i < d.n; i++) {
      const policy_diag *g = &d.items[i];
      int ok = g->message[0] && g->line >= 0 && g->line <= lines + 1 && g->column >= 0;
      CHECK_MSG(ok, "round %d: bad diagnostic %d:%d '%s'", r, g->line, g->column, g->message);
    }
    policy_bundle_free(b);
    policy_diags_free(&d);
  }
  /* the damage must be mixed: some files still load, most do not */
  CHECK(loaded > 0 && failed > 0);
  free(buf);
  free(orig);
}

int main(void) {
  alarm(300); /* a hang is a failure, not a stuck test run */
  run("tests/policy/fixtures/good/request_gate.yaml", 3000);
  run("tests/policy/fixtures/good/payment.yaml", 3000);
  TEST_END();
}
