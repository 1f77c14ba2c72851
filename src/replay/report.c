/* report.c — presenting a scored replay: terminal text, JSON and one
 * self-contained HTML page (report.h).
 *
 * The HTML page carries its CSS inline and draws its charts as inline SVG:
 * no script, font, image or stylesheet is fetched, so the file renders the
 * same offline, in a mail attachment or in a code-review tool, and cannot
 * leak that it was opened. Every string that came from a snapshot (rule
 * names, actions, error messages) is escaped before it is written. */
#include "replay/report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/timefmt.h"

/* ---- failures ---- */

void report_failures_init(report_failures *f, size_t limit) {
  memset(f, 0, sizeof *f);
  f->limit = limit ? limit : 10000;
}

static char *dup_or_null(const char *s) {
  if (!s) return NULL;
  size_t n = strlen(s);
  char *d = malloc(n + 1);
  if (d) memcpy(d, s, n + 1);
  return d;
}

static void failure_free(report_failure *x) {
  free(x->point);
  free(x->key);
  free(x->rec_action);
  free(x->rec_rule);
  free(x->rec_source);
  free(x->rep_action);
  free(x->rep_rule);
  free(x->rep_source);
  free(x->error);
}

int report_failures_add(report_failures *f, const replay_item *it) {
  if (f->n >= f->limit) {
    f->omitted++;
    return 0;
  }
  if (f->n == f->cap) {
    size_t ncap = f->cap ? f->cap * 2 : 64;
    report_failure *ni = realloc(f->items, ncap * sizeof *ni);
    if (!ni) return -1;
    f->items = ni;
    f->cap = ncap;
  }
  report_failure *x = &f->items[f->n];
  memset(x, 0, sizeof *x);
  snprintf(x->id, sizeof x->id, "%s", it->id_text ? it->id_text : "");
  x->point = dup_or_null(it->point ? it->point : "");
  x->key = dup_or_null(it->key ? it->key : "");
  x->rec_action = dup_or_null(it->recorded.action);
  x->rec_rule = dup_or_null(it->recorded.rule);
  x->rec_source = dup_or_null(it->recorded.source);
  x->rec_confidence = it->recorded.confidence;
  x->rec_allowed = it->recorded.allowed;
  if (it->error) {
    x->error = dup_or_null(it->error_message ? it->error_message : "error");
    if (!x->error) goto oom;
  } else {
    x->rep_action = dup_or_null(it->replayed.action);
    x->rep_rule = dup_or_null(it->replayed.rule);
    x->rep_source = dup_or_null(it->replayed.source);
    x->rep_confidence = it->replayed.confidence;
    x->rep_allowed = it->replayed.allowed;
  }
  if (!x->point || !x->key) goto oom;
  f->n++;
  return 0;
oom:
  failure_free(x);
  return -1;
}

void report_failures_free(report_failures *f) {
  for (size_t i = 0; i < f->n; i++) failure_free(&f->items[i]);
  free(f->items);
  memset(f, 0, sizeof *f);
}

/* "allow (rule cn-api-v1, 1.00)" */
static void side_text(char *buf, size_t n, const char *action, const char *rule, const char *source,
                      double conf) {
  if (rule && *rule)
    snprintf(buf, n, "%s (rule %s, %.2f)", action ? action : "(none)", rule, conf);
  else
    snprintf(buf, n, "%s (%s, %.2f)", action ? action : "(none)", source ? source : "?", conf);
}

void report_failure_line(FILE *out, const replay_item *it) {
  char a[512], b[512];
  side_text(a, sizeof a, it->recorded.action, it->recorded.rule, it->recorded.source,
            it->recorded.confidence);
  if (it->error)
    snprintf(b, sizeof b, "error: %s", it->error_message ? it->error_message : "?");
  else
    side_text(b, sizeof b, it->replayed.action, it->replayed.rule, it->replayed.source,
              it->replayed.confidence);
  fprintf(out, "%s  %s  %s -> %s\n", it->id_text ? it->id_text : "?", it->point ? it->point : "", a,
          b);
}

/* ---- formatting helpers ---- */

/* 1234567 -> "1,234,567" */
static const char *count_text(uint64_t v, char buf[32]) {
  char t[32];
  int n = snprintf(t, sizeof t, "%llu", (unsigned long long)v);
  int o = 0;
  for (int i = 0; i < n; i++) {
    if (i && (n - i) % 3 == 0) buf[o++] = ',';
    buf[o++] = t[i];
  }
  buf[o] = '\0';
  return buf;
}

static double pct(uint64_t a, uint64_t b) { return b ? 100.0 * (double)a / (double)b : 0.0; }

/* Microseconds, with a unit that keeps 3-4 significant digits. */
static const char *us_text(double us, char buf[32]) {
  if (us < 10)
    snprintf(buf, 32, "%.2f us", us);
  else if (us < 1000)
    snprintf(buf, 32, "%.1f us", us);
  else if (us < 1e6)
    snprintf(buf, 32, "%.2f ms", us / 1000);
  else
    snprintf(buf, 32, "%.2f s", us / 1e6);
  return buf;
}

static const char *mode_title(score_mode m) {
  switch (m) {
    case SCORE_DETERMINISM:
      return "determinism check (recorded policy versions)";
    case SCORE_CANDIDATE:
      return "candidate bundle against recorded traffic";
    case SCORE_AGAINST:
      return "another decision service against recorded traffic";
  }
  return "";
}

/* The distinct values of one column of rows, in order of first appearance
 * after sorting by name (so that matrices read the same every run). */
static int cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static size_t distinct(const score_row *rows, size_t n, int to, const char **out, size_t max,
                       size_t *total) {
  size_t k = 0, all = 0;
  for (size_t i = 0; i < n; i++) {
    const char *s = to ? rows[i].to : rows[i].from;
    size_t j = 0;
    while (j < k && strcmp(out[j], s) != 0) j++;
    if (j < k) continue;
    int seen_before = 0; /* among the ones not kept, count each name once */
    for (size_t p = 0; p < i && k == max && !seen_before; p++)
      seen_before = strcmp(to ? rows[p].to : rows[p].from, s) == 0;
    if (seen_before) continue;
    all++;
    if (k < max) out[k++] = s;
  }
  qsort(out, k, sizeof *out, cmp_str);
  if (total) *total = all;
  return k;
}

static uint64_t cell(const score_row *rows, size_t n, const char *from, const char *to) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(rows[i].from, from) == 0 && strcmp(rows[i].to, to) == 0) return rows[i].count;
  return 0;
}

#define MATRIX_MAX 24

/* ---- text ---- */

static void text_rows(FILE *out, const char *title, const score_row *rows, size_t n, uint64_t of) {
  if (!n) return;
  fprintf(out, "\n%s\n", title);
  size_t shown = n < 20 ? n : 20;
  int w = 10;
  for (size_t i = 0; i < shown; i++) {
    int l = (int)(strlen(rows[i].from) + strlen(rows[i].to) + 4);
    if (l > w) w = l < 60 ? l : 60;
  }
  for (size_t i = 0; i < shown; i++) {
    char pair[512], c[32];
    snprintf(pair, sizeof pair, "%s -> %s", rows[i].from, rows[i].to);
    fprintf(out, "  %-*s %9s %5.1f%%", w, pair, count_text(rows[i].count, c),
            pct(rows[i].count, of));
    for (int e = 0; e < rows[i].nexamples; e++)
      fprintf(out, "%s%s", e ? ", " : "   e.g. ", rows[i].examples[e]);
    fputc('\n', out);
  }
  if (n > shown) fprintf(out, "  ... and %zu more (see --json or --html)\n", n - shown);
}

/* Per label: how many snapshots carry it and the share each side got
 * right (recall). The full confusion matrices are in --json and --html. */
