/* cmd_rollout.c — `verdict rollout`: the report of a shadow or canary run,
 * read from the snapshots it recorded (docs/rollout.md, "The report").
 *
 * Each off-path record names the answered one it completes ("completes");
 * the answered record comes first in the log. The pair's live side is the
 * record whose "side" is "live" (or has none: an answered record without a
 * canary), the candidate the other. Both are fed to the side-by-side scorer
 * (score.h) for agreement, accuracy and latency; the changes, fixed and
 * broke counts are tallied here, and the declared canary limits are judged
 * on the same pairs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/arena.h"
#include "core/clock.h"
#include "core/json.h"
#include "replay/report.h"
#include "replay/score.h"
#include "server/server.h"
#include "snapshot/snapshot.h"

const char cmd_rollout_help[] =
    "usage: verdict rollout --snapshots DIR [--since T] [--until T] [--labels FILE]\n"
    "                       [--rollout-settings FILE] [--json] [--html FILE]\n"
    "\n"
    "Reports a shadow or canary run of verdict serve from the snapshots it\n"
    "recorded: each answered decision paired with the record that completes\n"
    "it, the decisions compared and agreed (action and allowed the same; a\n"
    "request one side refused is an outcome of its own, error:CODE), each\n"
    "side's error share, the changes by action (live -> candidate) and by rule\n"
    "with example snapshot ids, the accuracy of each side against labels with\n"
    "the changed decisions the label says got right (fixed) or wrong (broke),\n"
    "p50/p90/p99 latency of each side, and a recommendation stating each\n"
    "declared canary limit and whether it held (docs/rollout.md).\n"
    "\n"
    "options:\n"
    "  -s, --snapshots DIR         the snapshot folder (default: $VERDICT_SNAPSHOTS)\n"
    "      --since TIME            pairs answered at or after TIME: RFC 3339 or a\n"
    "                              time ago (90s, 15m, 1h, 7d)\n"
    "      --until TIME            pairs answered before TIME (same forms)\n"
    "      --labels FILE           JSON Lines of {\"id\"|\"key\", \"action\"}: the correct\n"
    "                              action (the replay's labels file)\n"
    "      --rollout-settings FILE the limits to judge, in the file format serve\n"
    "                              reads (default: the canary flags' defaults,\n"
    "                              no limit watched)\n"
    "      --json                  the report as one JSON object\n"
    "      --html FILE             also write the report as a self-contained page\n"
    "  -h, --help                  this text\n"
    "\n"
    "Exit status: 0 done; 1 the folder, labels or settings could not be read;\n"
    "2 bad usage.\n"
    "\n"
    "examples:\n"
    "  verdict rollout --snapshots /var/lib/verdict/snapshots --since 7d\n"
    "  verdict rollout -s snaps --labels reviewed.jsonl --html rollout.html\n"
    "\n"
    "docs: docs/rollout.md\n";

static int usage_error(const char *msg, const char *arg) {
  return cli_usage_error("rollout", msg, arg);
}

/* One recorded decision, what the report needs of it. */
typedef struct rrec {
  char id[SCORE_ID_TEXT];
  char completes[SCORE_ID_TEXT]; /* "" on an answered record */
  int is_live;                   /* made by the live bundle */
  int answered;                  /* this record's answer was the caller's */
  int paired;
  char *point, *key, *action, *rule, *source, *policy_version, *model_version, *reason;
  char *error;  /* a request the candidate refused off the answer's path: its code name */
  char outcome[96]; /* what is compared: the action, "(none)", or "error:CODE" */
  int allowed, review;
  double confidence, latency_us;
} rrec;

typedef struct rows {
  score_row *r;
  size_t n, cap;
} rows;

static void rrec_free(rrec *x) {
  free(x->point);
  free(x->key);
  free(x->action);
  free(x->rule);
  free(x->source);
  free(x->policy_version);
  free(x->model_version);
  free(x->reason);
  free(x->error);
}

static char *str_at(const value *obj, const char *k) {
  const value *v = value_map_get(obj, k, strlen(k));
  if (!v || v->kind != V_STRING) return NULL;
  char *s = malloc(v->n + 1);
  if (s) {
    memcpy(s, v->s, v->n);
    s[v->n] = '\0';
  }
  return s;
}

