/* test_compiled.c — the compiled programs a lazy load keeps in the version
 * store (src/policy/cache.c, compiled/):
 *
 * - the first lazy load of a version compiles every let and rule and writes
 *   the file; the next one starts with no program and an image for each,
 *   and the program rebuilt from an image answers as the text does;
 * - the file belongs to the stored form it was made from: a stored form
 *   edited by hand under the same version name (its checksum vouched for,
 *   as a trusted hand would) gets its programs compiled again from the new
 *   text, and the file written again for it;
 * - a file cut short is removed and written again by the load that finds
 *   it; an eager load neither reads nor writes one;
 * - a file damaged with its checksum made to fit (header, table, the tree
 *   of the stored form it keeps) never crashes a load; a load may then
 *   report what the damaged tree says (a hand that fixes the checksum is
 *   trusted like one that edits the stored form), but the file is dropped
 *   and the next load is the strategy again. */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "expr/expr.h"
#include "helpers.h"
#include "snapshot/snapshot.h" /* snapshot_crc32c */

static const char GATE[] =
    "strategy: gate\n"
    "constants:\n"
    "  bad: [sqlmap, nikto, nmap]\n"
    "let:\n"
    "  agent: ua.lowerAscii()\n"
    "rules:\n"
    "  - {name: scanners, if: 'agent in bad || ua == \"xxxx\"', action: block}\n"
    "default: allow\n"
    "tests:\n"
    "  - {context: {ua: sqlmap}, expect: block}\n";

static char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "r");
  if (!f) return NULL;
  char *buf = calloc(1, 1 << 16);
  *n = buf ? fread(buf, 1, (1 << 16) - 1, f) : 0;
  fclose(f);
  return buf;
}

/* The one file in dir (its path in out), or 0 files, or more. */
static int only_file(const char *dir, char *out, size_t cap) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (e->d_name[0] != '.') {
      n++;
      snprintf(out, cap, "%s/%s", dir, e->d_name);
    }
  closedir(d);
  return n;
}

static const char *ua_now;

static int lookup_ua(void *user, const char *name, size_t len, value *out) {
  const strategy *s = user;
  if (len == 2 && !memcmp(name, "ua", 2)) {
    *out = value_str(ua_now, (uint32_t)strlen(ua_now));
    return 0;
  }
  if (len == 5 && !memcmp(name, "agent", 5)) { /* the let, as the engine would give it */
    const char *why = NULL;
    arena a;
    arena_init(&a, NULL, 0, 0);
    const expr_program *p = strategy_let_program(s, 0, &a, &why);
    arena_free(&a);
    if (!p) return -1;
    static arena keep;
    static int inited;
    if (!inited) arena_init(&keep, NULL, 0, 0), inited = 1;
    eval_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.arena = &keep;
    expr_activation act = {lookup_ua, user};
    *out = expr_eval(p, &act, &ctx);
    return 0;
  }
  return -1;
}

/* Whether rule 0 of b matches ua. */
static int matches(const policy_bundle *b, const char *ua) {
  const strategy *s = &b->strategies[0];
  const char *why = NULL;
  arena a;
  arena_init(&a, NULL, 0, 0);
  const expr_program *p = strategy_rule_program(s, 0, &a, &why);
  CHECK_MSG(p != NULL, "rule 0 does not compile: %s", why ? why : "?");
  int r = -1;
  if (p) {
    ua_now = ua;
    eval_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.arena = &a;
    expr_activation act = {lookup_ua, (void *)s};
    value v = expr_eval(p, &act, &ctx);
    r = v.kind == V_BOOL ? v.b : -1;
  }
  arena_free(&a);
  return r;
}

static int has_programs(const policy_bundle *b) {
  const strategy *s = &b->strategies[0];
  return s->rules[0].cond != NULL || s->lets[0].prog != NULL;
}

static int has_images(const policy_bundle *b) {
  const strategy *s = &b->strategies[0];
  return s->rules[0].lazy.image != NULL && s->lets[0].lazy.image != NULL;
}