static void text_per_label(FILE *out, const score_report *r) {
  const char *labels[MATRIX_MAX];
  size_t all;
  size_t nl = distinct(r->confusion_replayed, r->nconfusion_replayed, 0, labels, MATRIX_MAX, &all);
  int w = 10;
  for (size_t i = 0; i < nl; i++)
    if ((int)strlen(labels[i]) > w) w = (int)strlen(labels[i]);
  fprintf(out, "  %-*s %9s %9s %9s\n", w, "label", "count", "recorded",
          r->mode == SCORE_AGAINST ? "remote" : "replayed");
  for (size_t i = 0; i < nl; i++) {
    uint64_t n = 0, ok_rec = 0, ok_rep = 0;
    for (size_t k = 0; k < r->nconfusion_replayed; k++)
      if (!strcmp(r->confusion_replayed[k].from, labels[i])) {
        n += r->confusion_replayed[k].count;
        if (!strcmp(r->confusion_replayed[k].to, labels[i]))
          ok_rep += r->confusion_replayed[k].count;
      }
    ok_rec = cell(r->confusion_recorded, r->nconfusion_recorded, labels[i], labels[i]);
    char c[32];
    fprintf(out, "  %-*s %9s %8.1f%% %8.1f%%\n", w, labels[i], count_text(n, c), pct(ok_rec, n),
            pct(ok_rep, n));
  }
  if (all > nl) fprintf(out, "  (%zu more labels in --json)\n", all - nl);
}

static void text_dist_row(FILE *out, const char *name, const score_dist *d) {
  char a[32], b[32], c[32], e[32], m[32];
  if (!d->count) {
    fprintf(out, "  %-10s %s\n", name, "(none recorded)");
    return;
  }
  fprintf(out, "  %-10s %11s %11s %11s %11s %11s\n", name, us_text(d->p50, a), us_text(d->p90, b),
          us_text(d->p99, c), us_text(d->max, e), us_text(d->mean, m));
}

static void text_categories(FILE *out, const score_category *cat) {
  for (int i = 0; i < SCORE_NCAT; i++) {
    const score_category *c = &cat[i];
    if (c->scored)
      fprintf(out, "  %-9s weight %-5g %5.3f -> %5.1f   %s\n", c->name, c->weight, c->value,
              c->points, c->basis);
    else
      fprintf(out, "  %-9s weight %-5g   -            %s\n", c->name, c->weight, c->basis);
  }
}

static const char *side_label(const score_report *r) {
  return r->mode == SCORE_AGAINST ? "remote" : "replayed";
}

/* "recorded 91.3  replayed 91.3: a tie" and the like, per category. */
static const char *verdict_word(double mine, double other) {
  return mine > other + 0.0005 ? "better" : mine < other - 0.0005 ? "worse" : "tie";
}

static void text_side_by_side(FILE *out, const score_report *r) {
  fprintf(out, "\nside by side         recorded  %9s\n", side_label(r));
  for (int i = 0; i < SCORE_NCAT; i++) {
    const score_category *a = &r->recorded_cat[i], *b = &r->cat[i];
    if (!a->scored || !b->scored) {
      fprintf(out, "  %-9s        %8s  %9s\n", a->name, "-", "-");
      continue;
    }
    fprintf(out, "  %-9s        %8.3f  %9.3f   %s\n", a->name, a->value, b->value,
            verdict_word(b->value, a->value));
  }
  fprintf(out, "  %-9s        %8.1f  %9.1f   %s\n", "score", r->recorded_score, r->score,
          verdict_word(r->score / 100, r->recorded_score / 100));
}

/* The score of each side per decision point. */
static void text_points(FILE *out, const score_report *r) {
  const score_comparison *c = &r->cmp;
  if (c->npoints < 1) return;
  int w = 14;
  for (size_t p = 0; p < c->npoints; p++)
    if ((int)strlen(c->points[p].point) > w) w = (int)strlen(c->points[p].point);
  if (r->has_recorded_score)
    fprintf(out, "\nby decision point %*s %9s %9s %9s\n", w - 16, "", "decisions", "recorded",
            side_label(r));
  else
    fprintf(out, "\nby decision point %*s %9s %9s\n", w - 16, "", "decisions", "score");
  for (size_t p = 0; p < c->npoints; p++) {
    const score_side_result *s = c->points[p].sides;
    char n[32];
    if (r->has_recorded_score)
      fprintf(out, "  %-*s %9s %9.1f %9.1f   %s\n", w, c->points[p].point,
              count_text(s[0].decisions, n), s[0].score, s[1].score,
              verdict_word(s[1].score / 100, s[0].score / 100));
    else
      fprintf(out, "  %-*s %9s %9.1f\n", w, c->points[p].point, count_text(s[1].decisions, n),
              s[1].score);
  }
}

void report_text(FILE *out, const score_report *r, const report_info *info) {
  char c1[32], c2[32];
  fprintf(out, "verdict replay: %s\n", mode_title(r->mode));
  if (info->snapshots_dir) fprintf(out, "  snapshots  %s\n", info->snapshots_dir);
  if (r->mode == SCORE_CANDIDATE && info->policy_dir)
    fprintf(out, "  candidate  %s\n", info->policy_dir);
  if (r->mode == SCORE_AGAINST && info->against_url)
    fprintf(out, "  against    %s\n", info->against_url);
  if (info->filters && *info->filters) fprintf(out, "  filters    %s\n", info->filters);
  if (info->labels_path)
    fprintf(out, "  labels     %s (%s entries)\n", info->labels_path,
            count_text(r->labels_loaded, c1));

  fprintf(out, "\n  snapshots  %12s\n", count_text(r->seen, c1));
  fprintf(out, "  replayed   %12s\n", count_text(r->replayed, c1));
  fprintf(out, "  reproduced %12s  %5.1f%%\n", count_text(r->reproduced, c1),
          pct(r->reproduced, r->seen));
  fprintf(out, "  changed    %12s  %5.1f%%", count_text(r->changed, c1), pct(r->changed, r->seen));
  if (r->changed) {
    char c3[32];
    fprintf(out, "   (action %s, rule %s, other %s)", count_text(r->changed_action, c1),
            count_text(r->changed_rule, c2), count_text(r->changed_other, c3));
  }
  fputc('\n', out);
  fprintf(out, "  errors     %12s  %5.1f%%\n", count_text(r->errors, c1), pct(r->errors, r->seen));
  if (r->masked)
    fprintf(out, "  masked     %12s  %5.1f%%   (read masked fields: cannot be re-proven)\n",
            count_text(r->masked, c1), pct(r->masked, r->seen));
  if (info->wall_seconds > 0 && r->seen)
    fprintf(out, "  time       %12.2fs  %s snapshots/s\n", info->wall_seconds,
            count_text((uint64_t)((double)r->seen / info->wall_seconds), c1));

  text_rows(out,
            r->mode == SCORE_AGAINST ? "changed by action (recorded -> remote)"
                                     : "changed by action (recorded -> replayed)",
            r->transitions, r->ntransitions, r->changed);
  text_rows(out, "changed by rule (recorded -> replayed)", r->rule_changes, r->nrule_changes,
            r->changed);
  text_rows(out, "errors (decision point -> message)", r->error_kinds, r->nerror_kinds, r->seen);

  if (r->have_labels) {
    fprintf(out, "\nlabels: %s of %s snapshots have one\n", count_text(r->labelled, c1),
            count_text(r->seen, c2));
    if (r->labelled) {
      fprintf(out, "  accuracy   recorded %5.1f%%   %s %5.1f%%\n", 100 * r->recorded.accuracy,
              r->mode == SCORE_AGAINST ? "remote" : "replayed", 100 * r->replayed_side.accuracy);
      text_per_label(out, r);
    }
  }

  fprintf(out, "\nlatency            p50         p90         p99         max        mean\n");
  text_dist_row(out, "recorded", &r->recorded.latency_us);
  text_dist_row(out, r->mode == SCORE_AGAINST ? "remote" : "replayed",
                &r->replayed_side.latency_us);
  if (r->cpu_ns.count) {
    char a[32], b[32];
    fprintf(out, "cpu per decision   mean %s, p99 %s\n", us_text(r->cpu_ns.mean / 1000, a),
            us_text(r->cpu_ns.p99 / 1000, b));
  }
  fprintf(out, "memory             peak RSS %.1f MiB\n", (double)r->peak_rss_kb / 1024.0);
  fprintf(out, "audit              %s of %s snapshots complete (%.1f%%)\n",
          count_text(r->complete, c1), count_text(r->seen, c2), 100 * r->complete_share);

  fprintf(out, "\nscore %.1f / 100\n", r->score);
  text_categories(out, r->cat);
  if (r->has_recorded_score) {
    fprintf(out, "recorded decisions, scored on the same categories: %.1f / 100\n",
            r->recorded_score);
    text_categories(out, r->recorded_cat);
    text_side_by_side(out, r);
  }
  text_points(out, r);

  fputc('\n', out);
  if (r->mode == SCORE_DETERMINISM) {
    if (r->seen && r->reproduced == r->seen)
      fprintf(out, "result: every decision reproduced exactly\n");
    else if (r->seen && r->reproduced + r->masked == r->seen)
      fprintf(out,
              "result: every decision reproduced exactly but %s that read masked fields "
              "(cannot be re-proven)\n",
              count_text(r->masked, c1));
    else if (!r->seen)
      fprintf(out, "result: no snapshot matched\n");
    else
      fprintf(out, "result: %s of %s snapshots did NOT reproduce (listed above)\n",
              count_text(r->seen - r->reproduced - r->masked, c1), count_text(r->seen, c2));
  } else {
    fprintf(out, "result: %s of %s decisions would change\n", count_text(r->changed, c1),
            count_text(r->seen, c2));
  }
}

