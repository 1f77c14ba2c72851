/* bench_hook.c — what one agent tool call costs: the agent spawns
 * `verdict hook claude`, writes the hook JSON on its stdin, reads the answer
 * and waits for the exit. That whole run is timed here, N times, next to the
 * baselines in the same run: spawning /bin/true and `verdict --version`
 * (the price of any process, and of this binary's dynamic linking, before
 * verdict does any work). Also the hook asking a `verdict serve` started
 * here (--server), which loads the bundle once. Reports p50/p90/p99 and the
 * ratios to the /bin/true and version spawns (static linking makes the
 * latter cheaper, so both). Not a test: no assertion on time.
 *
 *   bench-hook [--runs N] [--policy DIR] [--verdict PATH] [--compare PATH]
 *
 * --compare adds another build's `--version` and hook runs (stored parsed
 * form, without and with the default snapshot) to the same interleaved run:
 * a before/after on the same load.
 *
 * The policy defaults to a copy of examples/policies/agent_guard.yaml alone
 * in a temporary folder (so other example strategies do not count). The
 * rows with a version store (all but --no-store) read the strategy back in
 * its stored parsed form, as an installed hook does (src/policy/cache.c). */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../bench.h"

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* One run of argv with stdin from in_path, stdout to /dev/null: wall time
 * (us), and from the child's rusage its CPU time (us, user + system) and
 * page faults (minor + major; every page a fresh process touches costs one). */
static double run_once(char *const argv[], const char *in_path, double *cpu, double *faults) {
  double t0 = now_us();
  pid_t pid = fork();
  if (pid == 0) {
    int in = open(in_path ? in_path : "/dev/null", O_RDONLY);
    int out = open("/dev/null", O_WRONLY);
    if (in < 0 || out < 0) _exit(127);
    dup2(in, 0);
    dup2(out, 1);
    dup2(out, 2);
    execv(argv[0], argv);
    _exit(127);
  }
  int st;
  struct rusage ru;
  if (pid < 0 || wait4(pid, &st, 0, &ru) < 0) return -1;
  double wall = now_us() - t0;
  if (!WIFEXITED(st) || WEXITSTATUS(st) == 127) return -1;
  if (cpu)
    *cpu = ru.ru_utime.tv_sec * 1e6 + ru.ru_utime.tv_usec + ru.ru_stime.tv_sec * 1e6 +
           ru.ru_stime.tv_usec;
  if (faults) *faults = (double)(ru.ru_minflt + ru.ru_majflt);
  return wall;
}

typedef struct row {
  const char *name;
  char *argv[16];
  const char *input;
  double *t;
  int base; /* the row of its binary's --version (ratio column) */
} row;

static void copy_file(const char *from, const char *to) {
  FILE *f = fopen(from, "rb"), *g = fopen(to, "wb");
  if (!f || !g) {
    fprintf(stderr, "bench-hook: cannot copy %s to %s\n", from, to);
    exit(1);
  }
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) fwrite(buf, 1, n, g);
  fclose(f);
  fclose(g);
}

