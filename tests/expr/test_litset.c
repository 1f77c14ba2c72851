/* test_litset.c — literal sets (src/expr/litset.c): every answer checked
 * against the obvious loop over the literals, on random sets and subjects;
 * the regex reader checked against PCRE2 itself (compiled the way
 * lib_core.c compiles patterns) on random patterns of the grammar it
 * accepts, and refusing everything outside it. */
#include <stdlib.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "expr/litset.h"
#include "test.h"

static uint32_t rng = 12345;
static uint32_t rnd(uint32_t n) {
  rng = rng * 1103515245u + 12345u;
  return (rng >> 8) % n;
}

static unsigned char lower(unsigned char c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

static int eq_at(const char *p, const lit *l, int caseless) {
  for (uint32_t i = 0; i < l->n; i++) {
    unsigned char a = (unsigned char)p[i], b = (unsigned char)l->s[i];
    if (caseless ? lower(a) != lower(b) : a != b) return 0;
  }
  return 1;
}

/* The reference: each literal, where its anchors say, the slow way. */
static int naive(const lit *lits, uint32_t n, int caseless, const char *s, size_t len) {
  for (uint32_t i = 0; i < n; i++) {
    const lit *l = &lits[i];
    if (l->n > len) continue;
    switch (l->anchors) {
      case 0:
        for (size_t at = 0; at + l->n <= len; at++)
          if (eq_at(s + at, l, caseless)) return 1;
        break;
      case LIT_START:
        if (eq_at(s, l, caseless)) return 1;
        break;
      case LIT_END:
        if (eq_at(s + len - l->n, l, caseless)) return 1;
        break;
      default:
        if (l->n == len && eq_at(s, l, caseless)) return 1;
    }
  }
  return 0;
}

static void random_text(char *out, size_t n, const char *alphabet) {
  size_t k = strlen(alphabet);
  for (size_t i = 0; i < n; i++) out[i] = alphabet[rnd((uint32_t)k)];
}

static void test_random_sets_agree_with_the_obvious_loop(void) {
  static const char *const alphabets[] = {"ab", "abcAB/.~-", "xyzXYZ012", "a\xc3\xa9\xff\x80"};
  int disagree = 0, runs = 0;
  for (int round = 0; round < 3000; round++) {
    const char *alpha = alphabets[rnd(4)];
    /* caseless sets are only ever used on ASCII subjects */
    int caseless = alpha == alphabets[3] ? 0 : (int)rnd(2);
    uint32_t n = 1 + rnd(round % 7 == 0 ? 60 : 12);
    lit lits[64];
    char store[64][12];
    for (uint32_t i = 0; i < n; i++) {
      uint32_t len = rnd(10) == 0 ? 0 : 1 + rnd(round % 3 == 0 ? 3 : 7);
      random_text(store[i], len, alpha);
      lits[i] = (lit){store[i], len, (uint8_t)(rnd(3) ? 0 : rnd(4))};
    }
    arena a;
    arena_init(&a, NULL, 0, 0);
    const litset *set = litset_build(&a, lits, n, caseless);
    CHECK(set != NULL);
    if (!set) {
      arena_free(&a);
      continue;
    }
    CHECK(litset_caseless(set) == caseless);
    for (int k = 0; k < 40; k++) {
      char subj[48];
      size_t len = rnd(k < 5 ? 4 : 40);
      random_text(subj, len, alpha);
      if (k % 4 == 0 && n) { /* plant a literal somewhere */
        const lit *l = &lits[rnd(n)];
        if (l->n <= len) memcpy(subj + rnd((uint32_t)(len - l->n + 1)), l->s, l->n);
      }
      int want = naive(lits, n, caseless, subj, len), got = litset_match(set, subj, len);
      runs++;
      if (want != got && disagree++ < 5)
        fprintf(stderr, "  set of %u (caseless %d) on '%.*s' (%zu bytes): got %d, want %d\n", n,
                caseless, (int)len, subj, len, got, want);
    }
    arena_free(&a);
  }
  CHECK_MSG(disagree == 0, "%d of %d answers differ", disagree, runs);
}

static void test_empty_literals_and_edges(void) {
  arena a;
  arena_init(&a, NULL, 0, 0);
  lit anywhere[] = {{"", 0, 0}};
  lit whole_empty[] = {{"", 0, LIT_START | LIT_END}, {"abc", 3, LIT_START | LIT_END}};
  lit ends[] = {{"~", 1, LIT_END}, {".php", 4, LIT_END}};
  const litset *s1 = litset_build(&a, anywhere, 1, 0);
  const litset *s2 = litset_build(&a, whole_empty, 2, 0);
  const litset *s3 = litset_build(&a, ends, 2, 1);
  CHECK(s1 && litset_match(s1, "", 0) && litset_match(s1, "x", 1));
  CHECK(s2 && litset_match(s2, "", 0) && litset_match(s2, "abc", 3));
  CHECK(s2 && !litset_match(s2, "abcd", 4) && !litset_match(s2, "xabc", 4));
  CHECK(s3 && litset_match(s3, "/a.PHP", 6) && litset_match(s3, "x~", 2));
  CHECK(s3 && !litset_match(s3, "/a.php\n", 7) && !litset_match(s3, "~x", 2));
  /* an empty set matches nothing */
  const litset *s4 = litset_build(&a, NULL, 0, 0);
  CHECK(s4 && !litset_match(s4, "", 0) && !litset_match(s4, "abc", 3));
  arena_free(&a);
}

/* ---- the regex reader against PCRE2 ---- */

static pcre2_code *pcre(const char *pat) {
  int code;
  PCRE2_SIZE off;
  return pcre2_compile((PCRE2_SPTR)pat, strlen(pat),
                       PCRE2_UTF | PCRE2_DOLLAR_ENDONLY | PCRE2_NEVER_BACKSLASH_C, &code, &off,
                       NULL);
}

static int pcre_match(pcre2_code *re, const char *s, size_t n) {
  pcre2_match_data *md = pcre2_match_data_create(1, NULL);
  int rc = pcre2_match(re, (PCRE2_SPTR)s, n, 0, 0, md, NULL);
  pcre2_match_data_free(md);
  return rc >= 0;
}

/* A random pattern of the accepted grammar. */
static void gen_seq(char *out, size_t *o, int depth, int top);

static void gen_alt(char *out, size_t *o, int depth, int top) {
  int n = 1 + (int)rnd(3);
  for (int i = 0; i < n; i++) {
    if (i) out[(*o)++] = '|';
    gen_seq(out, o, depth, top);
  }
}

static void gen_seq(char *out, size_t *o, int depth, int top) {
  static const char *const atoms[] = {"a", "b", "B", "/", "\\.", "-", "~", "%", "\\?", "x"};
  if (top && rnd(4) == 0) out[(*o)++] = '^';
  int n = (int)rnd(4);
  for (int i = 0; i < n; i++) {
    if (depth < 2 && rnd(5) == 0) {
      const char *open = rnd(2) ? "(" : "(?:";
      memcpy(out + *o, open, strlen(open));
      *o += strlen(open);
      gen_alt(out, o, depth + 1, 0);
      out[(*o)++] = ')';
    } else {
      const char *at = atoms[rnd(10)];
      memcpy(out + *o, at, strlen(at));
      *o += strlen(at);
    }
    if (rnd(5) == 0) out[(*o)++] = '?';
  }
  if (top && rnd(4) == 0) out[(*o)++] = '$';
}

static void test_regex_reader_agrees_with_pcre2(void) {
  int disagree = 0, read = 0;
  for (int round = 0; round < 1500; round++) {
    char pat[512];
    size_t o = 0;
    if (rnd(3) == 0) {
      memcpy(pat, "(?i)", 4);
      o = 4;
    }
    gen_alt(pat, &o, 0, 1);
    pat[o] = '\0';
    arena a;
    arena_init(&a, NULL, 0, 0);
    lit *lits;
    uint32_t n;
    int caseless;
    pcre2_code *re = pcre(pat);
    CHECK_MSG(re != NULL, "PCRE2 rejects the generated pattern %s", pat);
    if (litset_parse_regex(&a, pat, o, &lits, &n, &caseless) == 0) {
      const litset *set = litset_build(&a, lits, n, caseless);
      if (set && re) {
        read++;
        for (int k = 0; k < 60; k++) {
          char subj[24];
          size_t len = rnd(12);
          random_text(subj, len, "abAB/.-~%?x\n");
          int want = pcre_match(re, subj, len), got = litset_match(set, subj, len);
          if (want != got && disagree++ < 5)
            fprintf(stderr, "  /%s/ on '%.*s': got %d, PCRE2 says %d\n", pat, (int)len, subj, got,
                    want);
        }
      }
    } else {
      CHECK_MSG(0, "the reader refused %s", pat);
    }
    pcre2_code_free(re);
    arena_free(&a);
  }
  CHECK(read > 1000);
  CHECK_MSG(disagree == 0, "%d answers differ from PCRE2", disagree);
}

static void test_regex_reader_reads_the_policy_patterns(void) {
  const char *probe =
      "(?i)^/(\\.env|\\.git|\\.aws|\\.ssh|\\.ds_store|wp-admin|wp-login|wp-content|xmlrpc\\.php|"
      "phpmyadmin|cgi-bin/|server-status|actuator|vendor/phpunit|config\\.json|backup)|\\.(php|"
      "aspx?|jsp|cgi|bak|sql|swp)$|~$";
  arena a;
  arena_init(&a, NULL, 0, 0);
  lit *lits;
  uint32_t n;
  int caseless;
  CHECK(litset_parse_regex(&a, probe, strlen(probe), &lits, &n, &caseless) == 0);
  CHECK(caseless == 1 && n == 16 + 8 + 1);
  const litset *set = litset_build(&a, lits, n, caseless);
  pcre2_code *re = pcre(probe);
  const char *subjects[] = {"/.env",        "/WP-Admin/install.php",
                            "/shell.PHP",   "/index.aspx",
                            "/x.asp",       "/backup~",
                            "/products",    "/api/v1/env",
                            "/a.php/x",     "/cgi-bin",
                            "/cgi-bin/x",   "",
                            "/config.json", "/configxjson"};
  for (size_t i = 0; i < sizeof subjects / sizeof subjects[0]; i++)
    CHECK_MSG(set && litset_match(set, subjects[i], strlen(subjects[i])) ==
                         pcre_match(re, subjects[i], strlen(subjects[i])),
              "%s", subjects[i]);
  pcre2_code_free(re);
  arena_free(&a);
}

static void test_regex_reader_refuses_what_is_not_a_literal_set(void) {
  const char *no[] = {"a*",    "a+",    ".",      "[ab]",    "\\d",     "\\w",  "a{2}",
                      "(?=a)", "(?!a)", "a(?i)b", "(?m)a",   "a^",      "$a",   "(^a)",
                      "(a$)",  "a??",   "a?+",    "\\x41",   "\\Qa\\E", "a|(b", "a)",
                      "\\",    "é",     "a\tb",   "(?<n>a)", "\\1",     "a{",   "}"};
  arena a;
  arena_init(&a, NULL, 0, 0);
  for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
    lit *lits;
    uint32_t n;
    int caseless;
    CHECK_MSG(litset_parse_regex(&a, no[i], strlen(no[i]), &lits, &n, &caseless) != 0, "%s", no[i]);
  }
  /* and what it takes: */
  const char *yes[] = {"", "a", "^$", "(?i)A|b", "(?:a|b)?c", "\\.\\-\\/", "a|", "()x"};
  for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
    lit *lits;
    uint32_t n;
    int caseless;
    CHECK_MSG(litset_parse_regex(&a, yes[i], strlen(yes[i]), &lits, &n, &caseless) == 0, "%s",
              yes[i]);
  }
  /* too many strings: (a|b) eleven times is 2048 */
  char big[256] = "";
  for (int i = 0; i < 11; i++) strcat(big, "(a|b)");
  lit *lits;
  uint32_t n;
  int caseless;
  CHECK(litset_parse_regex(&a, big, strlen(big), &lits, &n, &caseless) != 0);
  arena_free(&a);
}

int main(void) {
  TEST_RUN(test_random_sets_agree_with_the_obvious_loop);
  TEST_RUN(test_empty_literals_and_edges);
  TEST_RUN(test_regex_reader_agrees_with_pcre2);
  TEST_RUN(test_regex_reader_reads_the_policy_patterns);
  TEST_RUN(test_regex_reader_refuses_what_is_not_a_literal_set);
  TEST_END();
}