/* ---- JSON ---- */

static void j_key(json_buf *b, const char *k) {
  if (b->len && b->data[b->len - 1] != '{' && b->data[b->len - 1] != '[') json_buf_putc(b, ',');
  json_write_string(b, k, strlen(k));
  json_buf_putc(b, ':');
}

static void j_str(json_buf *b, const char *k, const char *v) {
  j_key(b, k);
  if (v)
    json_write_string(b, v, strlen(v));
  else
    json_buf_put(b, "null", 4);
}

static void j_u64(json_buf *b, const char *k, uint64_t v) {
  char t[32];
  int n = snprintf(t, sizeof t, "%llu", (unsigned long long)v);
  j_key(b, k);
  json_buf_put(b, t, (size_t)n);
}

/* Rounded to `digits` decimals, written so that it reads back as a number. */
static void j_num(json_buf *b, const char *k, double v, int digits) {
  j_key(b, k);
  if (!isfinite(v)) {
    json_buf_put(b, "null", 4);
    return;
  }
  double m = pow(10, digits);
  double r = round(v * m) / m;
  if (r == 0) r = 0; /* no -0.0 */
  json_write_double(b, r);
}

static void j_bool(json_buf *b, const char *k, int v) {
  j_key(b, k);
  json_buf_put(b, v ? "true" : "false", v ? 4 : 5);
}

static void j_open(json_buf *b, const char *k, char c) {
  if (k)
    j_key(b, k);
  else if (b->len && b->data[b->len - 1] != '{' && b->data[b->len - 1] != '[')
    json_buf_putc(b, ',');
  json_buf_putc(b, c);
}

static void j_rows(json_buf *b, const char *k, const score_row *rows, size_t n, const char *fk,
                   const char *tk) {
  j_open(b, k, '[');
  for (size_t i = 0; i < n; i++) {
    j_open(b, NULL, '{');
    j_str(b, fk, rows[i].from);
    j_str(b, tk, rows[i].to);
    j_u64(b, "count", rows[i].count);
    j_open(b, "examples", '[');
    for (int e = 0; e < rows[i].nexamples; e++) {
      if (e) json_buf_putc(b, ',');
      json_write_string(b, rows[i].examples[e], strlen(rows[i].examples[e]));
    }
    json_buf_put(b, "]}", 2);
  }
  json_buf_putc(b, ']');
}

static void j_dist(json_buf *b, const char *k, const score_dist *d) {
  j_open(b, k, '{');
  j_u64(b, "count", d->count);
  j_num(b, "p50", d->p50, 3);
  j_num(b, "p90", d->p90, 3);
  j_num(b, "p99", d->p99, 3);
  j_num(b, "max", d->max, 3);
  j_num(b, "mean", d->mean, 3);
  json_buf_putc(b, '}');
}

static void j_categories(json_buf *b, const char *k, const score_category *cat) {
  j_open(b, k, '[');
  for (int i = 0; i < SCORE_NCAT; i++) {
    j_open(b, NULL, '{');
    j_str(b, "name", cat[i].name);
    j_num(b, "weight", cat[i].weight, 6);
    j_bool(b, "scored", cat[i].scored);
    j_num(b, "value", cat[i].value, 4);
    j_num(b, "points", cat[i].points, 2);
    j_num(b, "measure", cat[i].measure, 4);
    j_str(b, "basis", cat[i].basis);
    json_buf_putc(b, '}');
  }
  json_buf_putc(b, ']');
}

/* One side's figures: {side, score, decisions, errors, agreed, accuracy,
 * latency_us, rtt_us, audit, categories}. */
static void j_side_result(json_buf *b, const char *name, const score_side_result *s) {
  j_open(b, NULL, '{');
  j_str(b, "side", name);
  j_num(b, "score", s->score, 2);
  j_u64(b, "decisions", s->decisions);
  j_u64(b, "errors", s->errors);
  j_u64(b, "agreed", s->agreed);
  j_u64(b, "labelled", s->labelled);
  j_u64(b, "correct", s->correct);
  if (s->labelled)
    j_num(b, "accuracy", s->accuracy, 4);
  else
    j_str(b, "accuracy", NULL);
  j_dist(b, "latency_us", &s->latency_us);
  if (s->rtt_us.count)
    j_dist(b, "rtt_us", &s->rtt_us);
  else
    j_str(b, "rtt_us", NULL);
  j_open(b, "audit", '{');
  j_u64(b, "id", s->audit_id);
  j_u64(b, "reason", s->audit_reason);
  j_u64(b, "versions", s->audit_version);
  j_num(b, "share", s->audit_share, 4);
  json_buf_putc(b, '}');
  j_categories(b, "categories", s->cat);
  json_buf_putc(b, '}');
}

static void j_side(json_buf *b, const char *k, const char *action, const char *rule,
                   const char *source, double conf, int allowed) {
  j_open(b, k, '{');
  j_str(b, "action", action);
  if (allowed < 0)
    j_str(b, "allowed", NULL); /* the answer did not say */
  else
    j_bool(b, "allowed", allowed);
  j_str(b, "source", source);
  j_str(b, "rule", rule);
  j_num(b, "confidence", conf, 6);
  json_buf_putc(b, '}');
}