int main(int argc, char **argv) {
  int runs = 300;
  const char *policy = NULL, *verdict = VD_BINARY_DIR "/verdict", *compare = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc)
      runs = atoi(argv[++i]);
    else if (strcmp(argv[i], "--policy") == 0 && i + 1 < argc)
      policy = argv[++i];
    else if (strcmp(argv[i], "--verdict") == 0 && i + 1 < argc)
      verdict = argv[++i];
    else if (strcmp(argv[i], "--compare") == 0 && i + 1 < argc)
      compare = argv[++i];
    else {
      fprintf(stderr,
              "usage: bench-hook [--runs N] [--policy DIR] [--verdict PATH] [--compare PATH]\n");
      return 2;
    }
  }
  if (runs < 10) runs = 10;
  char tmp[256];
  if (!bench_tmpdir(tmp, sizeof tmp, "hook")) return 1;
  char pdir[512], snaps[512], input[512], path[600];
  snprintf(pdir, sizeof pdir, "%s/policy", tmp);
  snprintf(snaps, sizeof snaps, "%s/snapshots", tmp);
  snprintf(input, sizeof input, "%s/in.json", tmp);
  if (!policy) {
    mkdir(pdir, 0700);
    snprintf(path, sizeof path, "%s/agent_guard.yaml", pdir);
    copy_file(VD_SOURCE_DIR "/examples/policies/agent_guard.yaml", path);
    policy = pdir;
    /* A file changed in the last 2 s is never read back from the version
     * store's parsed forms (src/policy/cache.c): let the copy age, as an
     * installed policy has. */
    sleep(3);
  }
  FILE *f = fopen(input, "w");
  if (!f) return 1;
  fputs(
      "{\"session_id\":\"bench\",\"transcript_path\":\"/tmp/t.jsonl\",\"cwd\":\"/home/dev/proj\","
      "\"permission_mode\":\"default\",\"hook_event_name\":\"PreToolUse\",\"tool_name\":\"Bash\","
      "\"tool_input\":{\"command\":\"git status && rm -rf ./build\",\"description\":\"x\"},"
      "\"tool_use_id\":\"toolu_01\"}\n",
      f);
  fclose(f);

  /* A server for the --server row: port 0, read back from its start line. */
  char log[600], serve_snaps[600], addr[64] = "";
  snprintf(log, sizeof log, "%s/serve.log", tmp);
  snprintf(serve_snaps, sizeof serve_snaps, "%s/serve-snapshots", tmp);
  pid_t serve = fork();
  if (serve == 0) {
    int lf = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600), nul = open("/dev/null", O_RDWR);
    dup2(nul, 0);
    dup2(nul, 1);
    dup2(lf, 2);
    execl(verdict, verdict, "serve", "--policy", policy, "--listen", "127.0.0.1:0", "--threads",
          "1", "--snapshots", serve_snaps, (char *)NULL);
    _exit(127);
  }
  for (int tries = 0; tries < 200 && !addr[0]; tries++) {
    struct timespec ts = {0, 50 * 1000000};
    nanosleep(&ts, NULL);
    FILE *lf = fopen(log, "r");
    char line[4096];
    while (lf && fgets(line, sizeof line, lf)) {
      char *at = strstr(line, "\"listen\":\"");
      if (at) sscanf(at + 10, "%63[^\"]", addr);
    }
    if (lf) fclose(lf);
  }
  if (!addr[0]) {
    fprintf(stderr, "bench-hook: verdict serve did not start (see %s)\n", log);
    kill(serve, SIGTERM);
    return 1;
  }

  char *V = (char *)verdict, *P = (char *)policy, *C = (char *)compare;
  char snaps_c[600];
  snprintf(snaps_c, sizeof snaps_c, "%s/snapshots-compare", tmp);
  row rows[] = {
      {"/bin/true (process spawn)", {"/bin/true", NULL}, NULL, NULL, 0},
      {"verdict --version (baseline)", {V, "--version", NULL}, NULL, NULL, 1},
      {"hook claude, --no-snapshots --no-store (YAML)",
       {V, "hook", "claude", "--policy", P, "--no-snapshots", "--no-store", NULL},
       input,
       NULL,
       1},
      {"hook claude, --no-snapshots (stored parse)",
       {V, "hook", "claude", "--policy", P, "--no-snapshots", NULL},
       input,
       NULL,
       1},
      {"hook claude, snapshots (durability none)",
       {V, "hook", "claude", "--policy", P, "--snapshots", snaps, "--durability", "none", NULL},
       input,
       NULL,
       1},
      {"hook claude, snapshots (default: synced at exit)",
       {V, "hook", "claude", "--policy", P, "--snapshots", snaps, NULL},
       input,
       NULL,
       1},
      {"hook claude --server (verdict serve records)",
       {V, "hook", "claude", "--server", addr, NULL},
       input,
       NULL,
       1},
      {"compare: verdict --version", {C, "--version", NULL}, NULL, NULL, 7},
      {"compare: hook, --no-snapshots (stored parse)",
       {C, "hook", "claude", "--policy", P, "--no-snapshots", NULL},
       input,
       NULL,
       7},
      {"compare: hook, snapshots (default)",
       {C, "hook", "claude", "--policy", P, "--snapshots", snaps_c, NULL},
       input,
       NULL,
       7},
  };
  size_t nrows = sizeof rows / sizeof rows[0] - (compare ? 0 : 3);
  double *cpu[sizeof rows / sizeof rows[0]], *faults[sizeof rows / sizeof rows[0]];
  for (size_t r = 0; r < nrows; r++) {
    rows[r].t = calloc((size_t)runs, sizeof(double));
    cpu[r] = calloc((size_t)runs, sizeof(double));
    faults[r] = calloc((size_t)runs, sizeof(double));
    if (!rows[r].t || !cpu[r] || !faults[r]) return 1;
    if (run_once(rows[r].argv, rows[r].input, NULL, NULL) < 0) {
      fprintf(stderr, "bench-hook: %s failed to run (is %s built?)\n", rows[r].name,
              rows[r].argv[0]);
      return 1;
    }
  }
  /* Interleaved, so that load changes hit every row alike. */
  for (int i = 0; i < runs; i++)
    for (size_t r = 0; r < nrows; r++)
      rows[r].t[i] = run_once(rows[r].argv, rows[r].input, &cpu[r][i], &faults[r][i]);
  /* Two baselines, because linking changes the second: /bin/true is the
   * price of any process, --version that of this binary's start. */
  double p50s[sizeof rows / sizeof rows[0]];
  double loadavg[3] = {0, 0, 0};
  FILE *la = fopen("/proc/loadavg", "r");
  if (la) {
    if (fscanf(la, "%lf %lf %lf", &loadavg[0], &loadavg[1], &loadavg[2]) != 3) loadavg[0] = -1;
    fclose(la);
  }
  printf(
      "bench-hook: %d runs each, interleaved; policy %s; load average (at the end) %.2f %.2f "
      "%.2f\n\n",
      runs, policy, loadavg[0], loadavg[1], loadavg[2]);
  printf("%-50s %9s %9s %9s %9s %9s %9s %7s\n", "run", "p50 us", "p90 us", "p99 us", "p50/true",
         "p50/vers", "cpu us", "faults");
  for (size_t r = 0; r < nrows; r++) {
    qsort(rows[r].t, (size_t)runs, sizeof(double), cmp_double);
    qsort(cpu[r], (size_t)runs, sizeof(double), cmp_double);
    qsort(faults[r], (size_t)runs, sizeof(double), cmp_double);
    double p50 = rows[r].t[runs / 2], p90 = rows[r].t[runs * 9 / 10],
           p99 = rows[r].t[runs * 99 / 100];
    p50s[r] = p50;
    printf("%-50s %9.0f %9.0f %9.0f", rows[r].name, p50, p90, p99);
    if (r > 0)
      printf(" %8.2fx", p50 / p50s[0]);
    else
      printf(" %9s", "-");
    if ((int)r != rows[r].base && r > 0)
      printf(" %8.2fx", p50 / p50s[rows[r].base]);
    else
      printf(" %9s", "-");
    printf(" %9.0f %7.0f\n", cpu[r][runs / 2], faults[r][runs / 2]);
    free(rows[r].t);
    free(cpu[r]);
    free(faults[r]);
  }
  printf(
      "\nverdict's own work per call = hook p50 - version p50. cpu us and faults: medians of\n"
      "the child's CPU time (user + system) and page faults, from its rusage.\n");
  kill(serve, SIGTERM);
  waitpid(serve, NULL, 0);
  snprintf(path, sizeof path, "rm -rf '%s'", tmp);
  if (system(path) != 0) fprintf(stderr, "bench-hook: could not remove %s\n", tmp);
  return 0;
}
