/* internal.h — what the files of src/policy/ share and nobody else needs.
 *
 *   yaml.c     YAML text -> a tree of ynodes with positions (libfyaml events)
 *   diag.c     collecting and printing diagnostics, "did you mean" hints
 *   analyze.c  walks over expression ASTs: free names, `&&` parts, renderings
 *   strategy.c one YAML document -> one compiled strategy (keys, types, exprs)
 *   lint.c     warnings for `verdict check` (shadowed rules, unknown functions)
 *   schema.c   the `input:` schema; undefined names and type errors
 *   index.c    the rule index (hash dispatch and prefix tries)
 *   version.c  canonical JSON, SHA-256 versions, the content-addressed store
 *   bundle.c   folders of files -> a bundle; lookups; freeing */
#ifndef VD_POLICY_INTERNAL_H
#define VD_POLICY_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"
#include "core/value.h"
#include "expr/ast.h"
#include "policy/policy.h"

/* ---- yaml.c ---- */
typedef enum ykind { Y_SCALAR, Y_SEQ, Y_MAP } ykind;
typedef enum ystyle {
  YS_PLAIN,
  YS_SINGLE,
  YS_DOUBLE,
  YS_LITERAL,
  YS_FOLDED,
  YS_BLOCK, /* block collection */
  YS_FLOW   /* flow collection */
} ystyle;

/* How deep collections may nest in a policy file (the root mapping is level
 * 1), aliases expanded: every walk over a tree (the canonical JSON, values,
 * schemas, the parsed cache) recurses, and this bounds it. */
#define YAML_MAX_DEPTH 256

typedef struct ynode ynode;
struct ynode {
  uint8_t kind;     /* ykind */
  uint8_t style;    /* ystyle */
  uint16_t height;  /* collections: levels in and below it (1 for a flat one); scalars 0 */
  int line, col;    /* 1-based, where the node starts (col in code points) */
  size_t pos;       /* byte offset of the start in the source */
  size_t end;       /* byte offset just past the node */
  const char *text; /* scalars: the decoded text (NUL-terminated) */
  uint32_t len;
  value v;      /* scalars: the value per the YAML 1.2 core schema and tags */
  ynode **kids; /* sequences: items; maps: key0, val0, key1, val1, ... */
  uint32_t n;   /* sequences: items; maps: pairs */
};

/* Parses one YAML document from src into a tree in a. Syntax errors become
 * diagnostics naming file:line:col, and so does nesting past YAML_MAX_DEPTH
 * (at the bracket or alias that crosses it, before anything walks the tree).
 * Returns 0, or -1 after adding errors. */
int yaml_load(arena *a, const char *file, const char *src, size_t len, ynode **root,
              policy_diags *d);
/* The value of a node (lists, maps with string keys, typed scalars), built in
 * a. Returns 0, or -1 when a is exhausted. Map keys are their text. */
int yaml_to_value(arena *a, const ynode *n, value *out);
/* Position of byte `off` of a scalar's decoded text in the source: exact
 * for single-line scalars, the right line for block scalars. */
void yaml_scalar_place(const ynode *n, const char *src, size_t len, size_t off, int *line, int *col,
                       size_t *byte_pos);
/* 1-based column of byte position pos (code points since the line start). */
int yaml_column_of(const char *src, size_t pos);

/* ---- diag.c ---- */
void diag_add(policy_diags *d, diag_severity sev, const char *file, int line, int col,
              const char *key, const char *fmt, ...) __attribute__((format(printf, 7, 8)));
void diag_vadd(policy_diags *d, diag_severity sev, const char *file, int line, int col,
               const char *key, const char *fmt, va_list ap) __attribute__((format(printf, 7, 0)));
/* The candidate closest to word when it is close enough to be a likely
 * typo, else NULL. */
const char *diag_suggest(const char *word, size_t len, const char *const *cands, size_t ncands);
/* Appends "\n | LINE\n | ^" for the source line holding byte pos to buf. */
void diag_excerpt(char *buf, size_t cap, const char *src, size_t len, size_t pos);