int report_json(json_buf *b, const score_report *r, const report_info *info) {
  j_open(b, NULL, '{');
  j_str(b, "mode", score_mode_name(r->mode));
  j_str(b, "snapshots", info->snapshots_dir);
  j_str(b, "policy", r->mode == SCORE_CANDIDATE ? info->policy_dir : NULL);
  j_str(b, "against", r->mode == SCORE_AGAINST ? info->against_url : NULL);
  j_u64(b, "seen", r->seen);
  j_u64(b, "replayed", r->replayed);
  j_u64(b, "reproduced", r->reproduced);
  j_u64(b, "changed", r->changed);
  j_u64(b, "errors", r->errors);
  j_num(b, "score", r->score, 2);
  if (r->has_recorded_score)
    j_num(b, "recorded_score", r->recorded_score, 2);
  else
    j_str(b, "recorded_score", NULL);
  j_u64(b, "masked", r->masked);
  if (r->mode == SCORE_DETERMINISM)
    j_bool(b, "deterministic", r->seen && r->reproduced + r->masked == r->seen);
  j_open(b, "changes", '{');
  j_u64(b, "action", r->changed_action);
  j_u64(b, "allowed", r->changed_allowed);
  j_u64(b, "rule", r->changed_rule);
  j_u64(b, "other", r->changed_other);
  json_buf_putc(b, '}');
  j_rows(b, "transitions", r->transitions, r->ntransitions, "from", "to");
  j_rows(b, "rules", r->rule_changes, r->nrule_changes, "from", "to");
  j_rows(b, "error_kinds", r->error_kinds, r->nerror_kinds, "point", "message");

  if (r->have_labels) {
    j_open(b, "labels", '{');
    j_str(b, "file", info->labels_path);
    j_u64(b, "loaded", r->labels_loaded);
    j_u64(b, "labelled", r->labelled);
    j_open(b, "recorded", '{');
    j_u64(b, "correct", r->recorded.correct);
    j_num(b, "accuracy", r->recorded.accuracy, 4);
    json_buf_putc(b, '}');
    j_open(b, "replayed", '{');
    j_u64(b, "correct", r->replayed_side.correct);
    j_num(b, "accuracy", r->replayed_side.accuracy, 4);
    json_buf_putc(b, '}');
    j_open(b, "confusion", '{');
    j_rows(b, "recorded", r->confusion_recorded, r->nconfusion_recorded, "label", "action");
    j_rows(b, "replayed", r->confusion_replayed, r->nconfusion_replayed, "label", "action");
    json_buf_put(b, "}}", 2);
  } else {
    j_str(b, "labels", NULL);
  }

  j_open(b, "latency_us", '{');
  j_dist(b, "recorded", &r->recorded.latency_us);
  j_dist(b, "replayed", &r->replayed_side.latency_us);
  json_buf_putc(b, '}');
  if (r->cpu_ns.count) {
    j_open(b, "cpu_ns", '{');
    j_u64(b, "count", r->cpu_ns.count);
    j_num(b, "mean", r->cpu_ns.mean, 1);
    j_num(b, "p99", r->cpu_ns.p99, 1);
    json_buf_putc(b, '}');
  } else {
    j_str(b, "cpu_ns", NULL);
  }
  j_open(b, "memory", '{');
  j_u64(b, "peak_rss_bytes", (uint64_t)(r->peak_rss_kb > 0 ? r->peak_rss_kb : 0) * 1024);
  json_buf_putc(b, '}');
  j_open(b, "audit", '{');
  j_u64(b, "complete", r->complete);
  j_num(b, "complete_share", r->complete_share, 4);
  json_buf_putc(b, '}');

  j_open(b, "score_breakdown", '{');
  j_open(b, "weights", '{');
  j_num(b, "accuracy", r->weights.accuracy, 6);
  j_num(b, "latency", r->weights.latency, 6);
  j_num(b, "cost", r->weights.cost, 6);
  j_num(b, "audit", r->weights.audit, 6);
  json_buf_putc(b, '}');
  j_categories(b, "categories", r->cat);
  if (r->has_recorded_score) j_categories(b, "recorded_categories", r->recorded_cat);
  json_buf_putc(b, '}');
  j_open(b, "sides", '[');
  for (int i = 0; i < r->cmp.nsides; i++)
    j_side_result(b, i == 0 ? "recorded" : side_label(r), &r->cmp.sides[i]);
  json_buf_putc(b, ']');
  j_open(b, "points", '[');
  for (size_t p = 0; p < r->cmp.npoints; p++) {
    j_open(b, NULL, '{');
    j_str(b, "point", r->cmp.points[p].point);
    j_open(b, "sides", '[');
    for (int i = 0; i < r->cmp.nsides; i++)
      j_side_result(b, i == 0 ? "recorded" : side_label(r), &r->cmp.points[p].sides[i]);
    json_buf_put(b, "]}", 2);
  }
  json_buf_putc(b, ']');

  if (info->wall_seconds > 0) {
    j_num(b, "wall_seconds", info->wall_seconds, 4);
    j_num(b, "snapshots_per_second", r->seen / info->wall_seconds, 0);
  }
  if (info->failures) {
    const report_failures *f = info->failures;
    j_open(b, r->mode == SCORE_DETERMINISM ? "failures" : "changed_decisions", '[');
    for (size_t i = 0; i < f->n; i++) {
      const report_failure *x = &f->items[i];
      j_open(b, NULL, '{');
      j_str(b, "id", x->id);
      j_str(b, "point", x->point);
      j_str(b, "key", x->key);
      j_side(b, "recorded", x->rec_action, x->rec_rule, x->rec_source, x->rec_confidence,
             x->rec_allowed);
      if (x->error) {
        j_str(b, "replayed", NULL);
        j_str(b, "error", x->error);
      } else {
        j_side(b, "replayed", x->rep_action, x->rep_rule, x->rep_source, x->rep_confidence,
               x->rep_allowed);
      }
      json_buf_putc(b, '}');
    }
    json_buf_putc(b, ']');
    j_u64(b, r->mode == SCORE_DETERMINISM ? "failures_omitted" : "changed_decisions_omitted",
          f->omitted);
  }
  if (info->extra_json && info->extra_len) {
    json_buf_putc(b, ',');
    json_buf_put(b, info->extra_json, info->extra_len);
  }
  json_buf_putc(b, '}');
  return b->oom ? -1 : 0;
}

/* ---- HTML ---- */

static void h_esc(FILE *out, const char *s) {
  if (!s) return;
  for (; *s; s++) {
    switch (*s) {
      case '<':
        fputs("&lt;", out);
        break;
      case '>':
        fputs("&gt;", out);
        break;
      case '&':
        fputs("&amp;", out);
        break;
      case '"':
        fputs("&quot;", out);
        break;
      case '\'':
        fputs("&#39;", out);
        break;
      default:
        fputc(*s, out);
    }
  }
}

static const char html_css[] =
    "body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;color:#1d2330;"
    "background:#f5f6f8;margin:0;padding:24px 32px}"
    "main{max-width:1100px;margin:0 auto}"
    "h1{font-size:22px;margin:0 0 4px}h2{font-size:16px;margin:28px 0 10px;"
    "border-bottom:1px solid #d8dce3;padding-bottom:4px}"
    ".sub{color:#5b6475;margin:0 0 16px}"
    ".cards{display:flex;flex-wrap:wrap;gap:12px}"
    ".card{background:#fff;border:1px solid #dde1e8;border-radius:8px;padding:10px 16px;"
    "min-width:120px}"
    ".card b{display:block;font-size:22px}.card span{color:#5b6475;font-size:12px}"
    ".score{font-size:44px;font-weight:700}.good{color:#17803d}.warn{color:#b26b00}"
    ".bad{color:#c0262d}.tie{color:#39404d}.card.good{border-color:#17803d}"
    ".card.bad{border-color:#c0262d}td.good{background:#e9f6ee}td.bad{background:#fbeaea}"
    "table{border-collapse:collapse;background:#fff;border:1px solid #dde1e8;width:100%}"
    "th,td{padding:6px 10px;border-bottom:1px solid #eceef2;text-align:left;vertical-align:top}"
    "th{background:#eef0f4;font-weight:600}td.n{text-align:right;font-variant-numeric:"
    "tabular-nums}"
    "code{font:12px ui-monospace,SFMono-Regular,Menlo,monospace;color:#39404d}"
    ".bar{background:#e4e7ee;border-radius:4px;height:12px;width:220px;display:inline-block;"
    "vertical-align:middle}.bar i{display:block;height:12px;border-radius:4px;background:#3d6fd9}"
    ".muted{color:#8a92a2}.diag{background:#e9f6ee}td.z{color:#c5cad3}"
    "svg{background:#fff;border:1px solid #dde1e8;border-radius:8px}"
    "footer{margin-top:32px;color:#8a92a2;font-size:12px}";

/* Colour by which side wins, never by the figure alone: a side that scores
 * 90 and loses to 95 is the loser. Within display precision, a tie. */
static const char *win_class(double mine, double other, double eps) {
  return mine > other + eps ? "good" : mine < other - eps ? "bad" : "tie";
}

static void h_card_c(FILE *out, const char *figure, const char *label, const char *cls) {
  fprintf(out, "<div class=\"card %s\"><b>", cls);
  h_esc(out, figure);
  fputs("</b><span>", out);
  h_esc(out, label);
  fputs("</span></div>\n", out);
}