static double num_at(const value *obj, const char *k) {
  const value *v = obj ? value_map_get(obj, k, strlen(k)) : NULL;
  if (!v) return 0;
  return v->kind == V_DOUBLE ? v->d
         : v->kind == V_INT  ? (double)v->i
         : v->kind == V_UINT ? (double)v->u
                             : 0;
}

static int bool_at(const value *obj, const char *k) {
  const value *v = value_map_get(obj, k, strlen(k));
  return v && v->kind == V_BOOL && v->b;
}

/* The payload into x. 0, or -1 with a message naming the snapshot. */
static int read_rec(const snapshot_rec *r, rrec *x, char *err, size_t errlen) {
  memset(x, 0, sizeof *x);
  snapshot_id_format(r->id, x->id);
  arena a;
  char buf[16384];
  arena_init(&a, buf, sizeof buf, 0);
  json_opts jo = {0};
  jo.lenient = 1;
  value v;
  json_error je = {0};
  if (json_parse(&a, r->payload, r->payload_len, &jo, &v, &je) != 0 || v.kind != V_MAP) {
    snprintf(err, errlen, "snapshot %s: payload is not a JSON object (line %d, column %d)", x->id,
             je.line, je.column);
    arena_free(&a);
    return -1;
  }
  char *side = str_at(&v, "side");
  char *completes = str_at(&v, "completes");
  /* An answered record without a canary has neither key: every record
   * without "completes" is a possible answered one. */
  if (completes) snprintf(x->completes, sizeof x->completes, "%s", completes);
  x->is_live = !side || strcmp(side, "live") == 0;
  x->answered = !completes;
  free(side);
  free(completes);
  x->point = str_at(&v, "point");
  x->key = str_at(&v, "key");
  x->action = str_at(&v, "action");
  x->source = str_at(&v, "source");
  x->policy_version = str_at(&v, "policy_version");
  x->model_version = str_at(&v, "model_version");
  const value *reason = value_map_get(&v, "reason", 6);
  if (reason && reason->kind == V_MAP) {
    x->rule = str_at(reason, "rule");
    x->reason = str_at(reason, "message");
  }
  const value *e = value_map_get(&v, "error", 5);
  if (e && e->kind == V_MAP) x->error = str_at(e, "code");
  if (x->error)
    snprintf(x->outcome, sizeof x->outcome, "error:%s", x->error);
  else
    snprintf(x->outcome, sizeof x->outcome, "%s", x->action && *x->action ? x->action : "(none)");
  x->allowed = bool_at(&v, "allowed");
  x->review = bool_at(&v, "review");
  x->confidence = num_at(&v, "confidence");
  const value *lat = value_map_get(&v, "latency_ns", 10);
  x->latency_us = num_at(lat && lat->kind == V_MAP ? lat : NULL, "total") / 1000.0;
  arena_free(&a);
  return 0;
}

static int by_id(const void *a, const void *b) {
  return strcmp((*(rrec *const *)a)->id, (*(rrec *const *)b)->id);
}

static const char *nz(const char *s, const char *dflt) { return s && *s ? s : dflt; }

/* A side that erred: refused the request, or decided by an error. */
static int is_error(const rrec *x) {
  return x->error || (x->source && !strcmp(x->source, "error"));
}

static double share(uint64_t k, uint64_t n) { return n ? (double)k / (double)n : 0.0; }

static int rows_add(rows *t, const char *from, const char *to, const char *example) {
  for (size_t i = 0; i < t->n; i++)
    if (!strcmp(t->r[i].from, from) && !strcmp(t->r[i].to, to)) {
      score_row *w = &t->r[i];
      w->count++;
      if (w->nexamples < SCORE_EXAMPLES)
        snprintf(w->examples[w->nexamples++], SCORE_ID_TEXT, "%s", example);
      return 0;
    }
  if (t->n == t->cap) {
    size_t cap = t->cap ? 2 * t->cap : 16;
    score_row *nr = realloc(t->r, cap * sizeof *nr);
    if (!nr) return -1;
    t->r = nr;
    t->cap = cap;
  }
  score_row *w = &t->r[t->n];
  memset(w, 0, sizeof *w);
  w->from = strdup(from);
  w->to = strdup(to);
  if (!w->from || !w->to) return -1;
  w->count = 1;
  w->nexamples = 1;
  snprintf(w->examples[0], SCORE_ID_TEXT, "%s", example);
  t->n++;
  return 0;
}

