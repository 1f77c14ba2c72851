/* replay.c — the main() of a fuzz target built without libFuzzer: feeds
 * every file named on the command line (or found in a folder named there)
 * to LLVMFuzzerTestOneInput once, in name order. The regression corpus
 * (tests/fuzz/regressions/<target>/) and the committed seeds are replayed
 * this way by CTest, under ASan+UBSan in `make test`, so a fixed crash stays
 * fixed without clang in the test run. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  return 0;
}

static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "replay: cannot open %s\n", path);
    return -1;
  }
  size_t cap = 4096, n = 0;
  uint8_t *buf = malloc(cap);
  size_t k;
  while (buf && (k = fread(buf + n, 1, cap - n, f)) > 0) {
    n += k;
    if (n == cap) {
      uint8_t *nb = realloc(buf, cap *= 2);
      if (!nb) free(buf);
      buf = nb;
    }
  }
  fclose(f);
  if (!buf) return -1;
  /* An exact-size copy, so that ASan sees a read one past the input. */
  uint8_t *exact = malloc(n ? n : 1);
  if (!exact) {
    free(buf);
    return -1;
  }
  memcpy(exact, buf, n);
  free(buf);
  LLVMFuzzerTestOneInput(exact, n);
  free(exact);
  return 0;
}

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static int run_path(const char *path, unsigned *count) {
  struct stat st;
  if (stat(path, &st) != 0) return 0; /* a folder not there yet: nothing to replay */
  if (!S_ISDIR(st.st_mode)) {
    (*count)++;
    return run_file(path);
  }
  DIR *d = opendir(path);
  if (!d) return -1;
  char **names = NULL;
  size_t n = 0, cap = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    if (n == cap) {
      cap = cap ? cap * 2 : 64;
      names = realloc(names, cap * sizeof *names);
      if (!names) return -1;
    }
    names[n++] = strdup(e->d_name);
  }
  closedir(d);
  if (n) qsort(names, n, sizeof *names, by_name);
  int rc = 0;
  for (size_t i = 0; i < n; i++) {
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", path, names[i]);
    if (run_path(p, count) != 0) rc = -1;
    free(names[i]);
  }
  free(names);
  return rc;
}

int main(int argc, char **argv) {
  LLVMFuzzerInitialize(&argc, &argv);
  unsigned count = 0;
  int rc = 0;
  for (int i = 1; i < argc; i++)
    if (run_path(argv[i], &count) != 0) rc = 1;
  printf("replayed %u inputs\n", count);
  return rc;
}