static void h_card(FILE *out, const char *figure, const char *label) {
  fputs("<div class=\"card\"><b>", out);
  h_esc(out, figure);
  fputs("</b><span>", out);
  h_esc(out, label);
  fputs("</span></div>\n", out);
}

static void h_categories(FILE *out, const score_category *cat) {
  fputs(
      "<table><tr><th>category</th><th>weight</th><th>value</th><th></th><th>points</th>"
      "<th>based on</th></tr>\n",
      out);
  for (int i = 0; i < SCORE_NCAT; i++) {
    const score_category *c = &cat[i];
    fprintf(out, "<tr><td>%s</td><td class=\"n\">%g</td>", c->name, c->weight);
    if (c->scored)
      fprintf(out,
              "<td class=\"n\">%.3f</td><td><span class=\"bar\"><i style=\"width:%.1f%%\">"
              "</i></span></td><td class=\"n\">%.1f</td>",
              c->value, 100 * c->value, c->points);
    else
      fputs("<td class=\"n muted\">&#8212;</td><td></td><td class=\"n muted\">&#8212;</td>", out);
    fputs("<td>", out);
    h_esc(out, c->basis);
    fputs("</td></tr>\n", out);
  }
  fputs("</table>\n", out);
}

static void h_rows(FILE *out, const score_row *rows, size_t n, uint64_t of, const char *fh,
                   const char *th) {
  fprintf(out,
          "<table><tr><th>%s</th><th>%s</th><th>count</th><th>share</th><th>examples</th>"
          "</tr>\n",
          fh, th);
  size_t shown = n < 200 ? n : 200;
  for (size_t i = 0; i < shown; i++) {
    char c[32];
    fputs("<tr><td>", out);
    h_esc(out, rows[i].from);
    fputs("</td><td>", out);
    h_esc(out, rows[i].to);
    fprintf(out, "</td><td class=\"n\">%s</td><td class=\"n\">%.1f%%</td><td>",
            count_text(rows[i].count, c), pct(rows[i].count, of));
    for (int e = 0; e < rows[i].nexamples; e++) {
      fputs(e ? "<br><code>" : "<code>", out);
      h_esc(out, rows[i].examples[e]);
      fputs("</code>", out);
    }
    fputs("</td></tr>\n", out);
  }
  if (n > shown)
    fprintf(out, "<tr><td colspan=\"5\" class=\"muted\">%zu more rows in --json</td></tr>\n",
            n - shown);
  fputs("</table>\n", out);
}

static void h_matrix(FILE *out, const char *title, const score_row *rows, size_t n) {
  const char *labels[MATRIX_MAX], *acts[MATRIX_MAX];
  size_t nl = distinct(rows, n, 0, labels, MATRIX_MAX, NULL);
  size_t na = distinct(rows, n, 1, acts, MATRIX_MAX, NULL);
  /* Many actions make a wide matrix: it scrolls inside its own box, not the page. */
  fputs("<div style=\"overflow-x:auto\"><table><tr><th>", out);
  h_esc(out, title);
  fputs(": label &#8595; / decided &#8594;</th>", out);
  for (size_t j = 0; j < na; j++) {
    fputs("<th>", out);
    h_esc(out, acts[j]);
    fputs("</th>", out);
  }
  fputs("</tr>\n", out);
  for (size_t i = 0; i < nl; i++) {
    fputs("<tr><th>", out);
    h_esc(out, labels[i]);
    fputs("</th>", out);
    for (size_t j = 0; j < na; j++) {
      char c[32];
      uint64_t v = cell(rows, n, labels[i], acts[j]);
      fprintf(out, "<td class=\"n%s\">%s</td>",
              strcmp(labels[i], acts[j]) == 0 ? " diag"
              : v == 0                        ? " z"
                                              : "",
              count_text(v, c));
    }
    fputs("</tr>\n", out);
  }
  fputs("</table></div>\n", out);
}

#define HIST_BINS 32

/* A latency histogram as inline SVG: log-spaced bins from the smallest to
 * the largest value seen on either side, replayed (filled) and recorded
 * (outlined) side by side, with the replayed p50 and p99 marked. */
static void h_histogram(FILE *out, const score_report *r) {
  const score_hist *a = r->latency_hist, *b = r->recorded_latency_hist;
  uint64_t lo = UINT64_MAX, hi = 0;
  if (a && a->count) {
    lo = a->min;
    hi = a->max;
  }
  if (b && b->count) {
    if (b->min < lo) lo = b->min;
    if (b->max > hi) hi = b->max;
  }
  if (hi == 0 || lo == UINT64_MAX) {
    fputs("<p class=\"muted\">No latency was measured.</p>\n", out);
    return;
  }
  if (lo < 100) lo = 100; /* 0.1 us: below that the clock itself is the noise */
  if (hi < lo * 2) hi = lo * 2;
  double llo = log((double)lo), lhi = log((double)hi + 1);
  uint64_t edges[HIST_BINS + 1], ca[HIST_BINS], cb[HIST_BINS], peak = 1;
  for (int i = 0; i <= HIST_BINS; i++) edges[i] = (uint64_t)exp(llo + (lhi - llo) * i / HIST_BINS);
  edges[0] = 0;              /* the first bin takes everything below lo */
  edges[HIST_BINS] = hi + 1; /* the last takes max */
  for (int i = 0; i < HIST_BINS; i++) {
    ca[i] = a ? score_hist_count_range(a, edges[i], edges[i + 1]) : 0;
    cb[i] = b ? score_hist_count_range(b, edges[i], edges[i + 1]) : 0;
    if (ca[i] > peak) peak = ca[i];
    if (cb[i] > peak) peak = cb[i];
  }
  const int W = 1000, H = 300, L = 60, R = 20, T = 30, B = 50;
  double bw = (double)(W - L - R) / HIST_BINS;
  fprintf(out,
          "<svg width=\"%d\" height=\"%d\" "
          "viewBox=\"0 0 %d %d\" role=\"img\" aria-label=\"latency histogram\">\n",
          W, H, W, H);
  fprintf(out, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#8a92a2\"/>\n", L, H - B,
          W - R, H - B);
  for (int g = 0; g <= 4; g++) {
    double y = (H - B) - (double)(H - B - T) * g / 4;
    char c[32];
    fprintf(out,
            "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#eceef2\"/>"
            "<text x=\"%d\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\" fill=\"#5b6475\">%s"
            "</text>\n",
            L, y, W - R, y, L - 6, y + 4, count_text((uint64_t)((double)peak * g / 4 + 0.5), c));
  }
  for (int i = 0; i < HIST_BINS; i++) {
    double x = L + bw * i;
    double ha = (double)(H - B - T) * (double)ca[i] / (double)peak;
    double hb = (double)(H - B - T) * (double)cb[i] / (double)peak;
    if (ca[i])
      fprintf(out,
              "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#3d6fd9\">"
              "<title>%llu replayed</title></rect>\n",
              x + 1, (H - B) - ha, bw / 2 - 1, ha, (unsigned long long)ca[i]);
    if (cb[i])
      fprintf(out,
              "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#f2b84b\" "
              "fill-opacity=\"0.75\"><title>%llu recorded</title></rect>\n",
              x + bw / 2, (H - B) - hb, bw / 2 - 1, hb, (unsigned long long)cb[i]);
    if (i % 4 == 0) {
      char u[32];
      fprintf(out,
              "<text x=\"%.1f\" y=\"%d\" font-size=\"11\" text-anchor=\"middle\" "
              "fill=\"#5b6475\">%s</text>\n",
              x, H - B + 16, us_text((double)(i ? edges[i] : lo) / 1000.0, u));
    }
  }
  /* percentile markers, placed on the log axis */
  const double marks[2] = {r->replayed_side.latency_us.p50, r->replayed_side.latency_us.p99};
  const char *names[2] = {"p50", "p99"};
  for (int m = 0; m < 2; m++) {
    if (!(a && a->count)) break;
    double ns = marks[m] * 1000;
    if (ns < (double)lo) ns = (double)lo;
    double x = L + (double)(W - L - R) * (log(ns) - llo) / (lhi - llo);
    char u[32];
    fprintf(out,
            "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#c0262d\" "
            "stroke-dasharray=\"4 3\"/><text x=\"%.1f\" y=\"%d\" font-size=\"11\" "
            "fill=\"#c0262d\">%s %s</text>\n",
            x, T - 4, x, H - B, x + 4, m ? T + 22 : T + 8, names[m], us_text(marks[m], u));
  }
  fprintf(out,
          "<text x=\"%d\" y=\"%d\" font-size=\"12\" text-anchor=\"middle\" fill=\"#39404d\">"
          "latency per decision (log scale)</text>\n",
          (L + W - R) / 2, H - 12);
  fprintf(out,
          "<rect x=\"%d\" y=\"8\" width=\"10\" height=\"10\" fill=\"#3d6fd9\"/><text x=\"%d\" "
          "y=\"17\" font-size=\"11\" fill=\"#39404d\">%s</text>"
          "<rect x=\"%d\" y=\"8\" width=\"10\" height=\"10\" fill=\"#f2b84b\"/><text x=\"%d\" "
          "y=\"17\" font-size=\"11\" fill=\"#39404d\">recorded</text>\n",
          W - R - 190, W - R - 175, r->mode == SCORE_AGAINST ? "remote" : "replayed", W - R - 90,
          W - R - 75);
  fputs("</svg>\n", out);
}

