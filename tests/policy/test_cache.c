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
#include "policy/internal.h"   /* parse_cache_get */
#include "snapshot/snapshot.h" /* snapshot_crc32c */

static const char GATE[] =
    "strategy: gate\n"
    "rules:\n"
    "  - {name: scanners, if: 'ua.contains(\"sqlmap\")', action: block}\n"
    "default: allow\n"
    "tests:\n"
    "  - {context: {ua: sqlmap}, expect: block}\n";

static void write_file(const char *path, const char *text) { put_file(path, text, strlen(text)); }

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

static policy_bundle *load(const char *dir, const char *store) { return load_dir(dir, store, 0); }

static char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "r");
  CHECK(f != NULL);
  if (!f) return NULL;
  char *buf = calloc(1, 8192);
  *n = buf ? fread(buf, 1, 8191, f) : 0;
  fclose(f);
  return buf;
}

/* Makes every cache entry of the store vouch for `text` as the stored form
 * (an entry holds the stored form's CRC32C): what someone editing the store
 * by hand, who is trusted like the bundle's author, would have to do. */
static void vouch(const char *store, const char *text, size_t n) {
  char pdir[4200];
  snprintf(pdir, sizeof pdir, "%s/parsed", store);
  DIR *d = opendir(pdir);
  CHECK(d != NULL);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char path[4600], line[80];
    snprintf(path, sizeof path, "%s/%s", pdir, e->d_name);
    size_t m = 0;
    char *old = slurp(path, &m);
    CHECK(old && m == 74);
    if (old && m == 74) {
      snprintf(line, sizeof line, "%.65s%08x\n", old, (unsigned)snapshot_crc32c(0, text, n));
      put_file(path, line, 74);
    }
    free(old);
  }
  closedir(d);
}

/* The rule's name as loaded lazily, then eagerly. A lazy load from the
 * cache keeps no tests; from the file it does. (An eager load that parses
 * the file writes its stored form again: so it comes second.) */
static void expect_name(const char *dir, const char *store, const char *name) {
  for (int lazy = 1; lazy >= 0; lazy--) {
    policy_bundle *b = load_dir(dir, store, lazy);
    CHECK(b != NULL);
    if (b) {
      CHECK_STR(b->strategies[0].rules[0].name, name);
      CHECK_MSG(b->strategies[0].ntests == (lazy && !strcmp(name, "scannerz") ? 0u : 1u),
                "lazy %d %s ntests %u", lazy, name, b->strategies[0].ntests);
    }
    policy_bundle_free(b);
  }
}

/* A lazy load cuts the `tests` member out of the stored form before
 * reading it, wherever the file put it: first, between other keys, or
 * last, with `tests` keys inside other values before and in it. Each is
 * read from the cache (proof: an edit of its stored form, vouched for, is
 * what loads) with everything around the tests intact. */
