/* test_lazy.c — compiling on first use (vd_engine_opts.lazy_compile,
 * policy_load_opts.lazy) changes nothing a user sees.
 *
 * Every example strategy is loaded from the version store's parsed cache
 * twice, eagerly and lazily, and every one of its inline tests is decided by
 * both, at the same clock reading: the rendered decisions, traces included,
 * must be byte for byte the same (only the measured times are left out).
 * Then the same requests go through two engines that record snapshots, and
 * the snapshot payloads must be the same too (ids, times and latencies
 * aside). Also: a lazy bundle really is lazy (no program before the first
 * decision, and one kept after it), and a condition that fails to compile
 * on first use decides as a rule that errors (on_error), with the message.
 * A strategy with constants of every kind checks that a lazy compile, which
 * puts a constant's value into the parsed tree instead of parsing its
 * literal, gives the programs the inlined text gives (costs included).
 *
 * The first lazy load of a version compiles every let and rule and keeps
 * their images in the store (compiled/); later lazy loads rebuild each
 * program from its image on first use. So there are three ways to decide
 * and all must agree: eager, lazy compiling from the text (the images
 * taken away), and lazy from the images. Every image must read back, and a
 * damaged compiled/ entry is dropped and written again. */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/json.h"
#include "engine/engine.h"
#include "expr/image.h"
#include "policy/helpers.h"
#include "policy/policy.h"
#include "snapshot/snapshot.h"
#include "test.h"
#include "verdict.h"

#define CLOCK_NS 1796000000000000000LL

/* What differs between two runs of one decision: measured times, ids, the
 * clock. Everything else is kept. */
static const char *const MASKED[] = {"latency_us", "ns",      "snapshot_id", "id",
                                     "time",       "time_ns", "latency_ns",  "clock_ns"};

/* json with the masked keys left out (malloc'd), or NULL when not JSON. */
static char *masked(const char *json, size_t len) {
  return json_without(json, len, MASKED, sizeof MASKED / sizeof MASKED[0]);
}

static policy_bundle *load(const char *dir, const char *store, int lazy) {
  policy_load_opts o;
  memset(&o, 0, sizeof o);
  o.store_dir = store;
  o.lazy = lazy;
  policy_diags d;
  memset(&d, 0, sizeof d);
  policy_bundle *b = NULL;
  CHECK(policy_bundle_load(dir, &o, &b, &d) == 0);
  CHECK_MSG(d.n == 0, "%zu diagnostics loading %s", d.n, dir);
  policy_diags_free(&d);
  return b;
}

static uint32_t programs(const policy_bundle *b) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < b->nstrategies; i++) {
    const strategy *s = &b->strategies[i];
    for (uint32_t j = 0; j < s->nrules; j++) n += s->rules[j].cond != NULL;
    for (uint32_t j = 0; j < s->nlets; j++) n += s->lets[j].prog != NULL;
  }
  return n;
}

/* Takes the images away from a lazy bundle: it compiles from the text. */
static void forget_images(policy_bundle *b) {
  for (uint32_t i = 0; i < b->nstrategies; i++) {
    const strategy *s = &b->strategies[i];
    for (uint32_t j = 0; j < s->nrules; j++) ((policy_rule *)&s->rules[j])->lazy.image = NULL;
    for (uint32_t j = 0; j < s->nlets; j++) ((policy_let *)&s->lets[j])->lazy.image = NULL;
  }
}

/* How many lets and rules of b have an image; each must read back. */
static uint32_t images(const policy_bundle *b, uint32_t *total) {
  uint32_t n = 0;
  *total = 0;
  static const expr_opts later = {.simple_names = 1, .defer_jit = 1};
  for (uint32_t i = 0; i < b->nstrategies; i++) {
    const strategy *s = &b->strategies[i];
    for (uint32_t j = 0; j < s->nrules + s->nlets; j++) {
      const policy_lazy *lz = j < s->nrules ? &s->rules[j].lazy : &s->lets[j - s->nrules].lazy;
      expr_program *p = NULL;
      (*total)++;
      if (!lz->image) continue;
      CHECK_MSG(expr_image_read(lz->image, lz->image_len, &later, lz->image_mem, &p) == 0,
                "%s: the image of %s %u does not read back", s->name,
                j < s->nrules ? "rule" : "let", j < s->nrules ? j : j - s->nrules);
      n += p != NULL;
      expr_free(p);
    }
  }
  return n;
}