static void h_dist_row(FILE *out, const char *name, const score_dist *d) {
  char a[32], b[32], c[32], e[32], m[32];
  fprintf(out, "<tr><td>%s</td>", name);
  if (!d->count) {
    fputs("<td colspan=\"6\" class=\"muted\">not recorded</td></tr>\n", out);
    return;
  }
  char n[32];
  fprintf(out,
          "<td class=\"n\">%s</td><td class=\"n\">%s</td><td class=\"n\">%s</td><td "
          "class=\"n\">%s</td><td class=\"n\">%s</td><td class=\"n\">%s</td></tr>\n",
          count_text(d->count, n), us_text(d->p50, a), us_text(d->p90, b), us_text(d->p99, c),
          us_text(d->max, e), us_text(d->mean, m));
}

/* The categories of both sides in two columns, each cell coloured by
 * which side wins it. */
static void h_side_by_side(FILE *out, const score_report *r) {
  fprintf(out, "<h2>Side by side</h2>\n<table><tr><th></th><th>recorded</th><th>%s</th></tr>\n",
          side_label(r));
  for (int i = 0; i < SCORE_NCAT; i++) {
    const score_category *a = &r->recorded_cat[i], *b = &r->cat[i];
    fprintf(out, "<tr><td>%s</td>", a->name);
    if (a->scored && b->scored)
      fprintf(out, "<td class=\"n %s\">%.3f</td><td class=\"n %s\">%.3f</td></tr>\n",
              win_class(a->value, b->value, 0.0005), a->value,
              win_class(b->value, a->value, 0.0005), b->value);
    else
      fputs("<td class=\"n muted\">not scored</td><td class=\"n muted\">not scored</td></tr>\n",
            out);
  }
  fprintf(out,
          "<tr><th>score</th><td class=\"n %s\"><b>%.1f</b></td><td class=\"n %s\"><b>%.1f</b>"
          "</td></tr>\n</table>\n",
          win_class(r->recorded_score, r->score, 0.05), r->recorded_score,
          win_class(r->score, r->recorded_score, 0.05), r->score);
}

static void h_points(FILE *out, const score_report *r) {
  const score_comparison *c = &r->cmp;
  if (!c->npoints) return;
  fputs("<h2>By decision point</h2>\n<table><tr><th>decision point</th><th>decisions</th>", out);
  if (r->has_recorded_score)
    fprintf(out, "<th>recorded</th><th>%s</th></tr>\n", side_label(r));
  else
    fputs("<th>score</th></tr>\n", out);
  for (size_t p = 0; p < c->npoints; p++) {
    const score_side_result *s = c->points[p].sides;
    char n[32];
    fputs("<tr><td>", out);
    h_esc(out, c->points[p].point);
    fprintf(out, "</td><td class=\"n\">%s</td>", count_text(s[1].decisions, n));
    if (r->has_recorded_score)
      fprintf(out, "<td class=\"n %s\">%.1f</td><td class=\"n %s\">%.1f</td></tr>\n",
              win_class(s[0].score, s[1].score, 0.05), s[0].score,
              win_class(s[1].score, s[0].score, 0.05), s[1].score);
    else
      fprintf(out, "<td class=\"n\">%.1f</td></tr>\n", s[1].score);
  }
  fputs("</table>\n", out);
}

