/* test_tidy.c — tidying the version store's caches (policy_store_tidy,
 * src/policy/cache.c "keeping the store small") is safe beside a process
 * using them, and keeps what it is told to keep.
 *
 * A lazy bundle maps its compiled/ file and rebuilds programs from the
 * images in it when a decision first needs them; a tidy that removes the
 * file meanwhile must change nothing for that bundle (an unlinked file
 * stays mapped): every inline test decides as an eagerly compiled bundle
 * does, after the file is gone. The next load finds no file and writes it
 * again. A dry run removes nothing; the entries of a bundle given as kept
 * survive even POLICY_STORE_ALL; a writer's temporary file is removed only
 * once it has not changed for an hour; the stored forms are never touched.
 * (The ages and limits are tested end to end by tests/policy/store_tidy.sh.) */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/json.h"
#include "engine/engine.h"
#include "helpers.h"
#include "verdict.h"

static const char GATE[] =
    "strategy: gate\n"
    "constants:\n"
    "  bad: [sqlmap, nikto, nmap]\n"
    "let:\n"
    "  agent: ua.lowerAscii()\n"
    "rules:\n"
    "  - {name: scanners, if: 'agent in bad', action: block}\n"
    "  - {name: tools, if: 'ua.matches(\"^(curl|wget)/[0-9]+\")', action: challenge}\n"
    "  - {name: long, if: 'size(ua) > 40', action: block}\n"
    "default: allow\n"
    "tests:\n"
    "  - {context: {ua: sqlmap}, expect: block}\n"
    "  - {context: {ua: NMAP}, expect: block}\n"
    "  - {context: {ua: curl/8}, expect: challenge}\n"
    "  - {context: {ua: wget/1}, expect: challenge}\n"
    "  - {context: {ua: firefox}, expect: allow}\n";

/* The decision as JSON without its timings (malloc'd). */
static char *decide(const policy_bundle *b, const name_table *names, const value *context) {
  json_buf req;
  json_buf_init(&req, NULL);
  json_buf_put(&req, "{\"action\":\"gate\",\"context\":", 27);
  json_write(&req, context, 1);
  json_buf_put(&req, "}", 2);
  decide_limits lim;
  decide_limits_init(&lim, NULL);
  vd_decision *d = vd_decision_new();
  vd_error err;
  char *out = NULL;
  if (!req.oom &&
      engine_decide_json_inputs(b, names, &lim, req.data, req.len - 1, 0, 0, NULL, d, &err) == 0) {
    const char *json, *lat;
    size_t len;
    if (vd_decision_render(d, VD_JSON_TRACE, &json, &len) == 0 &&
        (lat = strstr(json, "\"latency_us\"")) != NULL)
      out = strndup(json, (size_t)(lat - json)); /* what comes before the timings */
  }
  vd_decision_free(d);
  json_buf_free(&req);
  return out;
}

static int exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

/* The one file of dir (its name in name), or 0 when it has not exactly one. */
static int only_file(const char *dir, char *name, size_t n) {
  DIR *dh = opendir(dir);
  int count = 0;
  struct dirent *de;
  while (dh && (de = readdir(dh)))
    if (de->d_name[0] != '.') {
      snprintf(name, n, "%s", de->d_name);
      count++;
    }
  if (dh) closedir(dh);
  return count == 1;
}

