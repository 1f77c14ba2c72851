/* image.h — a compiled expression as bytes, and back again.
 *
 * A process that makes one decision and exits (an agent's hook) spent most
 * of its work parsing and compiling the handful of expressions it
 * evaluates, the same ones every time. An image keeps what the compiler
 * made, so the next process rebuilds the program in one pass instead: the
 * nodes, their children, constants, call sites, qualified names, `in` sets
 * and literal sets, with no pointers in the bytes (indexes, lengths and
 * names only). What cannot be written down is made again on reading: each
 * node's evaluator function comes from its opcode, each call site's
 * overloads from the registry by name (and each overload's `prepare` runs
 * again on the same constant arguments), literal sets are built again from
 * their lists, and ip()/cidr() constants are parsed again from their text.
 *
 * An image is a file on disk: reading one checks every count, index, kind
 * and length against what the evaluator relies on, and refuses (returns -1)
 * rather than trusts anything that could not have come from the compiler.
 * The caller then compiles the text as before. Images carry no version of
 * their own: the caller keys them by expr_image_fingerprint.
 *
 * Not here: where images are kept (src/policy/cache.c) or when they are
 * written (src/policy/strategy.c). */
#ifndef VD_EXPR_IMAGE_H
#define VD_EXPR_IMAGE_H

#include <stddef.h>

#include "core/json.h"
#include "expr/expr.h"
#include "expr/lib.h"

/* Appends the image of p to b (b->oom says when memory ran out). */
void expr_image_write(const expr_program *p, json_buf *b);

/* Rebuilds the program of the image data[0..len), which it refers to (its
 * strings are used where they lie): data must outlive the program. opts: those the program
 * was compiled with (a `prepare` runs again under opts->defer_jit). mem:
 * the bytes of memory the program takes (expr_image_check), so that it is
 * allocated in one piece of just that size; 0: not known. Returns 0 with
 * *out set (free it with expr_free), or -1 when the bytes are not a valid
 * image or memory ran out. */
int expr_image_read(const void *data, size_t len, const expr_opts *opts, size_t mem,
                    expr_program **out);

/* The same, for an image known to be one this build wrote and read back
 * (expr_image_check) — a file whose checksum the caller verified, that no
 * one else may write: what that read-back proved is not checked again (the
 * UTF-8 of its strings, each node's opcode, children and indexes, the
 * tree's shape), which was a fifth of reading an image. Every length is
 * still checked against the bytes, and call sites, sets and literal sets
 * are rebuilt as above. */
int expr_image_read_trusted(const void *data, size_t len, const expr_opts *opts, size_t mem,
                            expr_program **out);

/* Reads the image back as expr_image_read would, and frees what it made:
 * 0 with *mem set to the bytes its program takes (0 when it could not be
 * told), or -1 when the image does not read back. For whoever keeps an
 * image: one that fails here is not worth keeping. */
int expr_image_check(const void *data, size_t len, const expr_opts *opts, size_t *mem);

/* The compiled code of the constant regexes p's call sites prepared
 * (PCRE2's serialized form, lib_core.c), appended to b: what a process
 * that matches a pattern once spent most on after the image was read.
 * Kept apart from the image because PCRE2 trusts the code it decodes:
 * expr_image_adopt_codes gives them to a program read from its image, and
 * must be given only bytes this build wrote (the caller's file named by
 * expr_image_fingerprint) whose checksum the caller verified. Returns 0;
 * -1 when a count or length does not fit p (then nothing is adopted), or
 * when a code is for a call site that is not a regex's or memory ran out
 * (the codes before it are kept: each still matches as its text would).
 * The codes are used where they lie: data must outlive the program. */
void expr_image_write_codes(const expr_program *p, json_buf *b);
int expr_image_adopt_codes(expr_program *p, const void *data, size_t len);

/* lib_core.c's side of the above: appends the code of the regex a call
 * site's overload b prepared into aux (1), or nothing (0: not a regex, or
 * one that does not compile); gives such a call site the code bytes
 * (not copied: they must outlive it), decoded at its first match instead of compiling the pattern
 * (0; -1 when b is not that built-in or memory ran out). */
int lib_regex_code(const builtin *b, void *aux, json_buf *out);
int lib_regex_adopt(const builtin *b, void *aux, const void *code, size_t len);

/* 32 hex digits that change whenever an image written by this build might
 * not mean the same program to the reader: the image layout, verdict's
 * version, the built-in registry (names, styles, arities, kinds) and the
 * build id of the code itself (so that a rebuilt compiler never reads
 * images of the old one). Computed once per process. */
const char *expr_image_fingerprint(void);

#endif