int report_html(FILE *out, const score_report *r, const report_info *info) {
  char c[32], when[48] = "";
  if (info->generated_ns) {
    int64_t sec = info->generated_ns / 1000000000;
    timefmt_format_rfc3339(sec, 0, when);
  }
  fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n", out);
  fputs("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n", out);
  fprintf(out, "<title>verdict replay: %s</title>\n", score_mode_name(r->mode));
  fprintf(out, "<style>%s</style>\n</head>\n<body>\n<main>\n", html_css);
  fprintf(out, "<h1>verdict replay &#8212; %s</h1>\n<p class=\"sub\">", mode_title(r->mode));
  if (info->snapshots_dir) {
    fputs("snapshots <code>", out);
    h_esc(out, info->snapshots_dir);
    fputs("</code>", out);
  }
  if (r->mode == SCORE_CANDIDATE && info->policy_dir) {
    fputs(" &#183; candidate <code>", out);
    h_esc(out, info->policy_dir);
    fputs("</code>", out);
  }
  if (r->mode == SCORE_AGAINST && info->against_url) {
    fputs(" &#183; against <code>", out);
    h_esc(out, info->against_url);
    fputs("</code>", out);
  }
  if (info->filters && *info->filters) {
    fputs(" &#183; filters <code>", out);
    h_esc(out, info->filters);
    fputs("</code>", out);
  }
  if (*when) fprintf(out, " &#183; %s", when);
  fputs("</p>\n", out);

  /* the determinism check has one side: green when everything reproduced */
  const char *mine = r->mode == SCORE_DETERMINISM
                         ? (r->seen && r->reproduced == r->seen ? "good" : "bad")
                         : win_class(r->score, r->recorded_score, 0.05);
  fprintf(out,
          "<div class=\"cards\"><div class=\"card %s\"><b class=\"score %s\">%.1f</b><span>"
          "%s score out of 100</span></div>\n",
          mine, mine, r->score, r->mode == SCORE_DETERMINISM ? "replay" : side_label(r));
  if (r->has_recorded_score) {
    const char *theirs = win_class(r->recorded_score, r->score, 0.05);
    fprintf(out,
            "<div class=\"card %s\"><b class=\"score %s\">%.1f</b><span>recorded score, same "
            "categories</span></div>\n",
            theirs, theirs, r->recorded_score);
  }
  h_card(out, count_text(r->seen, c), "snapshots");
  h_card(out, count_text(r->reproduced, c), "reproduced");
  h_card(out, count_text(r->changed, c), "changed");
  h_card(out, count_text(r->errors, c), "errors");
  if (r->have_labels && r->labelled) {
    char t[32];
    double ra = 100 * r->replayed_side.accuracy, ca = 100 * r->recorded.accuracy;
    snprintf(t, sizeof t, "%.1f%%", ra);
    h_card_c(out, t, r->mode == SCORE_AGAINST ? "remote accuracy" : "replayed accuracy",
             win_class(ra, ca, 0.05));
    snprintf(t, sizeof t, "%.1f%%", ca);
    h_card_c(out, t, "recorded accuracy", win_class(ca, ra, 0.05));
  }
  fputs("</div>\n", out);

  fputs("<h2>Score breakdown</h2>\n", out);
  fprintf(out,
          "<p class=\"sub\">score = 100 &#215; &#931; weight &#215; value / &#931; weight, over "
          "the categories scored. Weights: accuracy %g, latency %g, cost %g, audit %g.</p>\n",
          r->weights.accuracy, r->weights.latency, r->weights.cost, r->weights.audit);
  h_categories(out, r->cat);
  if (r->has_recorded_score) {
    fputs(
        "<p class=\"sub\" style=\"margin-top:12px\">The recorded decisions, scored on the "
        "same categories:</p>\n",
        out);
    h_categories(out, r->recorded_cat);
    h_side_by_side(out, r);
  }
  h_points(out, r);

  fputs("<h2>Latency</h2>\n", out);
  h_histogram(out, r);
  fputs(
      "<table style=\"margin-top:10px\"><tr><th></th><th>count</th><th>p50</th><th>p90</th>"
      "<th>p99</th><th>max</th><th>mean</th></tr>\n",
      out);
  h_dist_row(out, "recorded", &r->recorded.latency_us);
  h_dist_row(out, r->mode == SCORE_AGAINST ? "remote (round trip)" : "replayed",
             &r->replayed_side.latency_us);
  fputs("</table>\n<p class=\"sub\">", out);
  if (r->cpu_ns.count) {
    char a[32], b[32];
    fprintf(out, "CPU per replayed decision: mean %s, p99 %s. ", us_text(r->cpu_ns.mean / 1000, a),
            us_text(r->cpu_ns.p99 / 1000, b));
  }
  char c3[32];
  fprintf(out,
          "Peak memory (RSS) of the replay: %.1f MiB. Audit: %s of %s snapshots complete "
          "(%.1f%%).</p>\n",
          (double)r->peak_rss_kb / 1024.0, count_text(r->complete, c), count_text(r->seen, c3),
          100 * r->complete_share);

  fputs("<h2>Changed decisions by action</h2>\n", out);
  if (r->ntransitions)
    h_rows(out, r->transitions, r->ntransitions, r->changed, "recorded",
           r->mode == SCORE_AGAINST ? "remote" : "replayed");
  else
    fputs("<p class=\"muted\">No decision changed its action.</p>\n", out);
  fputs("<h2>Changed decisions by rule</h2>\n", out);
  if (r->nrule_changes)
    h_rows(out, r->rule_changes, r->nrule_changes, r->changed, "recorded rule",
           r->mode == SCORE_AGAINST ? "remote rule" : "replayed rule");
  else
    fputs("<p class=\"muted\">No decision changed its rule.</p>\n", out);
  if (r->nerror_kinds) {
    fputs("<h2>Errors</h2>\n", out);
    h_rows(out, r->error_kinds, r->nerror_kinds, r->seen, "decision point", "message");
  }

  if (r->have_labels) {
    fputs("<h2>Accuracy against labels</h2>\n", out);
    char c2[32];
    fprintf(out, "<p class=\"sub\">%s of %s snapshots have a label", count_text(r->labelled, c),
            count_text(r->seen, c2));
    if (info->labels_path) {
      fputs(" in <code>", out);
      h_esc(out, info->labels_path);
      fputs("</code>", out);
    }
    fputs(".</p>\n", out);
    if (r->labelled) {
      h_matrix(out, "recorded", r->confusion_recorded, r->nconfusion_recorded);
      fputs("<div style=\"height:12px\"></div>\n", out);
      h_matrix(out, r->mode == SCORE_AGAINST ? "remote" : "replayed", r->confusion_replayed,
               r->nconfusion_replayed);
    }
  }

  const report_failures *f = info->failures;
  if (f && f->n) {
    fprintf(
        out, "<h2>%s</h2>\n",
        r->mode == SCORE_DETERMINISM ? "Decisions that did not reproduce" : "Changed decisions");
    fputs("<table><tr><th>snapshot</th><th>point</th><th>recorded</th><th>replayed</th></tr>\n",
          out);
    size_t shown = f->n < 500 ? f->n : 500;
    for (size_t i = 0; i < shown; i++) {
      const report_failure *x = &f->items[i];
      char s1[512], s2[512];
      side_text(s1, sizeof s1, x->rec_action, x->rec_rule, x->rec_source, x->rec_confidence);
      if (x->error)
        snprintf(s2, sizeof s2, "error: %s", x->error);
      else
        side_text(s2, sizeof s2, x->rep_action, x->rep_rule, x->rep_source, x->rep_confidence);
      fputs("<tr><td><code>", out);
      h_esc(out, x->id);
      fputs("</code></td><td>", out);
      h_esc(out, x->point);
      fputs("</td><td>", out);
      h_esc(out, s1);
      fputs("</td><td>", out);
      h_esc(out, s2);
      fputs("</td></tr>\n", out);
    }
    if (f->n > shown || f->omitted)
      fprintf(out, "<tr><td colspan=\"4\" class=\"muted\">%llu more not shown</td></tr>\n",
              (unsigned long long)(f->n - shown + f->omitted));
    fputs("</table>\n", out);
  }

  fputs("<footer>verdict replay &#183; docs/replay.md explains every figure on this page", out);
  if (info->wall_seconds > 0) fprintf(out, " &#183; %.2f s", info->wall_seconds);
  fputs("</footer>\n</main>\n</body>\n</html>\n", out);
  return ferror(out) ? -1 : 0;
}

/* ---- several candidates ---- */

/* Side k of the comparison: 0 the recording (the same in every walk), i + 1
 * candidate i. */
static const score_side_result *cand_side(const score_report *reps, size_t k) {
  return k == 0 ? &reps[0].cmp.sides[0] : &reps[k - 1].cmp.sides[1];
}

static const score_side_result *cand_point(const score_report *reps, size_t k, size_t p) {
  return k == 0 ? &reps[0].cmp.points[p].sides[0] : &reps[k - 1].cmp.points[p].sides[1];
}

static const char *cand_name(const report_info *infos, size_t k) {
  return k == 0 ? "recorded" : infos[k - 1].policy_dir;
}

/* Whether every walk saw the same decision points (they do: the same log,
 * the same filters), so points can be lined up by index. */
static int points_aligned(const score_report *reps, size_t n) {
  for (size_t i = 1; i < n; i++) {
    if (reps[i].cmp.npoints != reps[0].cmp.npoints) return 0;
    for (size_t p = 0; p < reps[0].cmp.npoints; p++)
      if (strcmp(reps[i].cmp.points[p].point, reps[0].cmp.points[p].point) != 0) return 0;
  }
  return 1;
}

/* "best", "worst" or "" among the n + 1 figures. */
static const char *rank_class(const double *v, size_t m, size_t k, double eps) {
  double best = v[0], worst = v[0];
  for (size_t i = 1; i < m; i++) {
    if (v[i] > best) best = v[i];
    if (v[i] < worst) worst = v[i];
  }
  if (best - worst <= eps) return "tie";
  if (v[k] >= best - eps) return "good";
  if (v[k] <= worst + eps) return "bad";
  return "tie";
}

void report_text_candidates(FILE *out, const score_report *reps, const report_info *infos,
                            size_t n) {
  for (size_t i = 0; i < n; i++) {
    fprintf(out, "%s==== candidate %zu of %zu: %s\n", i ? "\n" : "", i + 1, n, infos[i].policy_dir);
    report_text(out, &reps[i], &infos[i]);
  }
  size_t m = n + 1;
  fprintf(out, "\n==== side by side: the recording and %zu candidates\n", n);
  fprintf(out, "  %-10s", "");
  for (size_t k = 0; k < m; k++) fprintf(out, " %14.14s", cand_name(infos, k));
  fputc('\n', out);
  for (int c = 0; c < SCORE_NCAT; c++) {
    fprintf(out, "  %-10s", reps[0].cat[c].name);
    for (size_t k = 0; k < m; k++) {
      const score_category *x = &cand_side(reps, k)->cat[c];
      if (x->scored)
        fprintf(out, " %14.3f", x->value);
      else
        fprintf(out, " %14s", "-");
    }
    fputc('\n', out);
  }
  fprintf(out, "  %-10s", "score");
  for (size_t k = 0; k < m; k++) fprintf(out, " %14.1f", cand_side(reps, k)->score);
  fputc('\n', out);
  if (points_aligned(reps, n) && reps[0].cmp.npoints) {
    fprintf(out, "\nby decision point (score)\n");
    for (size_t p = 0; p < reps[0].cmp.npoints; p++) {
      fprintf(out, "  %-22.22s", reps[0].cmp.points[p].point);
      for (size_t k = 0; k < m; k++) fprintf(out, " %14.1f", cand_point(reps, k, p)->score);
      fputc('\n', out);
    }
  }
  size_t best = 1;
  for (size_t k = 2; k < m; k++)
    if (cand_side(reps, k)->score > cand_side(reps, best)->score) best = k;
  fprintf(out, "\nresult: %s scores highest among the candidates (%.1f; the recording %.1f)\n",
          cand_name(infos, best), cand_side(reps, best)->score, cand_side(reps, 0)->score);
}