int main(void) {
  char dir[256], pol[320], store[320], file[400], cdir[400], pdir[400], cname[256], pname[256],
      path[800];
  test_tmpdir(dir, sizeof dir, "tidy");
  snprintf(pol, sizeof pol, "%s/p", dir);
  snprintf(store, sizeof store, "%s/store", dir);
  snprintf(file, sizeof file, "%s/gate.yaml", pol);
  snprintf(cdir, sizeof cdir, "%s/compiled", store);
  snprintf(pdir, sizeof pdir, "%s/parsed", store);
  CHECK(mkdir(pol, 0700) == 0);
  put_file(file, GATE, strlen(GATE));
  sleep(3); /* files changed in the last 2 s are not cached */

  policy_bundle *eager = load_dir(pol, "", 0);
  policy_bundle_free(load_dir(pol, store, 0)); /* parsed, and remembered */
  policy_bundle_free(load_dir(pol, store, 1)); /* compiles all, writes compiled/ */
  policy_bundle *lazy = load_dir(pol, store, 1);
  CHECK(eager && lazy && eager->strategies[0].ntests == 5);
  if (!eager || !lazy) return 1;
  CHECK(lazy->strategies[0].rules[1].lazy.image != NULL); /* from the mapped file */
  CHECK(only_file(cdir, cname, sizeof cname) && only_file(pdir, pname, sizeof pname));
  snprintf(path, sizeof path, "%s/%s.json", store, lazy->strategies[0].version);
  CHECK(exists(path));

  /* a dry run counts and removes nothing */
  policy_store_stats st;
  policy_store_tidy(store, NULL, 0, NULL, POLICY_STORE_DRY | POLICY_STORE_ALL, &st);
  CHECK(st.compiled == 0 && st.parsed == 0 && st.compiled_removed == 1 && st.parsed_removed == 1);
  CHECK(st.compiled_removed_bytes > 1000 && st.parsed_removed_bytes == 74);
  snprintf(path, sizeof path, "%s/%s", cdir, cname);
  CHECK(exists(path));

  /* kept: the bundle's compiled file and the key given survive even ALL */
  const char *keys[] = {pname};
  policy_store_tidy(store, keys, 1, lazy, POLICY_STORE_ALL, &st);
  CHECK(st.compiled == 1 && st.parsed == 1 && st.compiled_removed == 0 && st.parsed_removed == 0);
  CHECK(exists(path));

  /* a writer's temporary files: one dead for two hours goes, a fresh one stays */
  char dead[900], live[900];
  snprintf(dead, sizeof dead, "%s/.%s.Ab12Cd", cdir, cname);
  snprintf(live, sizeof live, "%s/.%s.Ef34Gh", cdir, cname);
  put_file(dead, "x", 1);
  put_file(live, "x", 1);
  struct timespec two_hours_ago[2] = {{time(NULL) - 7200, 0}, {time(NULL) - 7200, 0}};
  CHECK(utimensat(AT_FDCWD, dead, two_hours_ago, 0) == 0);
  policy_store_tidy(store, keys, 1, lazy, 0, &st);
  CHECK(!exists(dead) && exists(live) && exists(path) && st.compiled_removed == 1);

  /* everything removed under a bundle that has its file mapped */
  policy_store_tidy(store, NULL, 0, NULL, POLICY_STORE_ALL, &st);
  CHECK(!exists(path) && st.compiled == 0 && st.parsed == 0 && st.compiled_removed == 1 &&
        st.parsed_removed == 1);
  snprintf(path, sizeof path, "%s/%s.json", store, lazy->strategies[0].version);
  CHECK(exists(path)); /* the stored form is never touched */
  arena na;
  arena_init(&na, NULL, 0, 0);
  name_table *ne = name_tables_build(&na, eager), *nl = name_tables_build(&na, lazy);
  const strategy *s = &eager->strategies[0];
  uint32_t same = 0;
  for (uint32_t t = 0; ne && nl && t < s->ntests; t++) {
    char *a = decide(eager, ne, &s->tests[t].context), *b = decide(lazy, nl, &s->tests[t].context);
    CHECK(a && b);
    if (a && b) CHECK_MSG(strcmp(a, b) == 0, "test %u:\n eager %s\n lazy  %s", t, a, b);
    same += a && b && strcmp(a, b) == 0;
    free(a);
    free(b);
  }
  CHECK_MSG(same == 5, "%u of 5 decided the same", same);
  /* built on first use, from the images of the file now removed */
  CHECK(lazy->strategies[0].rules[1].cond != NULL);
  arena_free(&na);
  policy_bundle_free(lazy);

  /* the next loads find nothing and write it all again */
  policy_bundle_free(load_dir(pol, store, 1));
  policy_bundle_free(load_dir(pol, store, 1));
  CHECK(only_file(cdir, cname, sizeof cname) && only_file(pdir, pname, sizeof pname));

  policy_bundle_free(eager);
  snprintf(path, sizeof path, "rm -rf '%s'", dir);
  CHECK(system(path) == 0);
  TEST_END();
}
