/* cmd_store.c — `verdict store`: what a version store holds, and cleaning
 * its caches by hand.
 *
 * A store is the stored forms of every strategy version ever loaded (which
 * replay needs, so nothing here removes them), the models, and two caches a
 * one-shot process keeps (parsed/ and compiled/, docs/policy.md
 * "Versions"). The caches are tidied by the loads that write to them
 * (policy_store_tidy); this command shows the sizes, applies the same rule
 * (--clean) or empties the caches (--clean --all) — after an upgrade, say,
 * or to measure a cold start. Not here: removing stored versions (never),
 * or snapshots (`verdict snapshots`). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "policy/policy.h"

const char cmd_store_help[] =
    "usage: verdict store [--clean [--all]] DIR\n"
    "\n"
    "Shows what the version store DIR holds: the stored policy versions (each\n"
    "strategy version ever loaded, kept so that its decisions can be replayed;\n"
    "never removed), the models, and the two caches a process that decides once\n"
    "keeps to start fast: parsed/ (which version each strategy file is) and\n"
    "compiled/ (the compiled rules of a version, one file per verdict build).\n"
    "DIR is a store, or a bundle folder whose store is DIR/.verdict/versions.\n"
    "\n"
    "The caches tidy themselves: a call that writes to them also removes what\n"
    "will likely not be used again (other builds' files unused for a day,\n"
    "anything unused for 30 days, the least recently used beyond 64 compiled\n"
    "files or 16 MiB, or 1024 parsed/ entries). The last line says what such a\n"
    "tidy would remove now.\n"
    "\n"
    "options:\n"
    "      --clean    tidy the caches now, by the same rule\n"
    "      --all      with --clean: empty both caches (the next call parses and\n"
    "                 compiles again, and writes them anew)\n"
    "  -h, --help     this text\n"
    "\n"
    "Exit status: 0 done; 1 the store could not be read (or is not there);\n"
    "2 bad usage.\n"
    "\n"
    "examples:\n"
    "  verdict store examples/policies\n"
    "  verdict store --clean --all ~/.config/verdict/policies/.verdict/versions\n"
    "\n"
    "The store and its caches: docs/policy.md (\"Versions\")\n";

static int usage_error(const char *msg, const char *arg) {
  return cli_usage_error("store", msg, arg);
}

static void human(char *buf, size_t n, uint64_t bytes) {
  if (bytes < 1024)
    snprintf(buf, n, "%llu B", (unsigned long long)bytes);
  else if (bytes < 1024 * 1024)
    snprintf(buf, n, "%.1f KiB", bytes / 1024.0);
  else
    snprintf(buf, n, "%.1f MiB", bytes / (1024.0 * 1024.0));
}

static int hex64_then(const char *name, const char *suffix) {
  for (int i = 0; i < 64; i++)
    if (!((name[i] >= '0' && name[i] <= '9') || (name[i] >= 'a' && name[i] <= 'f'))) return 0;
  return strcmp(name + 64, suffix) == 0;
}

/* Files of dir named <64 hex digits><suffix> (and, with suffix2, that
 * other ending): their count and bytes. -1 when dir cannot be read (absent:
 * 0 files). */
static int count_files(const char *dir, const char *suffix, const char *suffix2, uint64_t *n,
                       uint64_t *bytes) {
  *n = *bytes = 0;
  DIR *dh = opendir(dir);
  if (!dh) return errno == ENOENT ? 0 : -1;
  struct dirent *de;
  char path[4400];
  while ((de = readdir(dh))) {
    if (strlen(de->d_name) < 64 ||
        !(hex64_then(de->d_name, suffix) || (suffix2 && hex64_then(de->d_name, suffix2))))
      continue;
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
    if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode)) continue;
    (*n)++;
    *bytes += (uint64_t)st.st_size;
  }
  closedir(dh);
  return 0;
}

int cmd_store(int argc, char **argv) {
  int clean = 0, all = 0, i = 1;
  for (; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--") == 0) {
      i++;
      break;
    }
    if (a[0] != '-' || a[1] == '\0') break;
    if (strcmp(a, "--clean") == 0)
      clean = 1;
    else if (strcmp(a, "--all") == 0)
      all = 1;
    else
      return usage_error("unknown option", a);
  }
  if (i >= argc) return usage_error("give the store folder (or a bundle folder)", NULL);
  const char *dir = argv[i++];
  if (i < argc) return usage_error("unexpected argument", argv[i]);
  if (all && !clean) return usage_error("--all empties the caches only with --clean", NULL);

  struct stat st;
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
    fprintf(stderr,
            "verdict store: %s: %s; give a version store (BUNDLE/.verdict/versions, or the "
            "--store DIR of the commands that wrote it) or a bundle folder\n",
            dir, stat(dir, &st) != 0 ? strerror(errno) : "not a folder");
    return 1; /* as `verdict check` and the others answer a folder that is not there */
  }
  char store[4200];
  snprintf(store, sizeof store, "%s/.verdict/versions", dir);
  if (stat(store, &st) != 0 || !S_ISDIR(st.st_mode)) snprintf(store, sizeof store, "%s", dir);

  char models[4300];
  snprintf(models, sizeof models, "%s/models", store);
  uint64_t nv, vbytes, nm, mbytes;
  if (count_files(store, ".json", NULL, &nv, &vbytes) != 0 ||
      count_files(models, ".json", ".features.yaml", &nm, &mbytes) != 0) {
    fprintf(stderr, "verdict store: cannot read %s: %s\n", store, strerror(errno));
    return 1;
  }
  policy_store_stats ts;
  policy_store_tidy(store, NULL, 0, NULL, clean ? (all ? POLICY_STORE_ALL : 0) : POLICY_STORE_DRY,
                    &ts);
  char a[32], b[32], c[32];
  printf("store %s\n", store);
  human(a, sizeof a, vbytes);
  printf("  stored versions  %llu (%s; kept for replay, never removed)\n", (unsigned long long)nv,
         a);
  human(a, sizeof a, mbytes);
  printf("  models           %llu file%s (%s)\n", (unsigned long long)nm, nm == 1 ? "" : "s", a);
  uint64_t gone = ts.parsed_removed + ts.compiled_removed,
           gone_bytes = ts.parsed_removed_bytes + ts.compiled_removed_bytes;
  /* what is there: what is left, and with a dry run what it would remove */
  uint64_t p = ts.parsed + (clean ? 0 : ts.parsed_removed),
           pb = ts.parsed_bytes + (clean ? 0 : ts.parsed_removed_bytes),
           k = ts.compiled + (clean ? 0 : ts.compiled_removed),
           kb = ts.compiled_bytes + (clean ? 0 : ts.compiled_removed_bytes);
  human(a, sizeof a, pb);
  printf("  parsed/          %llu entr%s (%s)\n", (unsigned long long)p, p == 1 ? "y" : "ies", a);
  human(a, sizeof a, kb);
  human(b, sizeof b, ts.compiled_other_bytes);
  printf("  compiled/        %llu file%s (%s", (unsigned long long)k, k == 1 ? "" : "s", a);
  if (ts.compiled_other && !clean)
    printf("; %llu of other verdict builds, %s", (unsigned long long)ts.compiled_other, b);
  printf(")\n");
  human(c, sizeof c, gone_bytes);
  if (clean)
    printf("removed %llu cache file%s (%s)\n", (unsigned long long)gone, gone == 1 ? "" : "s", c);
  else
    printf("a tidy now would remove %llu cache file%s (%s): verdict store --clean\n",
           (unsigned long long)gone, gone == 1 ? "" : "s", c);
  return 0;
}