static void test_lazy_load_cuts_tests_wherever_they_are(void) {
  static const char *const files[] = {
      "tests:\n  - {context: {ua: sqlmap}, expect: block}\n"
      "strategy: first\nrules:\n  - {name: scanners, if: 'ua == \"sqlmap\"', action: block}\n"
      "default: allow\n",
      "strategy: middle\nrules:\n  - {name: scanners, if: 'ua == \"sqlmap\"', action: block}\n"
      "tests:\n  - {context: {ua: \"a,\\\"tests\\\":[}\"}, expect: allow}\n"
      "default: allow\n",
      "strategy: last\ndefault: allow\nconstants: {m: {a: 1, tests: 2}}\n"
      "rules:\n  - {name: scanners, if: 'ua == \"sqlmap\" && m.tests == 2', action: block}\n"
      "tests:\n  - {context: {ua: sqlmap, tests: [1, {tests: 2}]}, expect: block}\n",
  };
  for (size_t k = 0; k < sizeof files / sizeof files[0]; k++) {
    char dir[256];
    test_tmpdir(dir, sizeof dir, "cache");
    char file[320], store[320], canon[512];
    snprintf(file, sizeof file, "%s/s.yaml", dir);
    snprintf(store, sizeof store, "%s/store", dir);
    write_file(file, files[k]);
    sleep(3);
    policy_bundle *b = load(dir, store); /* parsed, remembered */
    char v[65] = "";
    if (b) snprintf(v, sizeof v, "%s", b->strategies[0].version);
    policy_bundle_free(b);
    snprintf(canon, sizeof canon, "%s/%s.json", store, v);
    size_t n = 0;
    char *text = slurp(canon, &n);
    char *at = text ? strstr(text, "\"scanners\"") : NULL;
    CHECK_MSG(at != NULL, "file %zu", k);
    if (at) {
      memcpy(at, "\"scannerz\"", 10);
      put_file(canon, text, n);
      vouch(store, text, n);
      b = load_dir(dir, store, 1);
      CHECK(b != NULL);
      if (b) {
        const strategy *st = &b->strategies[0];
        CHECK_MSG(st->nrules == 1 && !strcmp(st->rules[0].name, "scannerz"), "file %zu", k);
        CHECK_MSG(st->ntests == 0, "file %zu: a lazy load keeps no tests", k);
        CHECK_STR(st->name, k == 0 ? "first" : k == 1 ? "middle" : "last");
        CHECK_MSG(st->default_outcome.action >= 0 &&
                      !strcmp(st->actions[st->default_outcome.action].name, "allow"),
                  "file %zu: default", k);
      }
      policy_bundle_free(b);
    }
    free(text);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
  }
}

/* The stored form is mapped, not read (cache.c, map_text): whatever its
 * size — a few bytes, or exactly a page, where the mapping has no zero
 * byte after it and the text is read instead — it comes back whole, a NUL
 * after it; one whose CRC is not the entry's does not come back. */
static void test_stored_form_mapped_whatever_its_size(void) {
  static const size_t sizes[] = {1, 100, 4095, 4096, 8192, 8193};
  const long page = sysconf(_SC_PAGESIZE);
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    char dir[256];
    test_tmpdir(dir, sizeof dir, "cache-map");
    char path[600], line[80];
    snprintf(path, sizeof path, "%s/parsed", dir);
    CHECK(mkdir(path, 0700) == 0);
    const char *ver = "1111111111111111111111111111111111111111111111111111111111111111";
    size_t n = sizes[k];
    char *text = malloc(n);
    CHECK(text != NULL);
    if (!text) return;
    for (size_t i = 0; i < n; i++) text[i] = (char)('a' + i % 26);
    snprintf(path, sizeof path, "%s/%s.json", dir, ver);
    put_file(path, text, n);
    for (int damaged = 0; damaged <= 1; damaged++) {
      uint32_t crc = snapshot_crc32c(0, text, n) ^ (uint32_t)damaged;
      snprintf(path, sizeof path, "%s/parsed/%s", dir, "k");
      snprintf(line, sizeof line, "%s\n%08x\n", ver, (unsigned)crc);
      put_file(path, line, 74);
      char v[65] = "";
      size_t len = 0;
      uint32_t got_crc = 0;
      char *canon = parse_cache_get(dir, "k", v, &len, &got_crc);
      if (damaged) {
        CHECK_MSG(canon == NULL, "size %zu: a stored form changed since is used", n);
      } else {
        CHECK_MSG(canon && len == n && memcmp(canon, text, n) == 0 && canon[n] == '\0' &&
                      got_crc == crc && !strcmp(v, ver),
                  "size %zu (page %ld): the stored form does not come back whole", n, page);
      }
      parse_cache_put_back(canon, len);
    }
    free(text);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
  }
}