int main(void) {
  char dir[256];
  test_tmpdir(dir, sizeof dir, "compiled");
  char file[320], store[320], cdir[352], cfile[1024], canon[512];
  snprintf(file, sizeof file, "%s/gate.yaml", dir);
  snprintf(store, sizeof store, "%s/store", dir);
  snprintf(cdir, sizeof cdir, "%s/compiled", store);
  put_file(file, GATE, sizeof GATE - 1);
  sleep(3); /* files changed in the last 2 s are not cached */

  policy_bundle *b = load_dir(dir, store, 0);       /* parsed, remembered */
  CHECK(only_file(cdir, cfile, sizeof cfile) == 0); /* an eager load writes none */
  char v[65] = "";
  if (b) snprintf(v, sizeof v, "%s", b->strategies[0].version);
  policy_bundle_free(b);
  b = load_dir(dir, store, 0);
  policy_bundle_free(b);
  CHECK(only_file(cdir, cfile, sizeof cfile) == 0);

  /* the first lazy load compiles everything and writes the file */
  b = load_dir(dir, store, 1);
  CHECK(b && has_programs(b) && !has_images(b));
  if (b) CHECK(matches(b, "NMAP") == 1 && matches(b, "curl") == 0 && matches(b, "xxxx") == 1);
  policy_bundle_free(b);
  CHECK(only_file(cdir, cfile, sizeof cfile) == 1);
  struct stat st1;
  CHECK(stat(cfile, &st1) == 0);

  /* the next one rebuilds from the images, and answers the same */
  b = load_dir(dir, store, 1);
  CHECK(b && !has_programs(b) && has_images(b));
  if (b) CHECK(matches(b, "NMAP") == 1 && matches(b, "curl") == 0 && matches(b, "xxxx") == 1);
  policy_bundle_free(b);

  /* the stored form edited by hand, vouched for: compiled from the new text */
  snprintf(canon, sizeof canon, "%s/%s.json", store, v);
  size_t n = 0;
  char *text = slurp(canon, &n);
  char *at = text ? strstr(text, "xxxx") : NULL;
  CHECK(at != NULL);
  if (at) {
    memcpy(at, "curl", 4);
    put_file(canon, text, n);
    char pdir[400], entry[1024], line[80];
    snprintf(pdir, sizeof pdir, "%s/parsed", store);
    CHECK(only_file(pdir, entry, sizeof entry) == 1);
    size_t m = 0;
    char *old = slurp(entry, &m);
    CHECK(old && m == 74);
    if (old && m == 74) {
      snprintf(line, sizeof line, "%.65s%08x\n", old, (unsigned)snapshot_crc32c(0, text, n));
      put_file(entry, line, 74);
    }
    free(old);
    b = load_dir(dir, store, 1); /* the file is of the old text: compiled again */
    CHECK(b && has_programs(b));
    if (b) CHECK(matches(b, "curl") == 1 && matches(b, "xxxx") == 0);
    policy_bundle_free(b);
    b = load_dir(dir, store, 1); /* and written again for the new one */
    CHECK(b && !has_programs(b) && has_images(b));
    if (b) CHECK(matches(b, "curl") == 1 && matches(b, "xxxx") == 0 && matches(b, "nikto") == 1);
    policy_bundle_free(b);
  }
  free(text);

  /* cut short: removed and written again by the load that finds it */
  CHECK(only_file(cdir, cfile, sizeof cfile) == 1);
  CHECK(truncate(cfile, 30) == 0);
  b = load_dir(dir, store, 1);
  CHECK(b && has_programs(b));
  if (b) CHECK(matches(b, "curl") == 1);
  policy_bundle_free(b);
  struct stat st2;
  CHECK(stat(cfile, &st2) == 0 && st2.st_size > 30);
  b = load_dir(dir, store, 1);
  CHECK(b && !has_programs(b) && has_images(b));
  policy_bundle_free(b);

  /* Damage that keeps the file's checksum right (a hand that means it):
   * every byte of the header and the table and every fifth of the tree
   * changed in turn, the checksum made to fit, and loaded. */
  {
    size_t flen = 0;
    char *good = slurp(cfile, &flen);
    uint64_t tree_off = 0, tree_len = 0;
    if (good && flen > 72) {
      memcpy(&tree_off, good + 56, 8);
      memcpy(&tree_len, good + 64, 8);
    }
    CHECK(good && tree_off > 72 && tree_len > 100 && tree_off + tree_len <= flen);
    uint32_t loaded = 0, tried = 0;
    for (size_t i = 0; good && i < tree_off + tree_len && i < flen; i += i < 96 ? 1 : 5) {
      if (i >= 16 && i < 20) continue; /* the checksum itself */
      char *bad = malloc(flen);
      if (!bad) break;
      memcpy(bad, good, flen);
      bad[i] ^= (char)(i % 2 ? 0x01 : 0x40);
      uint32_t crc = snapshot_crc32c(0, bad + 20, flen - 20);
      memcpy(bad + 16, &crc, 4);
      put_file(cfile, bad, flen);
      free(bad);
      policy_load_opts o;
      memset(&o, 0, sizeof o);
      o.store_dir = store;
      o.lazy = 1;
      policy_diags d;
      memset(&d, 0, sizeof d);
      b = NULL;
      if (policy_bundle_load(dir, &o, &b, &d) == 0 && b->nstrategies == 1 &&
          b->strategies[0].nrules == 1)
        loaded++;
      policy_diags_free(&d);
      policy_bundle_free(b);
      tried++;
      /* whatever that load made of it, the next one is the strategy */
      b = load_dir(dir, store, 1);
      CHECK(b && b->nstrategies == 1 && b->strategies[0].nrules == 1 && matches(b, "curl") == 1);
      policy_bundle_free(b);
    }
    CHECK_MSG(tried > 100 && loaded > tried / 2, "%u of %u loads", loaded, tried);
    if (good) put_file(cfile, good, flen);
    free(good);
  }

  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CHECK(system(cmd) == 0);
  TEST_END();
}