/* One request decided by bundle b at the fixed clock, rendered with its
 * trace and masked (malloc'd). */
static char *decide_at(const policy_bundle *b, const name_table *names, const char *req,
                       const value *counters) {
  decide_limits lim;
  decide_limits_init(&lim, NULL);
  vd_decision *d = vd_decision_new();
  vd_decision_set_trace(d, 1);
  vd_error err;
  char *out = NULL;
  int rc =
      engine_decide_json_inputs(b, names, &lim, req, strlen(req), CLOCK_NS, 0, counters, d, &err);
  if (rc == 0) {
    const char *json;
    size_t len;
    if (vd_decision_render(d, VD_JSON_TRACE, &json, &len) == 0) out = masked(json, len);
  } else {
    if (asprintf(&out, "error %d: %s", rc, err.message) < 0) out = NULL;
  }
  vd_decision_free(d);
  return out;
}

static const char BROKEN[] =
    "strategy: broken\n"
    "rules:\n"
    "  - {name: fine, if: 'ua == \"x\"', action: allow}\n"
    "  - {name: later, if: 'ua.startsWith(\"y\")', action: block}\n"
    "default: allow\n"
    "on_error: {action: block, reason: cannot check}\n";

/* Constants of every kind a YAML file gives, read in the ways rules read
 * them; strings with a quote, a backslash, a tab (that one takes the text
 * path), a double (the same), extreme integers, nesting, empty maps. */
static const char CONSTKINDS[] =
    "strategy: constkinds\n"
    "constants:\n"
    "  names: [alice, \"bob\", \"\xc3\xa9mile\", \"a\\\"q\\\\b\", \"tab\\there\"]\n"
    "  nums: [1, -2, 9223372036854775807, -9223372036854775808]\n"
    "  ratio: 0.25\n"
    "  flags: {yes_k: true, no_k: false, none_k: null}\n"
    "  nested: [[1, 2], {k: [a, b]}, []]\n"
    "  empty: {}\n"
    "  pattern: '^(git|hg) push|\xc3\xbc$'\n"
    "rules:\n"
    "  - {name: by-name, if: 'ua in names', action: block}\n"
    "  - {name: by-num, if: 'n in nums || n == size(nested)', action: block}\n"
    "  - {name: ratio, if: 'double(n) * ratio > 10.0', action: block}\n"
    "  - {name: flags, if: 'ua in flags && (flags[ua] == true || flags[ua] == null)', action: "
    "block}\n"
    "  - {name: nested, if: 'nested[1].k.exists(x, x == ua) || [n, 2] in nested', action: "
    "block}\n"
    "  - {name: empty, if: 'ua in empty || size(empty) > 0', action: block}\n"
    "  - {name: regex, if: 'ua.matches(pattern)', action: block}\n"
    "default: allow\n"
    "tests:\n"
    "  - {name: name, context: {ua: \"\xc3\xa9mile\", n: 0}, expect: block}\n"
    "  - {name: name-quote, context: {ua: \"a\\\"q\\\\b\", n: 0}, expect: block}\n"
    "  - {name: name-tab, context: {ua: \"tab\\there\", n: 0}, expect: block}\n"
    "  - {name: num-max, context: {ua: x, n: 9223372036854775807}, expect: block}\n"
    "  - {name: num-min, context: {ua: x, n: -9223372036854775808}, expect: block}\n"
    "  - {name: num-size, context: {ua: x, n: 3}, expect: block}\n"
    "  - {name: ratio, context: {ua: x, n: 50}, expect: block}\n"
    "  - {name: flag-true, context: {ua: yes_k, n: 0}, expect: block}\n"
    "  - {name: flag-null, context: {ua: none_k, n: 0}, expect: block}\n"
    "  - {name: flag-false, context: {ua: no_k, n: 0}, expect: allow}\n"
    "  - {name: nested-map, context: {ua: b, n: 0}, expect: block}\n"
    "  - {name: nested-list, context: {ua: x, n: 1}, expect: block}\n"
    "  - {name: regex, context: {ua: \"git push\", n: 0}, expect: block}\n"
    "  - {name: regex-utf8, context: {ua: \"\xc3\xbc"
    "ber \xc3\xbc\", n: 0}, expect: block}\n"
    "  - {name: nothing, context: {ua: zed, n: 7}, expect: allow}\n";