int main(void) {
  test_stored_form_mapped_whatever_its_size();
  test_lazy_load_cuts_tests_wherever_they_are();
  char dir[256];
  test_tmpdir(dir, sizeof dir, "cache");
  char file[320], store[320], parsed[352], canon[512];
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

  /* The stored canonical form altered by hand, same size, still canonical:
   * its entry's checksum no longer matches, so the file is parsed instead
   * (a damaged disk does not change decisions)... */
  snprintf(canon, sizeof canon, "%s/%s.json", store, v1);
  size_t n0 = 0;
  char *orig = slurp(canon, &n0);
  char *p = orig ? strstr(orig, "\"scanners\"") : NULL;
  CHECK(p != NULL);
  if (p) {
    memcpy(p, "\"scannerz\"", 10);
    put_file(canon, orig, n0);
    b = load_dir(dir, store, 1);
    if (b) CHECK_STR(b->strategies[0].rules[0].name, "scanners");
    policy_bundle_free(b);
    /* ...and the damaged stored form is removed, to be written again whole
     * by the next load that parses the file */
    CHECK_MSG(access(canon, F_OK) != 0, "a damaged stored form is removed");
    b = load(dir, store);
    policy_bundle_free(b);
    size_t n1 = 0;
    char *again = slurp(canon, &n1);
    CHECK(again && n1 == n0 && strstr(again, "\"scanners\"") != NULL);
    free(again);
    /* proof that the cache is read: the same edit, vouched for in the entry
     * (as a trusted hand editing the store would), is what loads */
    put_file(canon, orig, n0);
    vouch(store, orig, n0);
  }
  free(orig);
  b = load(dir, store);
  if (b) CHECK_STR(b->strategies[0].rules[0].name, "scannerz");
  policy_bundle_free(b);
  expect_name(dir, store, "scannerz"); /* a lazy load reads it too */

  /* A lazy load checks everything it reads but the tests' bytes: an edit
   * there that is still JSON is not read at all... */
  size_t n = 0;
  char *good = slurp(canon, &n);
  CHECK(good && strstr(good, "\"tests\":[{") != NULL);
  if (good && strstr(good, "\"tests\":[{")) {
    char *t = strdup(good);
    char *ua = t ? strstr(strstr(t, "\"tests\":[{"), "\"sqlmap\"") : NULL;
    CHECK(ua != NULL);
    if (ua) memcpy(ua, "\"sqlmaq\"", 8);
    put_file(canon, t, n);
    vouch(store, t, n);
    b = load_dir(dir, store, 1);
    if (b) CHECK_STR(b->strategies[0].rules[0].name, "scannerz");
    policy_bundle_free(b);
    free(t);
  }
  /* ... and a damaged entry is never trusted: the file is parsed instead,
   * eagerly or lazily. Not canonical (a space added), cut short, broken
   * inside the tests: */
  static const struct {
    const char *find, *put;
  } damage[] = {{"\"scannerz\"", "\"scannerz\" "}, {NULL, NULL}, {"\"tests\":[{", "\"tests\":[{{"}};
  for (size_t k = 0; good && k < sizeof damage / sizeof damage[0]; k++) {
    char bad[9000];
    size_t m = n / 2; /* cut short */
    memcpy(bad, good, n);
    if (damage[k].find) {
      char *at = strstr(bad, damage[k].find);
      CHECK(at != NULL);
      if (!at) continue;
      size_t pre = (size_t)(at - bad), fl = strlen(damage[k].find), pl = strlen(damage[k].put);
      memcpy(bad + pre, damage[k].put, pl);
      memcpy(bad + pre + pl, good + pre + fl, n - pre - fl);
      m = n - fl + pl;
    }
    put_file(canon, bad, m);
    vouch(store, bad, m); /* past the checksum: the canonical check refuses it */
    expect_name(dir, store, "scanners");
  }
  /* a tests value that is not even JSON any more: the same */
  if (good) {
    char bad[9000];
    memcpy(bad, good, n);
    char *at = strstr(bad, "\"tests\":[{");
    if (at) at[9] = '(';
    put_file(canon, bad, n);
    vouch(store, bad, n);
    expect_name(dir, store, "scanners");
    put_file(canon, good, n); /* as it was */
    vouch(store, good, n);
    expect_name(dir, store, "scannerz");
  }
  free(good);

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

  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CHECK(system(cmd) == 0);
  TEST_END();
}
