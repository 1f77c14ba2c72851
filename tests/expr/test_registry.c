/* test_registry.c — the registry of built-ins (src/expr/lib.c) is every
 * library table's entries, sorted by name with each name's overloads in
 * the order the tables list them (the compiler tries them in that order,
 * and program images name an overload by its place in the registry).
 *
 * The expected order is made here the slow, obvious way (a stable
 * insertion sort with strcmp) and compared entry by entry; every name is
 * also looked up, and must give its whole group. */
#include <string.h>

#include "expr/lib.h"
#include "test.h"

extern const builtin lib_shell_builtins[];

#define MAX_ENTRIES 1024

static void test_order(void) {
  const builtin *tables[] = {lib_core_builtins, lib_strings_builtins, lib_time_builtins,
                             lib_net_builtins, lib_shell_builtins};
  static const builtin *want[MAX_ENTRIES];
  uint32_t n = 0;
  for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++)
    for (const builtin *b = tables[t]; b->name && n < MAX_ENTRIES; b++) {
      uint32_t at = n++;
      while (at > 0 && strcmp(want[at - 1]->name, b->name) > 0) {
        want[at] = want[at - 1];
        at--;
      }
      want[at] = b;
    }
  CHECK(n > 50 && n < MAX_ENTRIES);
  const builtin *got = builtin_table();
  uint32_t count = 0;
  while (got[count].name) count++;
  CHECK_MSG(count == n, "the registry has %u entries, the tables %u", count, n);
  for (uint32_t i = 0; i < n && i < count; i++)
    CHECK_MSG(strcmp(got[i].name, want[i]->name) == 0 && got[i].fn == want[i]->fn &&
                  got[i].receiver == want[i]->receiver && got[i].nargs == want[i]->nargs &&
                  memcmp(got[i].kinds, want[i]->kinds, sizeof got[i].kinds) == 0,
              "entry %u is %s, expected %s", i, got[i].name, want[i]->name);
  for (uint32_t i = 0; i < n; i++) {
    const builtin *first = NULL;
    uint32_t k = builtin_lookup(want[i]->name, (uint32_t)strlen(want[i]->name), &first);
    uint32_t lo = i, hi = i;
    while (lo > 0 && strcmp(want[lo - 1]->name, want[i]->name) == 0) lo--;
    while (hi + 1 < n && strcmp(want[hi + 1]->name, want[i]->name) == 0) hi++;
    CHECK_MSG(first == &got[lo] && k == hi - lo + 1, "lookup of %s", want[i]->name);
  }
  const builtin *none = NULL;
  CHECK(builtin_lookup("noSuchFunction", 14, &none) == 0 && none == NULL);
  CHECK(builtin_lookup("size", 3, &none) == 0); /* a prefix is not a name */
}

int main(void) {
  TEST_RUN(test_order);
  TEST_END();
}