static void test_constants_of_every_kind(const char *dir, const char *store) {
  char cdir[320], cfile[360];
  snprintf(cdir, sizeof cdir, "%s/constkinds", dir);
  snprintf(cfile, sizeof cfile, "%s/constkinds.yaml", cdir);
  CHECK(mkdir(cdir, 0700) == 0);
  FILE *f = fopen(cfile, "w");
  CHECK(f != NULL);
  if (!f) return;
  fputs(CONSTKINDS, f);
  fclose(f);
  sleep(3);
  policy_bundle *tests = load(cdir, "", 0);
  policy_bundle_free(load(cdir, store, 0));
  policy_bundle_free(load(cdir, store, 1)); /* compiles everything, keeps the images */
  policy_bundle *eager = load(cdir, store, 0), *lazy = load(cdir, store, 1),
                *imaged = load(cdir, store, 1);
  uint32_t total = 0;
  CHECK(lazy && imaged && images(imaged, &total) == total && total == 7);
  if (lazy) forget_images(lazy);
  arena na;
  arena_init(&na, NULL, 0, 0);
  name_table *ne = eager ? name_tables_build(&na, eager) : NULL;
  name_table *nl = lazy ? name_tables_build(&na, lazy) : NULL;
  name_table *ni = imaged ? name_tables_build(&na, imaged) : NULL;
  uint32_t compared = 0, blocked = 0;
  for (uint32_t t = 0; tests && ne && nl && ni && t < tests->strategies[0].ntests; t++) {
    const strategy *s = &tests->strategies[0];
    char *req = inline_test_request(s, &s->tests[t]);
    char *a = decide_at(eager, ne, req, NULL), *b = decide_at(lazy, nl, req, NULL),
         *c = decide_at(imaged, ni, req, NULL);
    CHECK(a && b && c);
    if (a && b && c)
      CHECK_MSG(strcmp(a, b) == 0 && strcmp(a, c) == 0,
                "constkinds: test '%s':\n eager  %s\n lazy   %s\n images %s", s->tests[t].name, a,
                b, c);
    compared += a && b && c;
    blocked += a && strstr(a, "\"action\":\"block\"") != NULL;
    free(a);
    free(b);
    free(c);
    free(req);
  }
  CHECK_MSG(compared == 15 && blocked == 13, "%u compared, %u blocked", compared, blocked);
  arena_free(&na);
  policy_bundle_free(tests);
  policy_bundle_free(eager);
  policy_bundle_free(lazy);
  policy_bundle_free(imaged);
}