/* ---- analyze.c ---- */
/* Calls fn for every free identifier of e (not bound by a comprehension or
 * cel.bind), with the node (an A_IDENT). */
typedef void (*ident_fn)(void *user, const ast *ident);
void ast_free_idents(const ast *e, ident_fn fn, void *user);
/* The `&&`-joined parts of e (e itself when it is not an `&&`). Returns the
 * count; fills at most max. */
uint32_t ast_conjuncts(const ast *e, const ast **out, uint32_t max);
/* A canonical text of e (same text <=> same expression up to spacing,
 * parentheses and literal spelling), allocated from a. NULL when too deep
 * or a is exhausted. */
char *ast_render(arena *a, const ast *e);
/* Upper bounds of how many lists and maps e's value nests (*nest) and how
 * deep evaluating it recurses (*eval), given what fn says of a name: fn
 * returns 1 for a let, with that let's own bounds in *nest and *eval, and 0
 * for any other name. See "how deep an expression nests" in analyze.c. */
typedef int (*let_depth_fn)(void *user, const ast *ident, uint32_t *nest, uint32_t *eval);
void ast_depths(const ast *e, let_depth_fn fn, void *user, uint32_t *nest, uint32_t *eval);
bool ast_is_true(const ast *e);
bool ast_is_scalar_lit(const ast *e);

/* ---- schema.c ---- */
/* A type of the `input:` schema (or one inferred for an expression). */
typedef struct stype stype;
/* Reads the `input:` mapping n into a. Returns NULL after adding errors
 * (unknown type names with a hint, malformed fields) to d. */
const stype *schema_parse(arena *a, const char *file, const ynode *n, policy_diags *d);

/* ---- strategy.c ---- */
/* What the compiler learned about a rule beyond the public policy_rule, kept
 * in the per-file scratch arena for the index and the lints. */
typedef struct rule_info {
  const ast *cond;   /* NULL when the condition did not compile */
  const ynode *node; /* the `if` scalar */
  bool model_direct; /* reads `model` itself (not through a let) */
} rule_info;

typedef struct strategy_build {
  strategy *s;      /* being filled (arrays in the bundle arena) */
  rule_info *rules; /* s->nrules entries */
  const char *src;
  size_t src_len;
  const char *file;
  const ynode *root;
  const char *const *let_names;
  const void *let_tab; /* the lets' names by hash: strategy_let_index */
  uint32_t nlets;
  const ast *const *let_trees;   /* per let; NULL when it did not compile */
  const ynode *const *let_nodes; /* per let: the expression scalar */
  const uint8_t *let_model;      /* per let: reads model, maybe through other lets */
  uint32_t index_min_rules;      /* see policy_load_opts */
  const char *const *const_names;
  uint32_t nconsts;
  const stype *input; /* the `input:` schema; NULL when not declared */
} strategy_build;

/* The index of the let named name[0..len) of b's strategy, or -1: one
 * hash probe (strategy.c). */
int32_t strategy_let_index(const strategy_build *b, const char *name, size_t len);

/* Whether `limits` in s's expressions reads its limits: s has limits, and
 * no let or constant named `limits`. */
bool strategy_limits_readable(const strategy *s);
/* Calls fn for every `limits.NAME` in e (the A_SELECT node) whose NAME is
 * none of s's limits: a load-time error wherever it is written (rules,
 * lets, limits, a model's features). */
void strategy_unknown_limits(const strategy *s, const ast *e,
                             void (*fn)(void *user, const ast *sel), void *user);
/* "no limit named 'NAME' (this strategy's limits: A B)" for such a node. */
void strategy_unknown_limit_msg(const strategy *s, const ast *sel, char *msg, size_t n);

/* Where a strategy's name and decision points are written, for the checks
 * across files (bundle.c). Arrays in the bundle arena, one per point; 0 when
 * the point is the default (the name). */
