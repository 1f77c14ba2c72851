/* test_version.c — versions are content hashes of the canonical form, and
 * every version loaded is kept in the content-addressed store.
 *
 * Reformatting (flow vs block, quoting, comments, blank lines) keeps a
 * strategy's version; changing a rule, a constant's type or a value changes
 * it. The stored file is the canonical JSON, its SHA-256 is its name (what
 * `sha256sum` prints), and the bundle's version is the SHA-256 of the
 * strategies' "name\nversion\n" in name order. Store failures are warnings. */
#define _GNU_SOURCE
#include <dirent.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers.h"

/* The oracle: coreutils' sha256sum over the same bytes (verdict has its
 * own SHA-256; a version must be what anyone computes from the file). */
static void sha256_hex(const void *data, size_t len, char out[65]) {
  char tmp[] = "/tmp/verdict-sha-XXXXXX", cmd[64];
  out[0] = 0;
  int fd = mkstemp(tmp);
  if (fd < 0) return;
  if (write(fd, data, len) != (ssize_t)len) len = 0;
  close(fd);
  snprintf(cmd, sizeof cmd, "sha256sum %s", tmp);
  FILE *p = popen(cmd, "r");
  if (p) {
    if (!fgets(out, 65, p)) out[0] = 0;
    pclose(p);
  }
  out[64] = 0;
  unlink(tmp);
}

static void version_of(const char *text, char out[65]) {
  policy_diags d;
  policy_bundle *b = load_text(text, &d);
  CHECK(b != NULL);
  out[0] = 0;
  if (b)
    memcpy(out, b->strategies[0].version, 65);
  else
    dump_diags(&d);
  policy_bundle_free(b);
  policy_diags_free(&d);
}

static void test_formatting_keeps_version(void) {
  const char *a =
      "strategy: gate\n"
      "default: allow\n"
      "constants:\n"
      "  names: [a, b]\n"
      "rules:\n"
      "  - if: path == \"/x\"\n"
      "    action: block\n";
  const char *same[] = {
      /* comments and blank lines */
      "# a header\n"
      "strategy: gate   # name\n"
      "\n"
      "default: allow\n"
      "constants:\n"
      "  names:\n"
      "    - a   # first\n"
      "    - b\n"
      "rules:\n"
      "  # the only rule\n"
      "  - if: path == \"/x\"\n"
      "    action: block\n",
      /* flow style and other quoting */
      "{strategy: \"gate\", default: 'allow', constants: {names: ['a', \"b\"]},\n"
      " rules: [{if: 'path == \"/x\"', action: block}]}\n",
      /* a block scalar with the same text */
      "strategy: gate\n"
      "default: allow\n"
      "constants: {names: [a, b]}\n"
      "rules:\n"
      "  - if: >-\n"
      "      path == \"/x\"\n"
      "    action: block\n",
      /* an explicit document start and end, and an anchor */
      "---\n"
      "strategy: gate\n"
      "default: &d allow\n"
      "constants:\n"
      "  names: [a, b]\n"
      "rules:\n"
      "  - if: path == \"/x\"\n"
      "    action: block\n"
      "...\n",
  };
  char va[65], vb[65];
  version_of(a, va);
  CHECK(strlen(va) == 64);
  for (size_t i = 0; i < sizeof same / sizeof *same; i++) {
    version_of(same[i], vb);
    CHECK_MSG(!strcmp(va, vb), "variant %zu changed the version", i);
  }
  const char *different[] = {
      /* another rule */
      "strategy: gate\ndefault: allow\nconstants:\n  names: [a, b]\nrules:\n"
      "  - if: path == \"/y\"\n    action: block\n",
      /* another action */
      "strategy: gate\ndefault: allow\nconstants:\n  names: [a, b]\nrules:\n"
      "  - if: path == \"/x\"\n    action: deny\n",
      /* keys in another order */
      "default: allow\nstrategy: gate\nconstants:\n  names: [a, b]\nrules:\n"
      "  - if: path == \"/x\"\n    action: block\n",
      /* a list element's type: 1 is not "1" */
      "strategy: gate\ndefault: allow\nconstants:\n  names: [a, 1]\nrules:\n"
      "  - if: path == \"/x\"\n    action: block\n",
      "strategy: gate\ndefault: allow\nconstants:\n  names: [a, \"1\"]\nrules:\n"
      "  - if: path == \"/x\"\n    action: block\n",
      /* a test (a strategy's tests are part of it) */
      "strategy: gate\ndefault: allow\nconstants:\n  names: [a, b]\nrules:\n"
      "  - if: path == \"/x\"\n    action: block\ntests:\n  - {context: {path: /x}, expect: "
      "block}\n",
  };
  char seen[8][65];
  for (size_t i = 0; i < sizeof different / sizeof *different; i++) {
    version_of(different[i], seen[i]);
    CHECK_MSG(strcmp(va, seen[i]) != 0, "variant %zu kept the version", i);
    for (size_t j = 0; j < i; j++) CHECK(strcmp(seen[i], seen[j]) != 0);
  }
}

/* ---- the store, on a temporary copy of a bundle ---- */

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  return remove(path);
}
static void rm_tree(const char *dir) { nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS); }

static void write_file(const char *dir, const char *name, const char *text) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  CHECK(f != NULL);
  if (!f) return;
  fputs(text, f);
  fclose(f);
}

static char *read_all(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *buf = malloc(1 << 16);
  *len = fread(buf, 1, (1 << 16) - 1, f);
  buf[*len] = 0;
  fclose(f);
  return buf;
}

