/* test_cache.c — strategy files read back from the version store
 * (src/policy/cache.c): a second load of an unchanged file uses its stored
 * canonical form and compiles to the same strategy; an edited file is parsed
 * again; a file changed in the last seconds is not cached; without a store
 * nothing is cached. */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers.h"

static const char GATE[] =
    "strategy: gate\n"
    "rules:\n"
    "  - {name: scanners, if: 'ua.contains(\"sqlmap\")', action: block}\n"
    "default: allow\n"
    "tests:\n"
    "  - {context: {ua: sqlmap}, expect: block}\n";

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  CHECK(f != NULL);
  if (!f) return;
  fputs(text, f);
  fclose(f);
}

static int count_entries(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

static policy_bundle *load(const char *dir, const char *store) {
  policy_load_opts o;
  memset(&o, 0, sizeof o);
  o.store_dir = store;
  policy_diags d;
  memset(&d, 0, sizeof d);
  policy_bundle *b = NULL;
  CHECK(policy_bundle_load(dir, &o, &b, &d) == 0);
  if (d.n) dump_diags(&d);
  policy_diags_free(&d);
  return b;
}

int main(void) {
  char dir[] = "/tmp/verdict-cache-XXXXXX";
  if (!mkdtemp(dir)) return 1;
  char file[128], store[128], parsed[160], canon[256];
  snprintf(file, sizeof file, "%s/gate.yaml", dir);
  snprintf(store, sizeof store, "%s/store", dir);
  snprintf(parsed, sizeof parsed, "%s/parsed", store);
  write_file(file, GATE);

  /* just written: not cached (its times are too recent to trust) */
  policy_bundle *b = load(dir, store);
  CHECK(count_entries(parsed) == 0);
  char v1[65] = "";
  if (b) snprintf(v1, sizeof v1, "%s", b->strategies[0].version);
  policy_bundle_free(b);

  sleep(3);
  b = load(dir, store); /* parsed, and now remembered */
  CHECK(count_entries(parsed) == 1);
  policy_bundle_free(b);

  /* from the cache: the same version, the same compiled strategy */
  b = load(dir, store);
  CHECK(b != NULL);
  if (b) {
    CHECK_STR(b->strategies[0].version, v1);
    CHECK(b->strategies[0].nrules == 1 && b->strategies[0].ntests == 1);
    CHECK_STR(b->strategies[0].rules[0].name, "scanners");
    CHECK_STR(b->strategies[0].rules[0].source, "ua.contains(\"sqlmap\")");
  }
  policy_bundle_free(b);

  /* proof that the cache was read: the stored canonical form, altered by
   * hand (the store is trusted like the bundle), is what loads */
  snprintf(canon, sizeof canon, "%s/%s.json", store, v1);
  FILE *f = fopen(canon, "r+");
  CHECK(f != NULL);
  if (f) {
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    char *p = strstr(buf, "\"scanners\"");
    CHECK(p != NULL);
    if (p) memcpy(p, "\"scannerz\"", 10);
    rewind(f);
    fwrite(buf, 1, n, f);
    fclose(f);
  }
  b = load(dir, store);
  if (b) CHECK_STR(b->strategies[0].rules[0].name, "scannerz");
  policy_bundle_free(b);

  /* without a store, always the file */
  b = load(dir, "");
  if (b) CHECK_STR(b->strategies[0].rules[0].name, "scanners");
  policy_bundle_free(b);

  /* an edit changes the file's key: parsed again, the new text wins */
  char edited[sizeof GATE + 16];
  snprintf(edited, sizeof edited, "%s", GATE);
  char *q = strstr(edited, "sqlmap\")");
  CHECK(q != NULL);
  if (q) memcpy(q, "nikto\") ", 8);
  write_file(file, edited);
  b = load(dir, store);
  CHECK(b != NULL);
  if (b) {
    CHECK_STR(b->strategies[0].rules[0].name, "scanners");
    CHECK(strstr(b->strategies[0].rules[0].source, "nikto") != NULL);
    CHECK(strcmp(b->strategies[0].version, v1) != 0);
  }
  policy_bundle_free(b);

  char cmd[200];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
  TEST_END();
}