int report_json_candidates(json_buf *b, const score_report *reps, const report_info *infos,
                           size_t n) {
  size_t m = n + 1;
  j_open(b, NULL, '{');
  j_str(b, "mode", "candidates");
  j_str(b, "snapshots", infos[0].snapshots_dir);
  j_open(b, "policies", '[');
  for (size_t i = 0; i < n; i++) {
    if (i) json_buf_putc(b, ',');
    json_write_string(b, infos[i].policy_dir, strlen(infos[i].policy_dir));
  }
  json_buf_putc(b, ']');
  j_open(b, "sides", '[');
  for (size_t k = 0; k < m; k++) j_side_result(b, cand_name(infos, k), cand_side(reps, k));
  json_buf_putc(b, ']');
  j_open(b, "points", '[');
  if (points_aligned(reps, n)) {
    for (size_t p = 0; p < reps[0].cmp.npoints; p++) {
      j_open(b, NULL, '{');
      j_str(b, "point", reps[0].cmp.points[p].point);
      j_open(b, "sides", '[');
      for (size_t k = 0; k < m; k++) j_side_result(b, cand_name(infos, k), cand_point(reps, k, p));
      json_buf_put(b, "]}", 2);
    }
  }
  json_buf_putc(b, ']');
  j_open(b, "candidates", '[');
  for (size_t i = 0; i < n; i++) /* report_json puts the comma between them */
    if (report_json(b, &reps[i], &infos[i]) < 0) return -1;
  json_buf_put(b, "]}", 2);
  return b->oom ? -1 : 0;
}

int report_html_candidates(FILE *out, const score_report *reps, const report_info *infos,
                           size_t n) {
  size_t m = n + 1;
  char when[48] = "";
  if (infos[0].generated_ns) timefmt_format_rfc3339(infos[0].generated_ns / 1000000000, 0, when);
  fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n", out);
  fputs("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n", out);
  fputs("<title>verdict replay: candidates</title>\n", out);
  fprintf(out, "<style>%s</style>\n</head>\n<body>\n<main>\n", html_css);
  fprintf(out, "<h1>verdict replay &#8212; %zu candidates against recorded traffic</h1>\n", n);
  fputs("<p class=\"sub\">snapshots <code>", out);
  h_esc(out, infos[0].snapshots_dir);
  fputs("</code>", out);
  if (*when) fprintf(out, " &#183; %s", when);
  fputs("</p>\n<div class=\"cards\">\n", out);
  double sc[SCORE_MAX_SIDES];
  for (size_t k = 0; k < m; k++) sc[k] = cand_side(reps, k)->score;
  for (size_t k = 0; k < m; k++) {
    const char *cls = rank_class(sc, m, k, 0.05);
    fprintf(out, "<div class=\"card %s\"><b class=\"score %s\">%.1f</b><span>", cls, cls, sc[k]);
    h_esc(out, cand_name(infos, k));
    fputs("</span></div>\n", out);
  }
  fputs("</div>\n<h2>Side by side</h2>\n<table><tr><th></th>", out);
  for (size_t k = 0; k < m; k++) {
    fputs("<th>", out);
    h_esc(out, cand_name(infos, k));
    fputs("</th>", out);
  }
  fputs("</tr>\n", out);
  for (int c = 0; c < SCORE_NCAT; c++) {
    double v[SCORE_MAX_SIDES];
    int all = 1;
    for (size_t k = 0; k < m; k++) {
      v[k] = cand_side(reps, k)->cat[c].value;
      all &= cand_side(reps, k)->cat[c].scored;
    }
    fprintf(out, "<tr><td>%s</td>", reps[0].cat[c].name);
    for (size_t k = 0; k < m; k++)
      if (all)
        fprintf(out, "<td class=\"n %s\">%.3f</td>", rank_class(v, m, k, 0.0005), v[k]);
      else
        fputs("<td class=\"n muted\">not scored</td>", out);
    fputs("</tr>\n", out);
  }
  fputs("<tr><th>score</th>", out);
  for (size_t k = 0; k < m; k++)
    fprintf(out, "<td class=\"n %s\"><b>%.1f</b></td>", rank_class(sc, m, k, 0.05), sc[k]);
  fputs("</tr>\n</table>\n", out);
  if (points_aligned(reps, n) && reps[0].cmp.npoints) {
    fputs("<h2>By decision point</h2>\n<table><tr><th>decision point</th>", out);
    for (size_t k = 0; k < m; k++) {
      fputs("<th>", out);
      h_esc(out, cand_name(infos, k));
      fputs("</th>", out);
    }
    fputs("</tr>\n", out);
    for (size_t p = 0; p < reps[0].cmp.npoints; p++) {
      double v[SCORE_MAX_SIDES];
      for (size_t k = 0; k < m; k++) v[k] = cand_point(reps, k, p)->score;
      fputs("<tr><td>", out);
      h_esc(out, reps[0].cmp.points[p].point);
      fputs("</td>", out);
      for (size_t k = 0; k < m; k++)
        fprintf(out, "<td class=\"n %s\">%.1f</td>", rank_class(v, m, k, 0.05), v[k]);
      fputs("</tr>\n", out);
    }
    fputs("</table>\n", out);
  }
  for (size_t i = 0; i < n; i++) {
    fputs("<h2>Changed by action: ", out);
    h_esc(out, infos[i].policy_dir);
    fputs("</h2>\n", out);
    if (reps[i].ntransitions)
      h_rows(out, reps[i].transitions, reps[i].ntransitions, reps[i].changed, "recorded",
             "replayed");
    else
      fputs("<p class=\"muted\">No decision changed its action.</p>\n", out);
  }
  fputs(
      "<footer>verdict replay &#183; docs/replay.md explains every figure on this page"
      "</footer>\n</main>\n</body>\n</html>\n",
      out);
  return ferror(out) ? -1 : 0;
}

/* ---- the pieces, for other reports in the same style (verdict rollout) ---- */

void report_html_open(FILE *out, const char *title, const char *heading) {
  fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n", out);
  fputs("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n", out);
  fprintf(out, "<title>%s</title>\n", title);
  fprintf(out, "<style>%s</style>\n</head>\n<body>\n<main>\n", html_css);
  fprintf(out, "<h1>%s</h1>\n", heading);
}

int report_html_close(FILE *out, const char *footer) {
  fprintf(out, "<footer>%s</footer>\n</main>\n</body>\n</html>\n", footer);
  return ferror(out) ? -1 : 0;
}

void report_html_esc(FILE *out, const char *s) { h_esc(out, s); }

void report_html_card(FILE *out, const char *figure, const char *label, const char *cls) {
  if (cls && *cls)
    h_card_c(out, figure, label, cls);
  else
    h_card(out, figure, label);
}

void report_html_rows(FILE *out, const score_row *rows, size_t n, uint64_t of, const char *from,
                      const char *to) {
  h_rows(out, rows, n, of, from, to);
}

void report_html_dist_table(FILE *out, const char *a, const score_dist *da, const char *b,
                            const score_dist *db) {
  fputs(
      "<table><tr><th></th><th>count</th><th>p50</th><th>p90</th>"
      "<th>p99</th><th>max</th><th>mean</th></tr>\n",
      out);
  h_dist_row(out, a, da);
  h_dist_row(out, b, db);
  fputs("</table>\n", out);
}