static int row_cmp(const void *a, const void *b) {
  const score_row *x = a, *y = b;
  if (x->count != y->count) return x->count < y->count ? 1 : -1;
  int c = strcmp(x->from, y->from);
  return c ? c : strcmp(x->to, y->to);
}

static void rows_free(rows *t) {
  for (size_t i = 0; i < t->n; i++) {
    free((char *)t->r[i].from);
    free((char *)t->r[i].to);
  }
  free(t->r);
}

static replay_side to_side(const rrec *x) {
  replay_side s;
  memset(&s, 0, sizeof s);
  s.action = x->action;
  s.allowed = x->allowed;
  s.review = x->review;
  s.source = x->source;
  s.rule = x->rule;
  s.confidence = x->confidence;
  s.policy_version = x->policy_version;
  s.latency_us = x->latency_us;
  s.reason = x->reason;
  s.decision_id = x->id;
  s.model_version = x->model_version;
  s.timing = REPLAY_TIMING_INPROCESS;
  return s;
}

/* The limits file: NAME = VALUE lines, as `verdict serve --rollout-settings`
 * reads them; problems at FILE:LINE. */
static int read_settings(const char *path, rollout_opts *o) {
  size_t len;
  char *buf = cli_read_file("rollout", path, &len);
  if (!buf) return -1;
  int line = 0, rc = 0;
  for (char *p = buf, *next; p && *p; p = next) {
    next = strchr(p, '\n');
    if (next) *next++ = '\0';
    line++;
    while (*p == ' ' || *p == '\t') p++;
    char *e = p + strlen(p);
    while (e > p && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r')) *--e = '\0';
    if (!*p || *p == '#') continue;
    char *eq = strchr(p, '=');
    if (!eq) {
      fprintf(stderr, "verdict rollout: %s:%d: expected NAME = VALUE, not: %s\n", path, line, p);
      rc = -1;
      break;
    }
    char *ne = eq;
    while (ne > p && (ne[-1] == ' ' || ne[-1] == '\t')) ne--;
    *ne = '\0';
    char *v = eq + 1;
    while (*v == ' ' || *v == '\t') v++;
    char name[80];
    snprintf(name, sizeof name, "--%s", p);
    const char *why = "";
    int k = strcmp(p, "shadow") && strcmp(p, "canary") && strcmp(p, "rollout-settings") &&
                    strcmp(p, "shadow-queue")
                ? rollout_setting(o, name, v, &why)
                : -1;
    if (k < 0) {
      fprintf(stderr, "verdict rollout: %s:%d: unknown setting '%s'\n", path, line, p);
      rc = -1;
      break;
    }
    if (k > 0) {
      fprintf(stderr, "verdict rollout: %s:%d: %s %s %s\n", path, line, p, why, v);
      rc = -1;
      break;
    }
  }
  free(buf);
  return rc;
}

/* One declared limit and what the pairs show. */
typedef struct limit {
  const char *name; /* the setting */
  int declared;
  double max, seen;
  int judged; /* 0: nothing to judge it on */
  int held;
} limit;

typedef struct rollout_report {
  uint64_t records, answered, completing, compared, agreed, changed, unpaired, orphans;
  uint64_t errors[2]; /* compared pairs whose live / candidate side is an error (a refusal
                       * or an error decision) */
  uint64_t fixed, broke, labelled_changed;
  uint64_t canary_answered;
  rows by_action, by_rule;
  score_comparison cmp;
  limit lim[3];
  int have_labels;
  int all_held, any_declared;
} rollout_report;

static const char *verdict_line(const rollout_report *rr, char *buf, size_t n) {
  if (!rr->compared)
    snprintf(buf, n, "no compared decisions: nothing to recommend");
  else if (!rr->any_declared)
    snprintf(buf, n, "no limit declared: judge the changes above before promoting");
  else if (rr->all_held)
    snprintf(buf, n, "every declared limit held: the candidate can be promoted");
  else
    snprintf(buf, n, "a declared limit was crossed: do not promote");
  return buf;
}

static void limit_text(const limit *l, char *buf, size_t n) {
  if (!l->declared)
    snprintf(buf, n, "%s: not declared", l->name);
  else if (!l->judged)
    snprintf(buf, n, "%s %g: nothing to judge it on", l->name, l->max);
  else
    snprintf(buf, n, "%s %g: %g, %s", l->name, l->max, l->seen, l->held ? "held" : "crossed");
}

static void text_rows(FILE *out, const char *title, const rows *t) {
  if (!t->n) return;
  fprintf(out, "%s:\n", title);
  for (size_t i = 0; i < t->n; i++) {
    fprintf(out, "  %s -> %s  %llu  e.g.", t->r[i].from, t->r[i].to,
            (unsigned long long)t->r[i].count);
    for (int e = 0; e < t->r[i].nexamples; e++) fprintf(out, " %s", t->r[i].examples[e]);
    fputc('\n', out);
  }
}

static void print_text(FILE *out, const rollout_report *rr, const char *dir) {
  const score_side_result *L = &rr->cmp.sides[0], *C = &rr->cmp.sides[1];
  fprintf(out, "verdict rollout: %s\n", dir);
  fprintf(out, "compared %llu  agreed %llu (%.2f%%)  changed %llu",
          (unsigned long long)rr->compared, (unsigned long long)rr->agreed,
          rr->compared ? 100.0 * (double)rr->agreed / (double)rr->compared : 0.0,
          (unsigned long long)rr->changed);
  if (rr->unpaired) fprintf(out, "  unpaired %llu", (unsigned long long)rr->unpaired);
  fputc('\n', out);
  fprintf(out, "errors: live %llu (%.2f%%), candidate %llu (%.2f%%)\n",
          (unsigned long long)rr->errors[0], 100 * share(rr->errors[0], rr->compared),
          (unsigned long long)rr->errors[1], 100 * share(rr->errors[1], rr->compared));
  text_rows(out, "changes by action (live -> candidate)", &rr->by_action);
  text_rows(out, "changes by rule (live -> candidate)", &rr->by_rule);
  if (rr->have_labels)
    fprintf(out,
            "accuracy: live %.2f%%, candidate %.2f%% (%llu labelled); fixed %llu, broke %llu\n",
            100 * L->accuracy, 100 * C->accuracy, (unsigned long long)L->labelled,
            (unsigned long long)rr->fixed, (unsigned long long)rr->broke);
  fprintf(out, "latency_us   %10s %10s %10s\n", "p50", "p90", "p99");
  fprintf(out, "  live       %10.2f %10.2f %10.2f\n", L->latency_us.p50, L->latency_us.p90,
          L->latency_us.p99);
  fprintf(out, "  candidate  %10.2f %10.2f %10.2f\n", C->latency_us.p50, C->latency_us.p90,
          C->latency_us.p99);
  char buf[200];
  fputs("limits:", out);
  for (int i = 0; i < 3; i++) {
    limit_text(&rr->lim[i], buf, sizeof buf);
    fprintf(out, "%s %s", i ? ";" : "", buf);
  }
  fprintf(out, "\nrecommendation: %s\n", verdict_line(rr, buf, sizeof buf));
}

static void j_rows(json_buf *b, const rows *t) {
  json_buf_putc(b, '[');
  for (size_t i = 0; i < t->n; i++) {
    if (i) json_buf_putc(b, ',');
    JSON_PUT(b, "{\"live\":");
    json_put_str(b, t->r[i].from);
    JSON_PUT(b, ",\"candidate\":");
    json_put_str(b, t->r[i].to);
    JSON_PUT(b, ",\"count\":");
    json_put_u64(b, t->r[i].count);
    JSON_PUT(b, ",\"examples\":[");
    for (int e = 0; e < t->r[i].nexamples; e++) {
      if (e) json_buf_putc(b, ',');
      json_put_str(b, t->r[i].examples[e]);
    }
    JSON_PUT(b, "]}");
  }
  json_buf_putc(b, ']');
}

static void j_side(json_buf *b, const score_side_result *s, int labels) {
  JSON_PUT(b, "{\"decisions\":");
  json_put_u64(b, s->decisions);
  if (labels) {
    JSON_PUT(b, ",\"labelled\":");
    json_put_u64(b, s->labelled);
    JSON_PUT(b, ",\"correct\":");
    json_put_u64(b, s->correct);
    JSON_PUT(b, ",\"accuracy\":");
    json_write_double(b, s->accuracy);
  }
  JSON_PUT(b, ",\"latency_us\":{\"p50\":");
  json_write_double(b, s->latency_us.p50);
  JSON_PUT(b, ",\"p90\":");
  json_write_double(b, s->latency_us.p90);
  JSON_PUT(b, ",\"p99\":");
  json_write_double(b, s->latency_us.p99);
  JSON_PUT(b, ",\"mean\":");
  json_write_double(b, s->latency_us.mean);
  JSON_PUT(b, "}}");
}

static int print_json(FILE *out, const rollout_report *rr) {
  json_buf b;
  json_buf_init(&b, NULL);
  JSON_PUT(&b, "{\"compared\":");
  json_put_u64(&b, rr->compared);
  JSON_PUT(&b, ",\"agreed\":");
  json_put_u64(&b, rr->agreed);
  JSON_PUT(&b, ",\"agreed_share\":");
  json_write_double(&b, rr->compared ? (double)rr->agreed / (double)rr->compared : 0.0);
  JSON_PUT(&b, ",\"changed\":");
  json_put_u64(&b, rr->changed);
  JSON_PUT(&b, ",\"errors\":{");
  for (int i = 0; i < 2; i++) {
    if (i)
      JSON_PUT(&b, ",\"candidate\":{\"count\":");
    else
      JSON_PUT(&b, "\"live\":{\"count\":");
    json_put_u64(&b, rr->errors[i]);
    JSON_PUT(&b, ",\"share\":");
    json_write_double(&b, share(rr->errors[i], rr->compared));
    json_buf_putc(&b, '}');
  }
  json_buf_putc(&b, '}');
  JSON_PUT(&b, ",\"unpaired\":");
  json_put_u64(&b, rr->unpaired);
  JSON_PUT(&b, ",\"canary_answered\":");
  json_put_u64(&b, rr->canary_answered);
  JSON_PUT(&b, ",\"by_action\":");
  j_rows(&b, &rr->by_action);
  JSON_PUT(&b, ",\"by_rule\":");
  j_rows(&b, &rr->by_rule);
  if (rr->have_labels) {
    JSON_PUT(&b, ",\"fixed\":");
    json_put_u64(&b, rr->fixed);
    JSON_PUT(&b, ",\"broke\":");
    json_put_u64(&b, rr->broke);
  }
  JSON_PUT(&b, ",\"live\":");
  j_side(&b, &rr->cmp.sides[0], rr->have_labels);
  JSON_PUT(&b, ",\"candidate\":");
  j_side(&b, &rr->cmp.sides[1], rr->have_labels);
  JSON_PUT(&b, ",\"limits\":[");
  for (int i = 0; i < 3; i++) {
    const limit *l = &rr->lim[i];
    if (i) json_buf_putc(&b, ',');
    JSON_PUT(&b, "{\"name\":");
    json_put_str(&b, l->name);
    JSON_PUT(&b, ",\"declared\":");
    json_put_bool(&b, l->declared);
    if (l->declared) {
      JSON_PUT(&b, ",\"max\":");
      json_write_double(&b, l->max);
      if (l->judged) {
        JSON_PUT(&b, ",\"seen\":");
        json_write_double(&b, l->seen);
        JSON_PUT(&b, ",\"held\":");
        json_put_bool(&b, l->held);
      }
    }
    json_buf_putc(&b, '}');
  }
  char buf[200];
  JSON_PUT(&b, "],\"recommendation\":");
  json_put_str(&b, verdict_line(rr, buf, sizeof buf));
  JSON_PUT(&b, "}\n");
  int rc = json_put_end(&b);
  if (rc == 0 && !b.oom)
    fwrite(b.data, 1, b.len, out);
  else
    rc = -1;
  json_buf_free(&b);
  return rc;
}

static int print_html(FILE *out, const rollout_report *rr, const char *dir) {
  const score_side_result *L = &rr->cmp.sides[0], *C = &rr->cmp.sides[1];
  char t[64], buf[200];
  report_html_open(out, "verdict rollout", "verdict rollout &#8212; live and candidate");
  fputs("<p class=\"sub\">snapshots <code>", out);
  report_html_esc(out, dir);
  fputs("</code></p>\n<div class=\"cards\">\n", out);
  snprintf(t, sizeof t, "%llu", (unsigned long long)rr->compared);
  report_html_card(out, t, "decisions compared", "");
  snprintf(t, sizeof t, "%.2f%%",
           rr->compared ? 100.0 * (double)rr->agreed / (double)rr->compared : 0.0);
  report_html_card(out, t, "agreed", "");
  snprintf(t, sizeof t, "%llu", (unsigned long long)rr->changed);
  report_html_card(out, t, "changed", "");
  snprintf(t, sizeof t, "%.2f%% / %.2f%%", 100 * share(rr->errors[0], rr->compared),
           100 * share(rr->errors[1], rr->compared));
  report_html_card(out, t, "errors live / candidate", rr->errors[1] > rr->errors[0] ? "bad" : "");
  if (rr->have_labels) {
    snprintf(t, sizeof t, "%llu", (unsigned long long)rr->fixed);
    report_html_card(out, t, "fixed", rr->fixed ? "good" : "");
    snprintf(t, sizeof t, "%llu", (unsigned long long)rr->broke);
    report_html_card(out, t, "broke", rr->broke ? "bad" : "");
    snprintf(t, sizeof t, "%.2f%% / %.2f%%", 100 * L->accuracy, 100 * C->accuracy);
    report_html_card(out, t, "accuracy live / candidate",
                     C->accuracy > L->accuracy   ? "good"
                     : C->accuracy < L->accuracy ? "bad"
                                                 : "");
  }
  fputs("</div>\n<h2>Changes by action</h2>\n", out);
  report_html_rows(out, rr->by_action.r, rr->by_action.n, rr->compared, "live", "candidate");
  fputs("<h2>Changes by rule</h2>\n", out);
  report_html_rows(out, rr->by_rule.r, rr->by_rule.n, rr->compared, "live rule", "candidate rule");
  fputs("<h2>Latency (&#181;s, in-process)</h2>\n", out);
  report_html_dist_table(out, "live", &L->latency_us, "candidate", &C->latency_us);
  fputs("<h2>Limits</h2>\n<table><tr><th>limit</th><th>result</th></tr>\n", out);
  for (int i = 0; i < 3; i++) {
    limit_text(&rr->lim[i], buf, sizeof buf);
    const limit *l = &rr->lim[i];
    fprintf(out, "<tr><td>%s</td><td class=\"%s\">", l->name,
            l->declared && l->judged ? (l->held ? "good" : "bad") : "muted");
    report_html_esc(out, buf);
    fputs("</td></tr>\n", out);
  }
  fputs("</table>\n<h2>Recommendation</h2>\n<p>", out);
  report_html_esc(out, verdict_line(rr, buf, sizeof buf));
  fputs("</p>\n", out);
  return report_html_close(out, "verdict rollout &#183; docs/rollout.md explains every figure");
}

int cmd_rollout(int argc, char **argv) {
  const char *dir = getenv("VERDICT_SNAPSHOTS"), *labels_path = NULL, *settings = NULL,
             *html = NULL;
  int json = 0;
  snapshot_filter f;
  snapshot_filter_init(&f);
  int64_t now = clock_wall_ns();
  for (int i = 1; i < argc; i++) {
    const char *o = argv[i];
    int has = i + 1 < argc;
    if (!strcmp(o, "--json")) {
      json = 1;
    } else if (!strcmp(o, "-s") || !strcmp(o, "--snapshots") || !strcmp(o, "--labels") ||
               !strcmp(o, "--rollout-settings") || !strcmp(o, "--html") || !strcmp(o, "--since") ||
               !strcmp(o, "--until")) {
      if (!has) return usage_error("missing value after", o);
      const char *v = argv[++i];
      if (!strcmp(o, "--labels"))
        labels_path = v;
      else if (!strcmp(o, "--rollout-settings"))
        settings = v;
      else if (!strcmp(o, "--html"))
        html = v;
      else if (!strcmp(o, "--since")) {
        int64_t t;
        if (cli_parse_when(v, now, &t) != 0) return usage_error("bad --since time:", v);
        f.since_ns = t ? t : 1;
      } else if (!strcmp(o, "--until")) {
        int64_t t;
        if (cli_parse_when(v, now, &t) != 0) return usage_error("bad --until time:", v);
        f.until_ns = t ? t : 1;
      } else
        dir = v;
    } else {
      return usage_error("unknown option", o);
    }
  }
  if (!dir || !*dir) return usage_error("no snapshot folder: give --snapshots DIR", NULL);
  if (f.since_ns && f.until_ns && f.until_ns <= f.since_ns)
    return usage_error("--until must be later than --since", NULL);

  rollout_opts ro;
  rollout_opts_init(&ro);
  if (settings && read_settings(settings, &ro) != 0) return 1;
  score_labels *labels = NULL;
  char err[512];
  if (labels_path && score_labels_load(labels_path, &labels, err, sizeof err) != 0) {
    fprintf(stderr, "verdict rollout: %s\n", err);
    return 1;
  }

  snapshot_reader *r;
  if (snapshot_reader_open(dir, NULL, &r, err, sizeof err) < 0) {
    fprintf(stderr, "verdict rollout: %s\n", err);
    score_labels_free(labels);
    return 1;
  }
  rollout_report rr;
  memset(&rr, 0, sizeof rr);
  rr.have_labels = labels != NULL;
  rrec *recs = NULL;
  size_t n = 0, cap = 0;
  int rc = 0, k;
  snapshot_rec rec;
  /* Read unfiltered: a completing record is written after its answered one
   * and may fall past --until; the window is applied to the answered one. */
  while ((k = snapshot_reader_next(r, &rec)) == 1) {
    if (n == cap) {
      size_t nc = cap ? 2 * cap : 1024;
      rrec *nr = realloc(recs, nc * sizeof *nr);
      if (!nr) {
        fprintf(stderr, "verdict rollout: out of memory\n");
        rc = 1;
        break;
      }
      recs = nr;
      cap = nc;
    }
    int got = read_rec(&rec, &recs[n], err, sizeof err);
    if (got < 0) {
      fprintf(stderr, "verdict rollout: %s: %s\n", dir, err);
      rc = 1;
      break;
    }
    if (recs[n].answered &&
        ((f.since_ns && rec.time_ns < f.since_ns) || (f.until_ns && rec.time_ns >= f.until_ns))) {
      rrec_free(&recs[n]); /* outside the window: its completing record finds no pair */
      continue;
    }
    n++;
  }
  if (k < 0) {
    fprintf(stderr, "verdict rollout: %s: %s\n", dir, snapshot_reader_error(r));
    rc = 1;
  }
  snapshot_reader_close(r);

  rrec **answered = NULL;
  size_t na = 0;
  const char *names[2] = {"live", "candidate"};
  score_sides *ss = NULL;
  if (!rc) {
    answered = malloc((n ? n : 1) * sizeof *answered);
    ss = score_sides_new(2, names, NULL, 0);
    if (!answered || !ss) {
      fprintf(stderr, "verdict rollout: out of memory\n");
      rc = 1;
    }
  }
  if (!rc) {
    for (size_t i = 0; i < n; i++)
      if (recs[i].answered) answered[na++] = &recs[i];
    if (na > 1) qsort(answered, na, sizeof *answered, by_id);
    for (size_t i = 0; i < n && !rc; i++) {
      rrec *c = &recs[i];
      if (!c->completes[0]) continue;
      rrec key, *kp = &key;
      snprintf(key.id, sizeof key.id, "%s", c->completes);
      rrec **hit = bsearch(&kp, answered, na, sizeof *answered, by_id);
      if (!hit) {
        rr.orphans++; /* its answered record is outside the window or gone */
        continue;
      }
      rrec *a = *hit;
      if (a->paired) continue; /* a decision is compared once */
      a->paired = 1;
      rrec *live = a->is_live ? a : c, *cand = a->is_live ? c : a;
      if (!a->is_live) rr.canary_answered++;
      replay_side sl = to_side(live), sc = to_side(cand);
      const replay_side *ans[2] = {&sl, &sc};
      /* a refusal is an outcome of its own: error:CODE, never an action */
      int same = !strcmp(live->outcome, cand->outcome) && live->allowed == cand->allowed;
      rr.errors[0] += is_error(live);
      rr.errors[1] += is_error(cand);
      int sm[2] = {1, same};
      const char *label = labels ? score_labels_find(labels, a->id, a->key) : NULL;
      if (labels && !label) label = score_labels_find(labels, c->id, NULL);
      if (score_sides_add(ss, nz(a->point, "?"), ans, sm, label) != 0) {
        rc = 1;
        break;
      }
      rr.compared++;
      if (same) {
        rr.agreed++;
        continue;
      }
      rr.changed++;
      const char *la = live->outcome, *ca = cand->outcome;
      if (rows_add(&rr.by_action, la, ca, a->id) != 0 ||
          rows_add(&rr.by_rule, nz(live->rule, nz(live->source, "?")),
                   nz(cand->rule, nz(cand->source, "?")), a->id) != 0) {
        rc = 1;
        break;
      }
      if (label) {
        rr.labelled_changed++;
        int lr = !strcmp(la, label), cr = !strcmp(ca, label);
        if (cr && !lr) rr.fixed++;
        if (lr && !cr) rr.broke++;
      }
    }
    if (rc) fprintf(stderr, "verdict rollout: out of memory\n");
    for (size_t i = 0; i < na; i++)
      if (!answered[i]->paired) rr.unpaired++;
  }
  if (!rc) {
    score_sides_finish(ss, &rr.cmp);
    if (rr.by_action.n > 1) qsort(rr.by_action.r, rr.by_action.n, sizeof *rr.by_action.r, row_cmp);
    if (rr.by_rule.n > 1) qsort(rr.by_rule.r, rr.by_rule.n, sizeof *rr.by_rule.r, row_cmp);
    /* The limits as the canary watches them, judged over the whole period:
     * disagreement and errors (the candidate's error decisions and its
     * refusals off the answer's path; a request the answering side refused
     * has no answered record to pair) as shares of the compared, p99 of
     * the candidate's decision times. */
    uint64_t cand_errors = rr.errors[1];
    limit *l = rr.lim;
    l[0] = (limit){
        "canary-max-disagreement", ro.max_disagreement >= 0,
        ro.max_disagreement,       rr.compared ? (double)rr.changed / (double)rr.compared : 0,
        rr.compared > 0,           0};
    l[1] = (limit){"canary-max-errors", ro.max_errors >= 0,
                   ro.max_errors,       rr.compared ? (double)cand_errors / (double)rr.compared : 0,
                   rr.compared > 0,     0};
    l[2] = (limit){"canary-max-latency-us",
                   ro.max_p99_us >= 0,
                   ro.max_p99_us,
                   rr.cmp.sides[1].latency_us.p99,
                   rr.cmp.sides[1].latency_us.count > 0,
                   0};
    rr.all_held = 1;
    for (int i = 0; i < 3; i++) {
      l[i].held = l[i].seen <= l[i].max;
      if (l[i].declared) rr.any_declared = 1;
      if (l[i].declared && l[i].judged && !l[i].held) rr.all_held = 0;
    }
    if (json)
      rc = print_json(stdout, &rr) ? 1 : 0;
    else
      print_text(stdout, &rr, dir);
    if (html) {
      FILE *h = cli_open_file("rollout", html, "w");
      if (!h)
        rc = 1;
      else {
        if (print_html(h, &rr, dir) != 0) rc = 1;
        if (fclose(h) != 0) rc = 1;
        if (rc) fprintf(stderr, "verdict rollout: %s: write error\n", html);
      }
    }
  }
  rows_free(&rr.by_action);
  rows_free(&rr.by_rule);
  score_sides_free(ss);
  free(answered);
  for (size_t i = 0; i < n; i++) rrec_free(&recs[i]);
  free(recs);
  score_labels_free(labels);
  return rc;
}
