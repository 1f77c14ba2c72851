/* cli.h — the commands of `verdict`, one file a command. Each command gets
 * argv starting at its own name, prints its result to stdout and problems to
 * stderr, and returns the process exit code: 0 success, 1 the work failed
 * (bad expression, evaluation error), 2 usage error. */
#ifndef VD_CLI_H
#define VD_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "verdict.h"

int cmd_eval(int argc, char **argv);
extern const char cmd_eval_help[];
int cmd_decide(int argc, char **argv);
extern const char cmd_decide_help[];
int cmd_check(int argc, char **argv);
extern const char cmd_check_help[];
int cmd_test(int argc, char **argv);
extern const char cmd_test_help[];
int cmd_snapshots(int argc, char **argv);
extern const char cmd_snapshots_help[];
int cmd_gen(int argc, char **argv);
extern const char cmd_gen_help[];
int cmd_replay(int argc, char **argv);
extern const char cmd_replay_help[];
int cmd_serve(int argc, char **argv);
extern const char cmd_serve_help[];
int cmd_model(int argc, char **argv);
extern const char cmd_model_help[];
/* model_learn.c: `verdict model dataset|train|compare` (argv from the
 * subcommand's name on); cmd_model.c: `verdict model check` as a call
 * (exit status; golden may be NULL). */
int cli_model_learn(const char *sub, int argc, char **argv);
int cli_model_check(const char *model, const char *spec, const char *golden);
int cmd_mcp(int argc, char **argv);
extern const char cmd_mcp_help[];
int cmd_hook(int argc, char **argv);
extern const char cmd_hook_help[];
int cmd_store(int argc, char **argv);
extern const char cmd_store_help[];
int cmd_reviews(int argc, char **argv);
extern const char cmd_reviews_help[];
int cmd_ship(int argc, char **argv);
extern const char cmd_ship_help[];
int cmd_rollout(int argc, char **argv);
extern const char cmd_rollout_help[];
int cmd_bundle(int argc, char **argv);
extern const char cmd_bundle_help[];

/* Prints "verdict CMD: msg arg" and a pointer to CMD's --help on stderr;
 * returns 2, the exit status of a usage error. arg may be NULL. */
int cli_usage_error(const char *cmd, const char *msg, const char *arg);

/* A time filter (--since/--until): RFC 3339, or a span before `now` (unix ns)
 * such as "15m", "1h30m" or "7d". Sets *out (unix ns); 0, or -1 when malformed
 * or outside what 64-bit nanoseconds hold (the years 1678 to 2261). */
int cli_parse_when(const char *s, int64_t now, int64_t *out);

/* The snapshot folder a command records into when not told: $VERDICT_SNAPSHOTS,
 * else POLICY/.verdict/snapshots (beside the version store). Leaves
 * *snapshots alone when it is set or no_snapshots; *owned is what to free.
 * Returns 0, or -1 when out of memory. */
int cli_default_snapshots(const char *policy, int no_snapshots, const char **snapshots,
                          char **owned);

/* The engine options for deciding an agent's tool calls (`verdict hook`,
 * `verdict mcp`): the store and snapshot folders as given, and the request
 * and memory limits a tool call needs. opts is cleared first. */
void cli_agent_opts(vd_engine_opts *opts, const char *store, int no_store, const char *snapshots,
                    int no_snapshots, int durability);

/* Opens a file as fopen does ("-" is stdin when reading),
 * or prints "verdict CMD: PATH: reason" on stderr and returns NULL: every
 * command names itself, the file and why it could not be opened. */
FILE *cli_open_file(const char *cmd, const char *path, const char *mode);

/* Reads a whole file (or "-" for stdin) into a malloc'd NUL-terminated
 * buffer. Returns NULL and prints "verdict CMD: PATH: reason" on failure. */
char *cli_read_file(const char *cmd, const char *path, size_t *len);

/* retention_gc.c: a retention file (docs/snapshots.md) loaded, its
 * problems printed at file:line:col (0, or -1); its rule set into gc
 * options; and gc run every `every` on a thread of its own until
 * unscheduled (verdict serve --retention), each run logged as a JSON line
 * on stderr. */
struct retention;
struct snapshot_gc_opts;
typedef struct gc_sched gc_sched;
int cli_retention_load(const char *cmd, const char *file, struct retention **out);
void cli_retention_gc_opts(struct retention *r, struct snapshot_gc_opts *o);
/* snapshots_stats.c: `verdict snapshots stats` (exit status). */
int cli_snapshots_stats(const char *dir, const char *retention_file, int as_json);
gc_sched *cli_gc_schedule(const char *dir, struct retention *r);
void cli_gc_unschedule(gc_sched *s);

/* state_opts.c: --state, --state-on-error, --state-timeout, --state-max-bytes.
 * When argv[*i] is one of them, takes its value (advancing *i) into o and
 * returns 0, or a usage error's status (2); -1 when it is none of them. */
struct vd_engine_opts;
int cli_state_option(const char *cmd, int argc, char **argv, int *i, struct vd_engine_opts *o);
/* The same for one option given by its long NAME ("--state") and its value V:
 * 0 set, -1 NAME is not a counter-store option, 1 V is refused and *err says
 * why, to follow NAME and precede V ("takes local, allow or deny, not"). */
int cli_state_set(const char *name, const char *v, struct vd_engine_opts *o, const char **err);
#define CLI_STATE_HELP                                                                \
  "      --state URL        where rate-limit counters live: local (the default, in\n" \
  "                         this process) or redis://HOST:PORT[/DB] (shared)\n"       \
  "      --state-on-error local|allow|deny  when Redis fails or is late: count\n"     \
  "                         locally meanwhile (default), refuse nothing, or refuse\n" \
  "      --state-timeout MS Redis deadline per command (default 50)\n"                \
  "      --state-max-bytes BYTES  memory bound of the local counters (64 MiB)\n"      \
  "      --state-file FILE  keep the local counters in FILE across restarts\n"

#endif
