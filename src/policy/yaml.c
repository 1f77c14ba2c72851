/* yaml.c — YAML text to a small tree with positions, through libfyaml.
 *
 * Why events and not libfyaml's document tree: the 0.7 API gives no start
 * position for mappings and sequences, and every policy error must name a
 * line and column. The parser's events carry marks for everything, so this
 * file builds its own tree (ynode) from them, in the caller's arena.
 *
 * Scalars are typed by the YAML 1.2 core schema: only *plain* scalars
 * resolve to null (`null`, `~`, empty), booleans (`true`/`false` in three
 * spellings), integers (decimal, 0o octal, 0x hex) and floats (`1.5`, `1e3`,
 * `.inf`, `.nan`); quoted and block scalars are strings. The standard tags
 * `!!str !!int !!float !!bool !!null` force a type (a value that does not fit
 * is an error); other tags are refused. Anchors and aliases work (an alias
 * shares the anchored node); merge keys (`<<`) are not part of YAML 1.2 and
 * are plain keys here. Duplicate keys in a mapping are errors. Collections
 * nest at most YAML_MAX_DEPTH levels, counted with aliases expanded (an
 * alias adds the levels of what it names), so every later walk over the
 * tree has a bounded recursion.
 *
 * The text must be valid UTF-8 (checked before libfyaml sees it).
 * libfyaml reports syntax errors through a diag object set to collect them
 * silently; they come back here as policy diagnostics with the file name
 * given by the caller (libfyaml only knows an anonymous memory buffer). */
#include <errno.h>
#include <libfyaml.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/utf8.h"
#include "policy/internal.h"

#define MAX_EXPANDED 2000000 /* nodes after alias expansion (billion laughs guard) */

/* ---- positions ---- */

/* YAML's line breaks: LF, CRLF, or a CR alone. */
static int is_break_at(const char *src, size_t len, size_t i) {
  return src[i] == '\n' || (src[i] == '\r' && (i + 1 >= len || src[i + 1] != '\n'));
}

int yaml_column_of(const char *src, size_t pos) {
  size_t start = pos;
  while (start > 0 && src[start - 1] != '\n' && src[start - 1] != '\r') start--;
  int col = 1;
  for (size_t i = start; i < pos; i++)
    if (((unsigned char)src[i] & 0xC0) != 0x80) col++;
  return col;
}

static int line_of(const char *src, size_t pos) {
  int line = 1;
  for (size_t i = 0; i < pos; i++)
    if (is_break_at(src, pos, i)) line++;
  return line;
}

static size_t skip_indent(const char *src, size_t i, size_t end, size_t indent, int block) {
  size_t k = 0;
  while (i < end && (src[i] == ' ' || (!block && src[i] == '\t')) && (!block || k < indent)) {
    i++;
    k++;
  }
  return i;
}

void yaml_scalar_place(const ynode *n, const char *src, size_t len, size_t off, int *line, int *col,
                       size_t *byte_pos) {
  size_t i = n->pos, end = n->end > len ? len : n->end;
  int block = n->style == YS_LITERAL || n->style == YS_FOLDED;
  size_t indent = 0;
  if (block) {
    while (i + indent < end && src[i + indent] == ' ') indent++;
  }
  /* Walk the source and the decoded text side by side: equal bytes advance
   * both; a line break folded into a space advances both; anything else in
   * the source (quotes, escapes, indentation) is skipped. */
  size_t j = 0;
  if (off > n->len) off = n->len;
  while (j < off && i < end) {
    char c = src[i], t = n->text[j];
    if (c == t) {
      i++;
      j++;
      if (c == '\n') i = skip_indent(src, i, end, indent, block);
    } else if (c == '\n' || (c == '\r' && i + 1 < end && src[i + 1] == '\n')) {
      i += c == '\r' ? 2 : 1;
      if (t == ' ') j++; /* folded line break */
      i = skip_indent(src, i, end, indent, block);
    } else {
      i++;
    }
  }
  if (j < off) i = n->pos; /* could not follow (escapes): point at the scalar */
  if (byte_pos) *byte_pos = i;
  *line = n->line;
  for (size_t k = n->pos; k < i; k++)
    if (is_break_at(src, len, k)) (*line)++;
  *col = yaml_column_of(src, i);
}

/* ---- scalar typing (YAML 1.2 core schema) ---- */