typedef struct strategy_marks {
  int name_line, name_col;
  int *point_line, *point_col;
} strategy_marks;

/* Compiles the document `root` of file into *s. mem is the bundle arena,
 * scratch the per-file one. Returns the number of errors added to d.
 * STRATEGY_LAZY (a file read back from the parsed cache, for
 * policy_load_opts.lazy): lets and rules are parsed, not compiled (see
 * strategy_rule_program), and neither tests nor warnings are made. */
#define STRATEGY_LAZY 1u
/* With STRATEGY_LAZY: this build already loaded this very text without an
 * error (its compiled/ file, this user's own, says so: bundle.c), so when
 * no fallback model needs the lets' model reads, the lets are not parsed at
 * load nor their graph walked again, and rule names are not checked for
 * repeats again; a let is parsed, if its image does not read back, the
 * first time a decision needs it. */
#define STRATEGY_LETS_CHECKED 2u
typedef struct strategy_input {
  arena *mem, *scratch;
  const char *file; /* the name diagnostics give */
  const char *src;  /* the file's text (rules' source excerpts) */
  size_t len;
  const ynode *root;        /* the parsed document */
  uint32_t index_min_rules; /* policy_load_opts.index_min_rules */
  unsigned flags;           /* STRATEGY_* */
  /* With STRATEGY_LETS_CHECKED: per rule, 1 when a part of its condition is
   * one the rule index can use (policy_rule.index_part, as the load that
   * wrote the compiled/ file found it); a rule with 0 is not parsed at load
   * (it would file nothing), only when first needed without an image. NULL,
   * or a count that is not the rules': every rule is parsed. */
  const uint8_t *rule_parts;
  uint32_t nrule_parts;
} strategy_input;
size_t strategy_compile(const strategy_input *in, strategy *s, strategy_marks *m, policy_diags *d);

/* ---- lint.c ---- */
void strategy_lint(const strategy_build *b, policy_diags *d);
/* With an `input:` schema: errors for undefined names, undeclared fields and
 * type mistakes in every `if` and `let` (schema.c). Nothing without one. */
void schema_check(const strategy_build *b, policy_diags *d);

/* ---- index.c ---- */
/* Builds s->index from the rules' conditions. Returns 0, or -1 when mem is
 * exhausted (an error diag is added). */
int rule_index_build(arena *mem, arena *scratch, const strategy_build *b, policy_diags *d);

/* ---- version.c ---- */
/* The canonical JSON of a document, malloc'd (caller frees); NULL on OOM. */
char *policy_canonical_json(const ynode *root, size_t *len);
/* Lower-case hex SHA-256 of data into out[65]. Returns 0, or -1. */
int policy_sha256_hex(const void *data, size_t len, char out[65]);
/* Writes <dir>/<hex>.json when absent (temp file + rename, creating dir).
 * Returns 0, or -1 with a message in err. */
int policy_store_put(const char *dir, const char *hex, const char *data, size_t len, char *err,
                     size_t err_size);
/* The same with another file name ending (".features.yaml"). */
int policy_store_put_as(const char *dir, const char *hex, const char *ext, const char *data,
                        size_t len, char *err, size_t err_size);

/* ---- cache.c: strategy files read back from the version store ---- */
struct stat;
/* The key of a file as it is now (path, inode, size, times). */
void parse_cache_key(const char *path, const struct stat *st, char key[65]);
/* The canonical text of the version a key compiled to (mapped, NUL after
 * it; give it back with parse_cache_put_back), with the version in version
 * and its CRC32C in *crc; NULL when the store does not know the key. */
char *parse_cache_get(const char *store, const char *key, char version[65], size_t *len,
                      uint32_t *crc);
void parse_cache_put_back(char *canon, size_t len);
/* Remembers that key compiled to version (best effort); 1 when the entry
 * was written (or found whole), 0 when not. */