int main(void) {
  char dir[256];
  test_tmpdir(dir, sizeof dir, "lazy");
  char pol[320], store[320], cmd[2048];
  snprintf(pol, sizeof pol, "%s/pol", dir);
  snprintf(store, sizeof store, "%s/store", dir);
  snprintf(
      cmd, sizeof cmd,
      "mkdir -p '%s' && cp examples/policies/*.yaml '%s'/ && cp -r examples/policies/models '%s'/",
      pol, pol, pol);
  CHECK(system(cmd) == 0);
  sleep(3); /* files changed in the last 2 s are not cached */

  /* the strategies with their tests, parsed from the YAML */
  policy_bundle *tests = load(pol, "", 0);
  policy_bundle_free(load(pol, store, 0)); /* parsed, and remembered */
  policy_bundle *eager = load(pol, store, 0);
  /* the first lazy load compiles every let and rule and keeps the images */
  policy_bundle *filling = load(pol, store, 1);
  CHECK(filling && eager && programs(filling) == programs(eager));
  policy_bundle_free(filling);
  policy_bundle *lazy = load(pol, store, 1), *imaged = load(pol, store, 1);
  if (!tests || !eager || !lazy || !imaged) goto out;
  CHECK(lazy->nstrategies == eager->nstrategies);
  CHECK_STR(lazy->version, eager->version);
  CHECK(programs(eager) > 0);
  /* read from the cache, and nothing compiled yet */
  CHECK(programs(lazy) == 0 && programs(imaged) == 0);
  uint32_t total = 0, nimages = images(imaged, &total);
  CHECK_MSG(nimages == total && total == programs(eager), "%u images of %u programs (%u eager)",
            nimages, total, programs(eager));
  forget_images(lazy); /* this one compiles from the text */
  for (uint32_t i = 0; i < lazy->nstrategies; i++) {
    CHECK_STR(lazy->strategies[i].version, eager->strategies[i].version);
    CHECK(lazy->strategies[i].ntests == 0); /* a one-shot process keeps none */
  }

  arena na;
  arena_init(&na, NULL, 0, 0);
  name_table *ne = name_tables_build(&na, eager), *nl = name_tables_build(&na, lazy),
             *ni = name_tables_build(&na, imaged);
  CHECK(ne && nl && ni);
  uint32_t compared = 0;
  for (uint32_t i = 0; ne && nl && ni && i < tests->nstrategies; i++) {
    const strategy *s = &tests->strategies[i];
    for (uint32_t t = 0; t < s->ntests; t++) {
      const policy_test *pt = &s->tests[t];
      char *req = inline_test_request(s, pt);
      const value *counters = pt->counters.kind == V_MAP ? &pt->counters : NULL;
      char *a = decide_at(eager, ne, req, counters), *b = decide_at(lazy, nl, req, counters),
           *c = decide_at(imaged, ni, req, counters);
      CHECK(a && b && c);
      if (a && b && c)
        CHECK_MSG(strcmp(a, b) == 0 && strcmp(a, c) == 0,
                  "%s: test '%s':\n eager  %s\n lazy   %s\n images %s", s->name, pt->name, a, b, c);
      compared += a && b && c;
      free(a);
      free(b);
      free(c);
      free(req);
    }
  }
  CHECK_MSG(compared >= 250, "%u compared", compared); /* agent_guard alone has more than 100 */
  CHECK(programs(lazy) > 0 && programs(lazy) <= programs(eager));
  CHECK(programs(imaged) == programs(lazy));
  arena_free(&na);
  /* With its compiled/ file this user's own, a load checked its lets'
   * graph before (the file is written only after a load without an error):
   * they are not parsed at load, each only at first use when its image does
   * not read back. A file others may write proves nothing: parsed and
   * walked again. */
  {
    uint32_t unparsed = 0, parsed = 0, with_lets = 0;
    for (uint32_t i = 0; i < imaged->nstrategies; i++) {
      const strategy *s = &imaged->strategies[i];
      with_lets += s->nlets > 0 && !s->fallback_model;
      for (uint32_t l = 0; l < s->nlets && !s->fallback_model; l++)
        unparsed += s->lets[l].lazy.tree == NULL && s->lets[l].lazy.text != NULL;
    }
    CHECK(with_lets > 0 && unparsed > 100);
    /* and a rule with no part the index can use is not parsed either;
     * one with such a part is, for the index */
    uint32_t rules_unparsed = 0, rules_parsed = 0;
    for (uint32_t i = 0; i < imaged->nstrategies; i++) {
      const strategy *s = &imaged->strategies[i];
      for (uint32_t r = 0; r < s->nrules && !s->fallback_model && s->nlets; r++) {
        const policy_rule *pr = &s->rules[r];
        rules_unparsed += pr->lazy.tree == NULL && pr->lazy.text != NULL && !pr->index_part;
        rules_parsed += pr->lazy.tree != NULL && pr->index_part;
        CHECK(pr->index_part == (pr->lazy.tree != NULL));
      }
    }
    CHECK_MSG(rules_unparsed > 50 && rules_parsed > 0, "%u rules not parsed, %u parsed",
              rules_unparsed, rules_parsed);
    snprintf(cmd, sizeof cmd, "chmod g+w '%s'/compiled/*", store);
    CHECK(system(cmd) == 0);
    policy_bundle *shared = load(pol, store, 1);
    CHECK(shared != NULL);
    for (uint32_t i = 0; shared && i < shared->nstrategies; i++)
      for (uint32_t l = 0; l < shared->strategies[i].nlets; l++)
        parsed += shared->strategies[i].lets[l].lazy.tree != NULL;
    CHECK_MSG(parsed >= unparsed, "%u lets parsed from a shared file, %u not from an own one",
              parsed, unparsed);
    policy_bundle_free(shared);
    snprintf(cmd, sizeof cmd, "chmod g-w '%s'/compiled/*", store);
    CHECK(system(cmd) == 0);
  }
  policy_bundle_free(imaged);
  imaged = NULL;

  /* A damaged compiled/ entry is not used: it is removed and written again
   * by the load that finds it, which then compiles as the first one did. */
  {
    char cdir[360], path[720];
    snprintf(cdir, sizeof cdir, "%s/compiled", store);
    DIR *dh = opendir(cdir);
    CHECK(dh != NULL);
    uint32_t damaged = 0;
    struct dirent *de;
    while (dh && (de = readdir(dh)) != NULL) {
      if (de->d_name[0] == '.') continue;
      snprintf(path, sizeof path, "%s/%s", cdir, de->d_name);
      FILE *f = fopen(path, "r+b");
      if (!f) continue;
      fseek(f, 0, SEEK_END);
      long size = ftell(f);
      fseek(f, size / 2, SEEK_SET);
      int ch = fgetc(f);
      fseek(f, size / 2, SEEK_SET);
      fputc(ch ^ 0x20, f);
      fclose(f);
      damaged++;
    }
    if (dh) closedir(dh);
    CHECK(damaged == eager->nstrategies);
    policy_bundle *again = load(pol, store, 1);
    CHECK(again && programs(again) == programs(eager)); /* compiled at load, images rewritten */
    policy_bundle_free(again);
    again = load(pol, store, 1);
    uint32_t n2 = again ? images(again, &total) : 0;
    CHECK(again && programs(again) == 0 && n2 == total);
    policy_bundle_free(again);
  }

  /* Snapshots, through two engines. Strategies with a model or limits are
   * left out: a model's deadline and a limit's window depend on timing. */
  {
    char sne[320], snl[320];
    snprintf(sne, sizeof sne, "%s/snap-eager", dir);
    snprintf(snl, sizeof snl, "%s/snap-lazy", dir);
    vd_engine_opts o;
    memset(&o, 0, sizeof o);
    o.store_dir = store;
    o.snapshots_dir = sne;
    vd_engine *ee = NULL, *el = NULL;
    vd_error err;
    CHECK_MSG(vd_engine_open(pol, &o, &ee, &err) == 0, "%s", err.message);
    o.snapshots_dir = snl;
    o.lazy_compile = 1;
    CHECK_MSG(vd_engine_open(pol, &o, &el, &err) == 0, "%s", err.message);
    uint32_t decided = 0;
    vd_decision *d = vd_decision_new();
    for (uint32_t i = 0; ee && el && i < tests->nstrategies; i++) {
      const strategy *s = &tests->strategies[i];
      if (s->fallback_model || s->nlimits) continue;
      for (uint32_t t = 0; t < s->ntests; t++) {
        char *req = inline_test_request(s, &s->tests[t]);
        int ra = vd_decide_json(ee, req, -1, d, &err);
        int rb = vd_decide_json(el, req, -1, d, &err);
        CHECK(ra == rb);
        decided += ra == 0;
        free(req);
      }
    }
    vd_decision_free(d);
    vd_engine_close(ee);
    vd_engine_close(el);
    CHECK(decided >= 200);
    snapshot_reader *re = NULL, *rl = NULL;
    char msg[256];
    CHECK(snapshot_reader_open(sne, NULL, &re, msg, sizeof msg) == 0);
    CHECK(snapshot_reader_open(snl, NULL, &rl, msg, sizeof msg) == 0);
    uint32_t same = 0;
    for (;;) {
      snapshot_rec a, b;
      int ga = re ? snapshot_reader_next(re, &a) : 0;
      char *ma = ga == 1 ? masked(a.payload, a.payload_len) : NULL;
      int gb = rl ? snapshot_reader_next(rl, &b) : 0;
      char *mb = gb == 1 ? masked(b.payload, b.payload_len) : NULL;
      CHECK(ga == gb);
      if (ga == 1 && gb == 1) {
        CHECK(ma && mb);
        if (ma && mb) CHECK_MSG(strcmp(ma, mb) == 0, "snapshots differ:\n%s\n%s", ma, mb);
        same++;
      }
      free(ma);
      free(mb);
      if (ga != 1 || gb != 1) break;
    }
    CHECK(same == decided);
    snapshot_reader_close(re);
    snapshot_reader_close(rl);
  }

  /* A condition that no longer compiles (a store written by another
   * version, say) fails when a decision reaches it: on_error, with why. */
  {
    policy_rule *r = NULL;
    policy_bundle *b = NULL;
    char bdir[320], bfile[360];
    snprintf(bdir, sizeof bdir, "%s/broken", dir);
    snprintf(bfile, sizeof bfile, "%s/broken.yaml", bdir);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", bdir);
    CHECK(system(cmd) == 0);
    FILE *f = fopen(bfile, "w");
    CHECK(f != NULL);
    if (f) {
      fputs(BROKEN, f);
      fclose(f);
    }
    sleep(3);
    policy_bundle_free(load(bdir, store, 0));
    policy_bundle_free(load(bdir, store, 1)); /* keeps the images */
    b = load(bdir, store, 1);
    if (b && b->nstrategies == 1 && b->strategies[0].nrules == 2) {
      r = (policy_rule *)&b->strategies[0].rules[1];
      CHECK(r->cond == NULL && r->lazy.tree != NULL && r->lazy.image != NULL);
      /* an image that does not read back: the text is compiled instead */
      static const char junk[] = "not a program image";
      r->lazy.image = junk;
      r->lazy.image_len = sizeof junk;
      /* what it now reads: something that does not compile */
      static const char bad[] = "cel.index(1) == ua";
      arena na2;
      arena_init(&na2, NULL, 0, 0);
      ast *tree = NULL;
      expr_error ee;
      expr_opts eo = {.simple_names = 1};
      CHECK(expr_parse(&na2, bad, sizeof bad - 1, &eo, &tree, &ee) == 0 && tree);
      r->lazy.text = bad;
      r->lazy.len = sizeof bad - 1;
      r->lazy.tree = tree;
      name_table *n = name_tables_build(&na2, b);
      char *got = decide_at(b, n, "{\"action\":\"broken\",\"context\":{\"ua\":\"y\"}}", NULL);
      CHECK(got && strstr(got, "\"action\":\"block\"") && strstr(got, "\"source\":\"error\""));
      CHECK_MSG(got && strstr(got,
                              "cannot check (rule 'later' failed: does not compile: 1:5: "
                              "cel.index() needs"),
                "%s", got ? got : "(none)");
      CHECK(r->cond == NULL); /* nothing kept: it fails again if reached again */
      free(got);
      /* the rule before it decides as usual */
      got = decide_at(b, n, "{\"action\":\"broken\",\"context\":{\"ua\":\"x\"}}", NULL);
      CHECK(got && strstr(got, "\"rule\":\"fine\""));
      free(got);
      /* a regex PCRE2 rejects is found on its first match: the rule errors */
      static const char badre[] = "ua.matches(\"[\")";
      CHECK(expr_parse(&na2, badre, sizeof badre - 1, &eo, &tree, &ee) == 0 && tree);
      r->lazy.text = badre;
      r->lazy.len = sizeof badre - 1;
      r->lazy.tree = tree;
      got = decide_at(b, n, "{\"action\":\"broken\",\"context\":{\"ua\":\"y\"}}", NULL);
      CHECK_MSG(got && strstr(got,
                              "cannot check (rule 'later' failed: invalid regular "
                              "expression '['"),
                "%s", got ? got : "(none)");
      free(got);
      arena_free(&na2);
    } else {
      CHECK(0);
    }
    policy_bundle_free(b);
  }

  test_constants_of_every_kind(dir, store);
out:
  policy_bundle_free(tests);
  policy_bundle_free(eager);
  policy_bundle_free(lazy);
  policy_bundle_free(imaged);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CHECK(system(cmd) == 0);
  TEST_END();
}