static int is_digits(const char *s, size_t n, int (*ok)(int)) {
  if (!n) return 0;
  for (size_t i = 0; i < n; i++)
    if (!ok((unsigned char)s[i])) return 0;
  return 1;
}
static int dec(int c) { return c >= '0' && c <= '9'; }
static int oct(int c) { return c >= '0' && c <= '7'; }
static int hex(int c) { return dec(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

static int one_of(const char *s, size_t n, const char *const *words) {
  for (; *words; words++)
    if (strlen(*words) == n && memcmp(s, *words, n) == 0) return 1;
  return 0;
}

static const char *const NULLS[] = {"null", "Null", "NULL", "~", NULL};
static const char *const TRUES[] = {"true", "True", "TRUE", NULL};
static const char *const FALSES[] = {"false", "False", "FALSE", NULL};
static const char *const INFS[] = {".inf", ".Inf", ".INF", NULL};
static const char *const NANS[] = {".nan", ".NaN", ".NAN", NULL};

/* Integer forms: [-+]?[0-9]+, 0o[0-7]+, 0x[0-9a-fA-F]+. Returns 1 and sets
 * *v (int, or uint when it only fits uint64), 0 when not an integer, -1
 * when it is one but out of range. */
static int parse_int(const char *s, size_t n, value *v) {
  char buf[80];
  if (n == 0 || n >= sizeof buf) return 0;
  int base = 10;
  size_t start = 0;
  int neg = 0;
  if (n > 2 && s[0] == '0' && s[1] == 'o' && is_digits(s + 2, n - 2, oct)) {
    base = 8;
    start = 2;
  } else if (n > 2 && s[0] == '0' && s[1] == 'x' && is_digits(s + 2, n - 2, hex)) {
    base = 16;
    start = 2;
  } else {
    if (s[0] == '-' || s[0] == '+') {
      neg = s[0] == '-';
      start = 1;
    }
    if (!is_digits(s + start, n - start, dec)) return 0;
  }
  memcpy(buf, s + start, n - start);
  buf[n - start] = 0;
  errno = 0;
  unsigned long long u = strtoull(buf, NULL, base);
  if (errno == ERANGE) return -1;
  if (neg) {
    if (u > 9223372036854775808ull) return -1;
    *v = value_int(u == 9223372036854775808ull ? INT64_MIN : -(int64_t)u);
  } else if (u > INT64_MAX) {
    *v = value_uint(u);
  } else {
    *v = value_int((int64_t)u);
  }
  return 1;
}

/* [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?, .inf, .nan */
static int parse_float(const char *s, size_t n, value *v) {
  size_t i = 0;
  int sign = 1;
  if (i < n && (s[i] == '-' || s[i] == '+')) {
    sign = s[i] == '-' ? -1 : 1;
    i++;
  }
  if (one_of(s + i, n - i, INFS)) {
    *v = value_double(sign * INFINITY);
    return 1;
  }
  if (i == 0 && one_of(s, n, NANS)) {
    *v = value_double(NAN);
    return 1;
  }
  size_t digits = 0;
  while (i < n && dec((unsigned char)s[i])) i++, digits++;
  if (i < n && s[i] == '.') {
    i++;
    while (i < n && dec((unsigned char)s[i])) i++, digits++;
  }
  if (!digits) return 0;
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    i++;
    if (i < n && (s[i] == '-' || s[i] == '+')) i++;
    if (!is_digits(s + i, n - i, dec)) return 0;
    i = n;
  }
  if (i != n) return 0;
  char buf[128];
  if (n >= sizeof buf) return 0;
  memcpy(buf, s, n);
  buf[n] = 0;
  *v = value_double(strtod(buf, NULL));
  return 1;
}

typedef enum ytag { T_NONE, T_STR, T_INT, T_FLOAT, T_BOOL, T_NULL, T_MAP, T_SEQ, T_BANG } ytag;

static ytag tag_of(const char *t, size_t n) {
  static const struct {
    const char *name;
    ytag tag;
  } tags[] = {{"tag:yaml.org,2002:str", T_STR},     {"tag:yaml.org,2002:int", T_INT},
              {"tag:yaml.org,2002:float", T_FLOAT}, {"tag:yaml.org,2002:bool", T_BOOL},
              {"tag:yaml.org,2002:null", T_NULL},   {"tag:yaml.org,2002:map", T_MAP},
              {"tag:yaml.org,2002:seq", T_SEQ},     {"!", T_BANG}};
  for (size_t i = 0; i < sizeof tags / sizeof tags[0]; i++)
    if (strlen(tags[i].name) == n && memcmp(tags[i].name, t, n) == 0) return tags[i].tag;
  return T_NONE;
}

/* Types a scalar. Returns NULL, or a message when the tag does not fit. */
static const char *type_scalar(ynode *y, ytag tag, int plain) {
  const char *s = y->text;
  size_t n = y->len;
  y->v = value_str(s, (uint32_t)n);
  if (tag == T_STR || tag == T_BANG) return NULL;
  if (!plain && tag == T_NONE) return NULL;
  if (tag == T_NONE || tag == T_NULL) {
    if (n == 0 || one_of(s, n, NULLS)) {
      y->v = value_null();
      return NULL;
    }
    if (tag == T_NULL) return "!!null needs null, ~ or nothing";
  }
  if (tag == T_NONE || tag == T_BOOL) {
    if (one_of(s, n, TRUES)) {
      y->v = value_bool(true);
      return NULL;
    }
    if (one_of(s, n, FALSES)) {
      y->v = value_bool(false);
      return NULL;
    }
    if (tag == T_BOOL) return "!!bool needs true or false";
  }
  if (tag == T_NONE || tag == T_INT || tag == T_FLOAT) {
    value v;
    int r = parse_int(s, n, &v);
    if (r < 0) return "integer out of range (64 bits)";
    if (r > 0) {
      if (tag == T_FLOAT) v = value_double(v.kind == V_UINT ? (double)v.u : (double)v.i);
      y->v = v;
      return NULL;
    }
    if (tag == T_INT) return "!!int needs an integer";
    if (parse_float(s, n, &v)) {
      y->v = v;
      return NULL;
    }
    if (tag == T_FLOAT) return "!!float needs a number";
  }
  return NULL; /* a plain string */
}

/* ---- building the tree from events ---- */

typedef struct anchor {
  const char *name;
  size_t len;
  ynode *node;
  int done; /* the anchored collection has ended (aliasing it is safe) */
} anchor;

typedef struct frame {
  ynode *node;
  ynode **kids;
  uint32_t n, cap;
  anchor *anc; /* the frame's own anchor, if any (index into anchors) */
  size_t anc_index;
  int has_anchor;
} frame;

typedef struct builder {
  arena *a;
  const char *file;
  const char *src;
  size_t len;
  policy_diags *d;
  frame *stack;
  uint32_t depth, cap;
  anchor *anchors;
  size_t nanchors, anchors_cap;
  ynode *root;
  int docs;
  int failed; /* stop building: the tree is broken */
  int bad;    /* a value problem was reported: finish, then fail */
  size_t expanded;
  size_t last_end; /* where the previous event ended (empty scalars have no mark) */
  size_t col_pos;  /* column cache: nodes come in source order, so the column of */
  int col_col;     /* the next one is found from the last one's in linear time  */
  int col_valid;   /* (one-line JSON documents from the version store) */
} builder;

/* yaml_column_of(b->src, pos), remembering the last answer: when pos lies
 * after the cached place on the same line, only the bytes between are read. */
static int column_at(builder *b, size_t pos) {
  if (b->col_valid && pos >= b->col_pos) {
    int col = b->col_col;
    size_t i = b->col_pos;
    for (; i < pos; i++) {
      char c = b->src[i];
      if (c == '\n' || c == '\r') break;
      if (((unsigned char)c & 0xC0) != 0x80) col++;
    }
    if (i == pos) {
      b->col_pos = pos;
      b->col_col = col;
      return col;
    }
  }
  int col = yaml_column_of(b->src, pos);
  b->col_pos = pos;
  b->col_col = col;
  b->col_valid = 1;
  return col;
}

static void berr(builder *b, size_t pos, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void berr(builder *b, size_t pos, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  diag_add(b->d, DIAG_ERROR, b->file, line_of(b->src, pos), yaml_column_of(b->src, pos), "", "%s",
           msg);
  b->failed = 1;
}

/* A problem with a value: reported, and the tree is still built so that
 * later problems are found too. */
static void bsoft(builder *b, size_t pos, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void bsoft(builder *b, size_t pos, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  diag_add(b->d, DIAG_ERROR, b->file, line_of(b->src, pos), yaml_column_of(b->src, pos), "", "%s",
           msg);
  b->bad = 1;
}

static char src_at(const builder *b, size_t i) { return i < b->len ? b->src[i] : 0; }

static ynode *new_node(builder *b, ykind kind, const struct fy_mark *m) {
  ynode *y = arena_zalloc(b->a, sizeof *y);
  if (!y) return NULL;
  y->kind = (uint8_t)kind;
  y->pos = m && m->input_pos <= b->len ? m->input_pos : 0;
  y->line = m ? m->line + 1 : line_of(b->src, y->pos);
  y->col = column_at(b, y->pos);
  return y;
}

static int add_kid(builder *b, ynode *kid) {
  if (b->depth == 0) {
    if (b->root) {
      berr(b, kid->pos, "more than one value at the top of the document");
      return -1;
    }
    b->root = kid;
    return 0;
  }
  frame *f = &b->stack[b->depth - 1];
  if (f->n == f->cap) {
    uint32_t cap = f->cap ? f->cap * 2 : 8;
    ynode **k = realloc(f->kids, cap * sizeof *k);
    if (!k) return -1;
    f->kids = k;
    f->cap = cap;
  }
  f->kids[f->n++] = kid;
  return 0;
}

static int add_anchor(builder *b, struct fy_token *t, ynode *node, int done) {
  if (!t) return 0;
  size_t n;
  const char *s = fy_token_get_text(t, &n);
  if (!s) return -1;
  if (b->nanchors == b->anchors_cap) {
    size_t cap = b->anchors_cap ? b->anchors_cap * 2 : 8;
    anchor *p = realloc(b->anchors, cap * sizeof *p);
    if (!p) return -1;
    b->anchors = p;
    b->anchors_cap = cap;
  }
  char *name = arena_strndup(b->a, s, n);
  if (!name) return -1;
  b->anchors[b->nanchors++] = (anchor){name, n, node, done};
  return 0;
}

static uint64_t expanded_size(const ynode *y) {
  /* Stored in .v.u for collections once they end (their v is unused). */
  return y->kind == Y_SCALAR ? 1 : y->v.u;
}

static int tag_check(builder *b, struct fy_token *tag, ynode *y, ytag *out) {
  *out = T_NONE;
  if (!tag) return 0;
  size_t n;
  const char *t = fy_token_get_text(tag, &n);
  ytag tg = t ? tag_of(t, n) : T_NONE;
  if (tg == T_NONE) {
    bsoft(b, y->pos, "unsupported YAML tag '%.*s' (only !!str, !!int, !!float, !!bool, !!null)",
          (int)(t ? n : 0), t ? t : "");
    return -1;
  }
  if ((tg == T_MAP && y->kind != Y_MAP) || (tg == T_SEQ && y->kind != Y_SEQ) ||
      (y->kind != Y_SCALAR && tg != T_MAP && tg != T_SEQ && tg != T_BANG)) {
    bsoft(b, y->pos, "YAML tag '%.*s' does not fit this %s", (int)n, t,
          y->kind == Y_MAP   ? "mapping"
          : y->kind == Y_SEQ ? "sequence"
                             : "scalar");
    return -1;
  }
  *out = tg;
  return 0;
}

static int same_key(const ynode *a, const ynode *b) {
  return a->kind == Y_SCALAR && a->len == b->len && memcmp(a->text, b->text, a->len) == 0;
}

static uint32_t key_hash(const ynode *k) {
  uint32_t h = 2166136261u; /* FNV-1a */
  for (size_t i = 0; i < k->len; i++) h = (h ^ (unsigned char)k->text[i]) * 16777619u;
  return h;
}

/* Every scalar key that repeats one before it, reported at the repeat with
 * the first one's line. Pairs for small maps; above that, the first key of
 * each text in a hash table, so that a map of 200,000 keys costs a probe a
 * key rather than 20 billion comparisons (95 s). */
static void check_duplicates(builder *b, ynode *m) {
  if (m->n <= 16) {
    for (uint32_t i = 1; i < m->n; i++) {
      const ynode *k = m->kids[2 * i];
      if (k->kind != Y_SCALAR) continue;
      for (uint32_t j = 0; j < i; j++)
        if (same_key(m->kids[2 * j], k)) {
          bsoft(b, k->pos, "duplicate key '%s' (first at line %d)", k->text, m->kids[2 * j]->line);
          break;
        }
    }
    return;
  }
  uint32_t cap = 32;
  while (cap < 2 * (uint64_t)m->n) cap *= 2;
  uint32_t *slot = calloc(cap, sizeof *slot); /* key index + 1; 0: empty */
  if (!slot) {
    bsoft(b, m->pos, "out of memory");
    return;
  }
  for (uint32_t i = 0; i < m->n; i++) {
    const ynode *k = m->kids[2 * i];
    if (k->kind != Y_SCALAR) continue;
    for (uint32_t h = key_hash(k) & (cap - 1);; h = (h + 1) & (cap - 1)) {
      if (!slot[h]) {
        slot[h] = i + 1;
        break;
      }
      const ynode *o = m->kids[2 * (slot[h] - 1)];
      if (same_key(o, k)) {
        bsoft(b, k->pos, "duplicate key '%s' (first at line %d)", k->text, o->line);
        break;
      }
    }
  }
  free(slot);
}

static int on_event(builder *b, struct fy_event *e) {
  const struct fy_mark *m = fy_event_start_mark(e);
  const struct fy_mark *me = fy_event_end_mark(e);
  switch (e->type) {
    case FYET_DOCUMENT_START:
      if (++b->docs > 1) {
        berr(b, m ? m->input_pos : 0, "a strategy file holds one YAML document; this is a second");
        return -1;
      }
      return 0;
    case FYET_SCALAR: {
      struct fy_mark guess;
      if (!m) {
        /* An empty scalar (`if:` with nothing after it) has no mark: place it
         * just after what came before, past the ':' and spaces. */
        size_t p = b->last_end;
        if (src_at(b, p) == ':') p++;
        while (src_at(b, p) == ' ') p++;
        guess.input_pos = p;
        guess.line = line_of(b->src, p) - 1;
        guess.column = 0;
        m = me = &guess;
      }
      ynode *y = new_node(b, Y_SCALAR, m);
      if (!y) return -1;
      size_t n;
      const char *t = fy_token_get_text(e->scalar.value, &n);
      if (!t) {
        t = "";
        n = 0;
      }
      y->text = arena_strndup(b->a, t, n);
      if (!y->text) return -1;
      y->len = (uint32_t)n;
      y->end = me && me->input_pos <= b->len ? me->input_pos : y->pos;
      switch (fy_token_scalar_style(e->scalar.value)) {
        case FYSS_SINGLE_QUOTED:
          y->style = YS_SINGLE;
          break;
        case FYSS_DOUBLE_QUOTED:
          y->style = YS_DOUBLE;
          break;
        case FYSS_LITERAL:
          y->style = YS_LITERAL;
          break;
        case FYSS_FOLDED:
          y->style = YS_FOLDED;
          break;
        default:
          y->style = YS_PLAIN;
      }
      if (y->style == YS_LITERAL || y->style == YS_FOLDED) {
        /* the mark is at the start of the first content line: name the
         * first character instead (pos stays, yaml_scalar_place needs it) */
        size_t i = y->pos;
        while (i < y->end && src_at(b, i) == ' ') i++;
        if (i < y->end && src_at(b, i) != '\n') y->col = yaml_column_of(b->src, i);
      }
      ytag tg;
      if (tag_check(b, e->scalar.tag, y, &tg) == 0) {
        const char *bad = type_scalar(y, tg, y->style == YS_PLAIN);
        if (bad) bsoft(b, y->pos, "%s: '%s'", bad, y->text);
      }
      if (add_anchor(b, e->scalar.anchor, y, 1)) return -1;
      b->expanded++;
      return add_kid(b, y);
    }
    case FYET_ALIAS: {
      size_t n;
      const char *t = fy_token_get_text(e->alias.anchor, &n);
      size_t pos = m ? m->input_pos : 0;
      if (pos > 0 && src_at(b, pos - 1) == '*') pos--; /* the mark is past the '*' */
      for (size_t i = b->nanchors; t && i-- > 0;) {
        anchor *an = &b->anchors[i];
        if (an->len != n || memcmp(an->name, t, n) != 0) continue;
        if (!an->done) {
          berr(b, pos, "alias '*%.*s' refers to a collection that contains it", (int)n, t);
          return -1;
        }
        if (b->depth + an->node->height > YAML_MAX_DEPTH) {
          berr(b, pos,
               "nesting deeper than the limit of %d levels once alias '*%.*s' is expanded (it "
               "holds %u levels, here under %u)",
               YAML_MAX_DEPTH, (int)n, t, (unsigned)an->node->height, (unsigned)b->depth);
          return -1;
        }
        b->expanded += expanded_size(an->node);
        if (b->expanded > MAX_EXPANDED) {
          berr(b, pos, "too many nodes once aliases are expanded (more than %d)", MAX_EXPANDED);
          return -1;
        }
        return add_kid(b, an->node);
      }
      berr(b, pos, "unknown alias '*%.*s'", (int)(t ? n : 0), t ? t : "");
      return -1;
    }
    case FYET_SEQUENCE_START:
    case FYET_MAPPING_START: {
      int is_map = e->type == FYET_MAPPING_START;
      ynode *y = new_node(b, is_map ? Y_MAP : Y_SEQ, m);
      if (!y) return -1;
      if (b->depth >= YAML_MAX_DEPTH) {
        /* refused here, at the bracket, so that nothing recurses deeper
         * later (and the rest of a hostile file is not even read) */
        berr(b, y->pos, "nesting deeper than the limit of %d levels", YAML_MAX_DEPTH);
        return -1;
      }
      struct fy_token *st =
          is_map ? e->mapping_start.mapping_start : e->sequence_start.sequence_start;
      enum fy_token_type tt = st ? fy_token_get_type(st) : FYTT_NONE;
      y->style =
          (tt == FYTT_FLOW_MAPPING_START || tt == FYTT_FLOW_SEQUENCE_START) ? YS_FLOW : YS_BLOCK;
      ytag tg;
      struct fy_token *tag = is_map ? e->mapping_start.tag : e->sequence_start.tag;
      tag_check(b, tag, y, &tg); /* a bad tag is reported; the node is still built */
      if (b->depth == b->cap) {
        uint32_t cap = b->cap ? b->cap * 2 : 16;
        frame *p = realloc(b->stack, cap * sizeof *p);
        if (!p) return -1;
        b->stack = p;
        b->cap = cap;
      }
      frame *f = &b->stack[b->depth++];
      memset(f, 0, sizeof *f);
      f->node = y;
      struct fy_token *anc = is_map ? e->mapping_start.anchor : e->sequence_start.anchor;
      if (anc) {
        if (add_anchor(b, anc, y, 0)) return -1;
        f->has_anchor = 1;
        f->anc_index = b->nanchors - 1;
      }
      return 0;
    }
    case FYET_SEQUENCE_END:
    case FYET_MAPPING_END: {
      if (b->depth == 0) return -1;
      frame *f = &b->stack[--b->depth];
      ynode *y = f->node;
      y->end = me && me->input_pos <= b->len ? me->input_pos : y->pos;
      if (f->n) {
        y->kids = arena_memdup(b->a, f->kids, f->n * sizeof *f->kids);
        if (!y->kids) {
          free(f->kids);
          return -1;
        }
      }
      uint64_t size = 1;
      uint16_t below = 0;
      for (uint32_t i = 0; i < f->n; i++) {
        size += expanded_size(f->kids[i]);
        if (f->kids[i]->height > below) below = f->kids[i]->height;
      }
      y->v.u = size;
      y->height = (uint16_t)(below + 1); /* at most YAML_MAX_DEPTH: checked on the way in */
      free(f->kids);
      if (y->kind == Y_MAP) {
        y->n = f->n / 2;
        for (uint32_t i = 0; i < y->n; i++)
          if (y->kids[2 * i]->kind != Y_SCALAR)
            bsoft(b, y->kids[2 * i]->pos, "mapping keys must be plain names, not collections");
        check_duplicates(b, y);
      } else {
        y->n = f->n;
      }
      if (f->has_anchor) b->anchors[f->anc_index].done = 1;
      return add_kid(b, y);
    }
    default:
      return 0;
  }
}

/* ---- flow nesting, checked in the text before libfyaml reads it ---- */

/* libfyaml reads a flow collection nested in another ([[...]], or one that
 * starts a line) to its end before it hands out its first event, to learn
 * whether a ':' after it makes it a key, and holds a token and more per
 * bracket meanwhile: 200,000 nested brackets cost it a second and 100 MB,
 * a 16 MiB file of them gigabytes, before the builder could refuse the
 * 257th. So the text is scanned first for flow brackets, the way YAML's
 * scanner reads them (the YAML 1.2 rules, as libyaml implements them):
 * plain, quoted and block scalars and comments are passed over, block
 * scalars and multi-line plain scalars by their indentation (a stack of
 * block indents, as the scanner keeps it). Where the two readings could
 * differ, this one counts the bracket: an error here is at worst a false
 * alarm in an odd file, never a deep collection let through. Returns the
 * offset of the first bracket past YAML_MAX_DEPTH levels of flow, or
 * SIZE_MAX. Linear in the text; nothing is allocated (the indent stack
 * has room for YAML_MAX_DEPTH levels, and the builder refuses more). */
typedef struct fscan {
  const char *s;
  size_t n, i;
  size_t col_pos, col_ls;      /* the last column asked: its offset and its line's start */
  int ind[2 * YAML_MAX_DEPTH]; /* block indents; ind[0] = -1 */
  int top;
} fscan;

static int fs_blank(char c) { return c == ' ' || c == '\t'; }
static int fs_break(char c) { return c == '\n' || c == '\r'; }
static int fs_flowind(char c) { return c == ',' || c == '[' || c == ']' || c == '{' || c == '}'; }
static char fs_at(const fscan *f, size_t i) { return i < f->n ? f->s[i] : '\0'; }
/* blank, line break or the end */
static int fs_sep(const fscan *f, size_t i) {
  char c = fs_at(f, i);
  return c == '\0' || fs_blank(c) || fs_break(c);
}

/* Columns are asked in increasing places: found from the last one. */
static int fs_column(fscan *f, size_t i) {
  if (i < f->col_pos) {
    f->col_pos = 0;
    f->col_ls = 0;
  }
  for (size_t k = f->col_pos; k < i; k++)
    if (fs_break(f->s[k])) f->col_ls = k + 1;
  f->col_pos = i;
  return (int)(i - f->col_ls);
}

/* 0, or -1 when blocks nest past what the stack holds (the builder refuses
 * them at YAML_MAX_DEPTH, before anything deeper is read). */
static int fs_push(fscan *f, int col) {
  if (col <= f->ind[f->top]) return 0;
  if (f->top + 1 >= (int)(sizeof f->ind / sizeof f->ind[0])) return -1;
  f->ind[++f->top] = col;
  return 0;
}

static void fs_skip_line(fscan *f) {
  while (f->i < f->n && !fs_break(f->s[f->i])) f->i++;
}

static void fs_quoted(fscan *f) {
  char q = f->s[f->i++];
  while (f->i < f->n) {
    char c = f->s[f->i];
    if (q == '"' && c == '\\') {
      f->i += 2;
    } else if (c == q) {
      f->i++;
      if (q == '\'' && fs_at(f, f->i) == '\'') {
        f->i++; /* '' is a quote inside */
        continue;
      }
      return;
    } else {
      f->i++;
    }
  }
}

/* A block scalar (| or >) from its indicator: the header line, then every
 * line its indentation keeps (libyaml's scan_block_scalar). */
static void fs_block_scalar(fscan *f) {
  int parent = f->ind[f->top], explicit_ind = 0;
  f->i++;
  while (f->i < f->n && !fs_break(f->s[f->i])) {
    char c = f->s[f->i];
    if (c >= '1' && c <= '9' && !explicit_ind) explicit_ind = c - '0';
    if (c == '#' && fs_blank(f->s[f->i - 1])) break;
    f->i++;
  }
  fs_skip_line(f);
  int indent = explicit_ind ? (parent >= 0 ? parent + explicit_ind : explicit_ind) : 0;
  if (!indent) { /* auto: the first line with content, at least parent + 1 */
    size_t k = f->i;
    int max = 0;
    while (k < f->n) {
      if (fs_break(f->s[k])) k++;
      size_t b = k;
      while (k < f->n && f->s[k] == ' ') k++;
      if ((int)(k - b) > max) max = (int)(k - b);
      if (k < f->n && !fs_break(f->s[k])) break;
    }
    indent = max;
    if (indent < parent + 1) indent = parent + 1;
    if (indent < 1) indent = 1;
  }
  /* lines indented at least `indent`, and empty ones, are content */
  while (f->i < f->n) {
    size_t k = f->i;
    if (fs_break(f->s[k])) k += (f->s[k] == '\r' && fs_at(f, k + 1) == '\n') ? 2 : 1;
    size_t b = k;
    while (k < f->n && f->s[k] == ' ') k++;
    if (k < f->n && !fs_break(f->s[k]) && (int)(k - b) < indent) return;
    f->i = k;
    fs_skip_line(f);
  }
}

/* A plain scalar outside flow collections: to ': ', ' #' or the end of its
 * line, and on over the following lines indented deeper than the block
 * (libyaml's scan_plain_scalar). */
static void fs_plain_block(fscan *f) {
  for (;;) {
    while (f->i < f->n && !fs_break(f->s[f->i])) {
      char c = f->s[f->i];
      if (c == ':' && fs_sep(f, f->i + 1)) return;
      if (c == '#' && f->i > 0 && fs_blank(f->s[f->i - 1])) return;
      f->i++;
    }
    /* a continuation line: more indented than the block, with content that
     * is neither a comment nor a document marker */
    size_t k = f->i;
    while (k < f->n && (fs_break(f->s[k]) || fs_blank(f->s[k]))) k++;
    if (k >= f->n || f->s[k] == '#' || fs_column(f, k) <= f->ind[f->top]) return;
    if (fs_column(f, k) == 0 && k + 3 <= f->n &&
        (memcmp(f->s + k, "---", 3) == 0 || memcmp(f->s + k, "...", 3) == 0) && fs_sep(f, k + 3))
      return;
    f->i = k;
  }
}

/* A plain scalar inside a flow collection: up to a flow indicator, ': ' (or
 * ':' before an indicator), or ' #', across line breaks. */
static void fs_plain_flow(fscan *f) {
  while (f->i < f->n) {
    char c = f->s[f->i];
    if (fs_flowind(c)) return;
    if (c == ':' && (fs_sep(f, f->i + 1) || fs_flowind(fs_at(f, f->i + 1)))) return;
    if (c == '#' && f->i > 0 && (fs_blank(f->s[f->i - 1]) || fs_break(f->s[f->i - 1]))) return;
    f->i++;
  }
}

static size_t flow_too_deep(const char *s, size_t n) {
  fscan scan, *f = &scan;
  f->s = s;
  f->n = n;
  f->i = 0;
  f->col_pos = f->col_ls = 0;
  f->top = 0;
  f->ind[0] = -1;
  int flow = 0, json_like = 0, line_first = 1, key_col = -1;
  size_t at = SIZE_MAX;
  while (f->i < n) {
    char c = s[f->i];
    if (fs_break(c)) {
      f->i++;
      line_first = 1;
      continue;
    }
    if (fs_blank(c) || (c == '\xEF' && f->i == 0 && n >= 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0)) {
      f->i += fs_blank(c) ? 1 : 3;
      continue;
    }
    int col = fs_column(f, f->i);
    if (c == '#' && (f->i == 0 || fs_blank(s[f->i - 1]) || fs_break(s[f->i - 1]))) {
      fs_skip_line(f);
      continue;
    }
    if (!flow) {
      if (line_first) {
        line_first = 0;
        while (f->top > 0 && f->ind[f->top] > col) f->top--;
        key_col = col;
        if (col == 0 &&
            (c == '%' || ((c == '-' || c == '.') && f->i + 3 <= n &&
                          (memcmp(s + f->i, "---", 3) == 0 || memcmp(s + f->i, "...", 3) == 0) &&
                          fs_sep(f, f->i + 3)))) {
          if (c == '%' || c == '.') {
            fs_skip_line(f);
          } else {
            f->top = 0;
            f->i += 3;
            key_col = -1;
          }
          continue;
        }
      }
      if ((c == '-' || c == '?' || c == ':') && fs_sep(f, f->i + 1)) {
        if (fs_push(f, c == ':' ? key_col : col)) break;
        f->i++;
        key_col = -2; /* the next token starts a node (its column is taken then) */
        continue;
      }
      if (key_col == -2) key_col = col;
      json_like = 0;
      switch (c) {
        case '[':
        case '{':
          flow = 1;
          f->i++;
          continue;
        case ']':
        case '}':
        case ',':
          f->i++;
          continue;
        case '"':
        case '\'':
          fs_quoted(f);
          continue;
        case '|':
        case '>':
          fs_block_scalar(f);
          line_first = 1;
          continue;
        case '&':
        case '!':
        case '*':
          while (f->i < n && !fs_sep(f, f->i) && !fs_flowind(s[f->i])) f->i++;
          if (c != '*') key_col = -2;
          continue;
        default:
          fs_plain_block(f);
          continue;
      }
    }
    /* inside flow collections: line starts do not matter */
    line_first = 0;
    if (c == '[' || c == '{') {
      if (++flow > YAML_MAX_DEPTH) {
        at = f->i;
        break;
      }
      f->i++;
      json_like = 0;
    } else if (c == ']' || c == '}') {
      flow--;
      f->i++;
      json_like = 1;
    } else if (c == ',') {
      f->i++;
      json_like = 0;
    } else if ((c == '?' || c == ':' || c == '-') &&
               (fs_sep(f, f->i + 1) || fs_flowind(fs_at(f, f->i + 1)) || (c == ':' && json_like))) {
      f->i++;
      json_like = 0;
    } else if (c == '"' || c == '\'') {
      fs_quoted(f);
      json_like = 1;
    } else if (c == '&' || c == '!' || c == '*') {
      while (f->i < n && !fs_sep(f, f->i) && !fs_flowind(s[f->i])) f->i++;
      json_like = 0;
    } else {
      f->i++; /* the first character, whatever it is (an indicator can start a plain scalar) */
      fs_plain_flow(f);
      json_like = 0;
    }
  }
  return at;
}

static void out_quiet(struct fy_diag *diag, void *user, const char *buf, size_t len) {}

int yaml_load(arena *a, const char *file, const char *src, size_t len, ynode **root,
              policy_diags *d) {
  *root = NULL;
  /* YAML text is Unicode, and policies are UTF-8. Checked here first also
   * because libfyaml 0.7.12 loops forever on some invalid bytes (after a
   * '%' at the start of a line, for one). */
  size_t bad = utf8_validate(src, len, NULL);
  if (bad < len) {
    diag_add(d, DIAG_ERROR, file, line_of(src, bad), yaml_column_of(src, bad), "",
             "not valid UTF-8 (byte 0x%02X): a policy file is UTF-8 text", (unsigned char)src[bad]);
    return -1;
  }
  size_t deep = flow_too_deep(src, len);
  if (deep != SIZE_MAX) {
    diag_add(d, DIAG_ERROR, file, line_of(src, deep), yaml_column_of(src, deep), "",
             "nesting deeper than the limit of %d levels", YAML_MAX_DEPTH);
    return -1;
  }
  builder b;
  memset(&b, 0, sizeof b);
  b.a = a;
  b.file = file;
  b.src = src;
  b.len = len;
  b.d = d;

  struct fy_diag_cfg dc;
  fy_diag_cfg_default(&dc);
  dc.fp = NULL;
  dc.output_fn = out_quiet;
  dc.colorize = false;
  struct fy_diag *diag = fy_diag_create(&dc);
  if (!diag) {
    diag_add(d, DIAG_ERROR, file, 0, 0, "", "out of memory reading YAML");
    return -1;
  }
  fy_diag_set_collect_errors(diag, true);
  struct fy_parse_cfg cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.flags = FYPCF_QUIET | FYPCF_DEFAULT_VERSION_1_2 | FYPCF_JSON_NONE;
  cfg.diag = diag;
  struct fy_parser *p = fy_parser_create(&cfg);
  int oom = 0;
  if (!p || fy_parser_set_string(p, src, len)) {
    oom = 1;
  } else {
    struct fy_event *e;
    while ((e = fy_parser_parse(p))) {
      int r = b.failed ? 0 : on_event(&b, e);
      const struct fy_mark *end = fy_event_end_mark(e);
      if (end && end->input_pos <= len) b.last_end = end->input_pos;
      fy_parser_event_free(p, e);
      if (r) {
        if (!b.failed) oom = 1;
        break;
      }
    }
  }
  int syntax = 0;
  void *it = NULL;
  struct fy_diag_error *de;
  while ((de = fy_diag_errors_iterate(diag, &it))) {
    if (de->type < FYET_ERROR) continue;
    syntax = 1;
    int line = de->line > 0 ? de->line : 1, col = de->column > 0 ? de->column : 1;
    if (line > line_of(src, len)) { /* libfyaml may count past the end: name the end */
      line = line_of(src, len);
      col = yaml_column_of(src, len);
    }
    diag_add(d, DIAG_ERROR, file, line, col, "", "YAML syntax: %s", de->msg ? de->msg : "error");
  }
  if (p && !syntax && fy_parser_get_stream_error(p)) {
    syntax = 1;
    diag_add(d, DIAG_ERROR, file, 0, 0, "", "YAML syntax error");
  }
  for (uint32_t i = 0; i < b.depth; i++) free(b.stack[i].kids);
  free(b.stack);
  free(b.anchors);
  if (p) fy_parser_destroy(p);
  fy_diag_destroy(diag);
  if (oom && !syntax && !b.failed)
    diag_add(d, DIAG_ERROR, file, 0, 0, "", "out of memory reading YAML");
  if (syntax || b.failed || b.bad || oom) return -1;
  if (!b.root) {
    diag_add(d, DIAG_ERROR, file, 1, 1, "",
             "the file holds no YAML document (expected a strategy)");
    return -1;
  }
  *root = b.root;
  return 0;
}

static int is_ascii(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)s[i] >= 0x80) return 0;
  return 1;
}

int yaml_to_value(arena *a, const ynode *n, value *out) {
  switch (n->kind) {
    case Y_SCALAR:
      *out = n->v;
      /* the text lives as long as the tree; copy strings into a */
      if (n->v.kind == V_STRING) {
        char *s = arena_strndup(a, n->text, n->len);
        if (!s) return -1;
        *out = value_str(s, n->len);
        if (is_ascii(s, n->len)) out->flags |= VF_ASCII;
      }
      return 0;
    case Y_SEQ: {
      value *items = n->n ? arena_alloc(a, n->n * sizeof *items) : NULL;
      if (n->n && !items) return -1;
      for (uint32_t i = 0; i < n->n; i++)
        if (yaml_to_value(a, n->kids[i], &items[i])) return -1;
      *out = value_list(items, n->n);
      return 0;
    }
    case Y_MAP: {
      map_entry *e = n->n ? arena_alloc(a, n->n * sizeof *e) : NULL;
      if (n->n && !e) return -1;
      for (uint32_t i = 0; i < n->n; i++) {
        const ynode *k = n->kids[2 * i];
        char *s = arena_strndup(a, k->text ? k->text : "", k->len);
        if (!s) return -1;
        e[i].key = value_str(s, k->len);
        if (is_ascii(s, k->len)) e[i].key.flags |= VF_ASCII;
        if (yaml_to_value(a, n->kids[2 * i + 1], &e[i].val)) return -1;
      }
      *out = value_map(e, n->n);
      return 0;
    }
  }
  return -1;
}