static int count_files(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

static const char *GATE =
    "strategy: gate\n"
    "default: allow\n"
    "rules:\n"
    "  - if: path == \"/x\" && n > 1.5\n"
    "    action: block\n";
static const char *PAY =
    "strategy: pay\n"
    "default: {action: approve, reason: ok}\n"
    "constants: {limit: 100, inf: .inf, none: null, on: true}\n";

static void test_store(void) {
  char dir[256];
  test_tmpdir(dir, sizeof dir, "policy-test");
  write_file(dir, "gate.yaml", GATE);
  write_file(dir, "pay.yaml", PAY);

  policy_diags d = {0};
  policy_bundle *b = NULL;
  CHECK(policy_bundle_load(dir, NULL, &b, &d) == 0); /* NULL opts: the default store */
  if (!b) {
    dump_diags(&d);
    policy_diags_free(&d);
    rm_tree(dir);
    return;
  }
  CHECK(d.warnings == 0);
  char store[600];
  snprintf(store, sizeof store, "%s/.verdict/versions", dir);
  CHECK(count_files(store) == 2);
  for (uint32_t i = 0; i < b->nstrategies; i++) {
    const strategy *s = &b->strategies[i];
    char path[800], hex[65];
    snprintf(path, sizeof path, "%s/%s.json", store, s->version);
    size_t len = 0;
    char *data = read_all(path, &len);
    CHECK_MSG(data != NULL, "no stored file for %s", s->name);
    if (!data) continue;
    sha256_hex(data, len, hex);
    CHECK_STR(hex, s->version); /* the name is the content's SHA-256 */
    if (!strcmp(s->name, "gate"))
      CHECK_STR(data,
                "{\"strategy\":\"gate\",\"default\":\"allow\",\"rules\":[{\"if\":\"path == "
                "\\\"/x\\\" && n > 1.5\",\"action\":\"block\"}]}");
    else
      CHECK_STR(data,
                "{\"strategy\":\"pay\",\"default\":{\"action\":\"approve\",\"reason\":\"ok\"},"
                "\"constants\":{\"limit\":100,\"inf\":Infinity,\"none\":null,\"on\":true}}");
    free(data);
  }
  /* the bundle's version, recomputed: names in order with their versions */
  const strategy *g = policy_bundle_find(b, "gate", 4), *p = policy_bundle_find(b, "pay", 3);
  CHECK(g && p);
  if (g && p) {
    char buf[300], hex[65];
    snprintf(buf, sizeof buf, "gate\n%s\npay\n%s\n", g->version, p->version);
    sha256_hex(buf, strlen(buf), hex);
    CHECK_STR(b->version, hex);
  }
  char first_version[65];
  memcpy(first_version, b->version, 65);
  policy_bundle_free(b);
  policy_diags_free(&d);

  /* loading again writes nothing new; renaming a file keeps the version */
  char from[600], to[600];
  snprintf(from, sizeof from, "%s/gate.yaml", dir);
  snprintf(to, sizeof to, "%s/zz-gate.yaml", dir);
  CHECK(rename(from, to) == 0);
  CHECK(policy_bundle_load(dir, NULL, &b, &d) == 0);
  CHECK(count_files(store) == 2);
  if (b) CHECK_STR(b->version, first_version);
  policy_bundle_free(b);
  policy_diags_free(&d);

  /* a changed rule: a new stored version beside the old one, a new bundle version */
  write_file(dir, "zz-gate.yaml",
             "strategy: gate\ndefault: allow\nrules:\n  - if: path == \"/y\"\n    action: block\n");
  CHECK(policy_bundle_load(dir, NULL, &b, &d) == 0);
  CHECK(count_files(store) == 3);
  if (b) CHECK(strcmp(b->version, first_version) != 0);
  policy_bundle_free(b);
  policy_diags_free(&d);

  /* an explicit store folder (created, with its parents) */
  char other[600];
  snprintf(other, sizeof other, "%s/elsewhere/deep/store", dir);
  policy_load_opts opts = {.store_dir = other};
  CHECK(policy_bundle_load(dir, &opts, &b, &d) == 0);
  CHECK(count_files(other) == 2);
  policy_bundle_free(b);
  policy_diags_free(&d);

  /* no store */
  char dir2[256];
  test_tmpdir(dir2, sizeof dir2, "policy-test");
  write_file(dir2, "pay.yaml", PAY);
  opts.store_dir = "";
  CHECK(policy_bundle_load(dir2, &opts, &b, &d) == 0);
  char none[600];
  snprintf(none, sizeof none, "%s/.verdict", dir2);
  struct stat st;
  CHECK(stat(none, &st) != 0);
  policy_bundle_free(b);
  policy_diags_free(&d);

  /* a store that cannot be written: a warning, and the bundle loads */
  char blocked[600];
  snprintf(blocked, sizeof blocked, "%s/pay.yaml/versions", dir2); /* under a file */
  opts.store_dir = blocked;
  CHECK(policy_bundle_load(dir2, &opts, &b, &d) == 0);
  CHECK(b != NULL && d.errors == 0 && d.warnings == 1);
  CHECK(d.n == 1 && strstr(d.items[0].message, "not kept in the store") != NULL);
  policy_bundle_free(b);
  policy_diags_free(&d);

  rm_tree(dir);
  rm_tree(dir2);
}

int main(void) {
  TEST_RUN(test_formatting_keeps_version);
  TEST_RUN(test_store);
  TEST_END();
}