int parse_cache_put(const char *store, const char *key, const char *version);
/* The options a lazy let or rule is compiled with (strategy.c): what its
 * image must be read back with (cache.c). */
extern const expr_opts STRATEGY_EXPR_OPTS_LATER;

/* What a load of one canonical text found, for the next load of the same
 * text by the same build (kept in compiled/): where its `tests` member is,
 * and that the tree read without it writes back to the text. */
typedef struct cache_hints {
  uint64_t cut_from, cut_to; /* the member and a comma beside it */
  uint32_t tests_at;         /* its place among the members; UINT32_MAX: last */
  uint32_t known;            /* 1: the above hold and the tree checked out */
} cache_hints;
/* The tree of a canonical text, in a; NULL unless its canonical form is
 * exactly that text. Its nodes carry no positions. without_tests: the
 * top-level `tests` is left out of the tree (and its bytes unchecked), for
 * a load that keeps no tests (STRATEGY_LAZY). hints (may be NULL): when
 * known, used instead of searching and checking; else filled in when the
 * tree was found without its tests. */
ynode *parse_cache_tree(arena *a, const char *canon, size_t len, int without_tests,
                        cache_hints *hints);
/* The compiled programs of a lazy strategy (STRATEGY_LAZY), kept in the
 * store as <store>/compiled/<version>-<expr_image_fingerprint> (cache.c
 * says more). compiled_cache_open maps the file for the version and its
 * stored form (CRC32C and length: the text read) until b is freed, and
 * sets *hints from it; NULL when there is none, or it is damaged or of
 * another text (then removed). compiled_cache_attach gives every let and rule
 * of s its program's image (policy_lazy.image) from the file; 0 when the
 * file does not fit s (then removed). */
typedef struct compiled_map compiled_map;
const compiled_map *compiled_cache_open(policy_bundle *b, const char *version, uint32_t canon_crc,
                                        size_t canon_len, const char *store, cache_hints *hints);
int compiled_cache_attach(const compiled_map *m, strategy *s, const char *store);
/* 1 when m is a file of this user's that no one else may write (its CRC
 * checked by compiled_cache_open): the bytes this build wrote, itself, after
 * a load of the same text that had no error. */
int compiled_cache_own(const compiled_map *m);
/* Per rule of the file, its policy_rule.index_part as the load that wrote
 * it found it (a byte each, *n of them); NULL when the file has none. */
const uint8_t *compiled_cache_rule_parts(const compiled_map *m, uint32_t *n);
/* The tree the stored form gave the load that wrote the file (without its
 * tests, as parse_cache_tree gives it to a lazy load), in a (its texts in
 * the file, mapped as long as the bundle); NULL when the file has none or
 * it does not read back. */
ynode *compiled_cache_tree(const compiled_map *m, arena *a);
/* Removes the compiled/ file of version (one whose tree did not compile:
 * the next load reads the stored form and writes the file again). */
void compiled_cache_drop(const char *store, const char *version);
/* Compiles every let and rule of the lazy strategy s now (as on first use)
 * and writes their images, root (the tree s was compiled from) and the
 * hints as s's compiled/ entry (best effort; nothing at all when the store
 * cannot be written). 1 when the file was written, else 0. */
int compiled_cache_fill(strategy *s, const ynode *root, uint32_t canon_crc, size_t canon_len,
                        const char *store, const cache_hints *hints);
/* Unmaps what compiled_cache_open mapped for b. */
void compiled_cache_release(policy_bundle *b);
/* ---- models.c ---- */
/* Loads the models the bundle's strategies name (models_dir/NAME.json and
 * its feature spec), checks each against its strategy's fallback settings,
 * keeps a copy of both files in <store>/models and in <pin>/models (either
 * "" or NULL: none; policy_load_opts.pin_dir) and points each strategy's
 * `model` at its entry. Errors go to d. */
void bundle_link_models(policy_bundle *b, const char *models_dir, const char *store,
                        const char *pin, policy_diags *d);
void bundle_free_models(policy_bundle *b);

#endif
