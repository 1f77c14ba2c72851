/* fuzz.h — what the fuzz targets share: the libFuzzer entry points and the
 * repository root (where the targets find the example bundle). Each
 * fuzz_<name>.c defines LLVMFuzzerTestOneInput; built with clang and
 * -fsanitize=fuzzer it is a libFuzzer binary (`make fuzz`), built with gcc
 * and replay.c it replays the regression corpus in the normal test run. */
#ifndef VD_TESTS_FUZZ_H
#define VD_TESTS_FUZZ_H

#include <stddef.h>
#include <stdint.h>

#ifndef VD_SOURCE_DIR
#define VD_SOURCE_DIR "."
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* An invariant the target checks failed: print it and abort, so that
 * libFuzzer saves the input (and the replay test fails). */
#define FUZZ_CHECK(cond, ...)                                              \
  do {                                                                     \
    if (!(cond)) {                                                         \
      fprintf(stderr, "fuzz check failed at %s:%d: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                                        \
      fputc('\n', stderr);                                                 \
      abort();                                                             \
    }                                                                      \
  } while (0)

#endif
