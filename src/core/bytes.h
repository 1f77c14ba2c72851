/* bytes.h — comparing short byte strings (field names, variable names, short
 * constants) without a call to memcmp, which costs more than the compare
 * itself at these lengths. Shared by the evaluator and the engine's name
 * lookups, the hot paths of a decision. */
#ifndef VD_CORE_BYTES_H
#define VD_CORE_BYTES_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* a[0..n) == b[0..n), a word at a time where the length allows: the loads
 * may overlap in the middle but never read past either end. */
static inline int bytes_same(const char *a, const char *b, size_t n) {
  if (n >= 8) {
    uint64_t x, y;
    for (size_t i = 0; i + 8 < n; i += 8) {
      memcpy(&x, a + i, 8);
      memcpy(&y, b + i, 8);
      if (x != y) return 0;
    }
    memcpy(&x, a + n - 8, 8);
    memcpy(&y, b + n - 8, 8);
    return x == y;
  }
  if (n >= 4) {
    uint32_t x, y, z, w;
    memcpy(&x, a, 4);
    memcpy(&y, b, 4);
    memcpy(&z, a + n - 4, 4);
    memcpy(&w, b + n - 4, 4);
    return x == y && z == w;
  }
  for (size_t i = 0; i < n; i++)
    if (a[i] != b[i]) return 0;
  return 1;
}

#endif
