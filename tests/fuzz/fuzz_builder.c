/* fuzz_builder.c — the context builder (vd_builder) against the JSON reader.
 *
 * Input whose first byte is '{' is JSON text: when json_parse reads it as
 * an object, walking its values into the builder must succeed (the builder
 * refuses nothing the reader accepts but nesting past 511 levels), give the
 * same values (kinds included) back when its root is written as JSON and
 * read again, and decide as the same context given as JSON does (action,
 * rule, source) on the engine's test bundle.
 *
 * Any other input is a stream of events, a byte each (the low bits pick the
 * event; strings and numbers come from the bytes after it): misuse must be
 * refused with a message and a path from "$", never crash, and a builder
 * that holds a complete map must write JSON that reads back to equal
 * values. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/json.h"
#include "engine/engine.h"
#include "fuzz.h"
#include "verdict.h"

static vd_engine *E;
static vd_decision *D;
static vd_builder *B;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  vd_engine_opts o;
  memset(&o, 0, sizeof o);
  o.store_dir = "";
  vd_error err;
  if (vd_engine_open(VD_SOURCE_DIR "/tests/engine/bundles/gate", &o, &E, &err) != 0) {
    fprintf(stderr, "fuzz_builder: %s\n", err.message);
    abort();
  }
  D = vd_decision_new();
  B = vd_builder_new();
  return 0;
}

static int walk(vd_builder *b, const value *v) {
  int rc;
  switch (v->kind) {
    case V_NULL:
      return vd_build_null(b);
    case V_BOOL:
      return vd_build_bool(b, v->b);
    case V_INT:
      return vd_build_int(b, v->i);
    case V_UINT:
      return vd_build_uint(b, v->u);
    case V_DOUBLE:
      return vd_build_double(b, v->d);
    case V_STRING:
      return vd_build_string(b, v->s, v->n);
    case V_LIST:
      if ((rc = vd_build_list_begin(b))) return rc;
      for (uint32_t i = 0; i < v->n; i++)
        if ((rc = walk(b, &v->items[i]))) return rc;
      return vd_build_list_end(b);
    default:
      if ((rc = vd_build_map_begin(b))) return rc;
      for (uint32_t i = 0; i < v->n; i++) {
        const value *k = &v->entries[i].key;
        if ((rc = vd_build_key(b, k->s, k->n)) || (rc = walk(b, &v->entries[i].val))) return rc;
      }
      return vd_build_map_end(b);
  }
}

/* Same values and the same kinds (value_equal alone takes 1 == 1.0). */
static int same(const value *a, const value *b) {
  if (a->kind != b->kind || a->n != b->n) return 0;
  switch (a->kind) {
    case V_LIST:
      for (uint32_t i = 0; i < a->n; i++)
        if (!same(&a->items[i], &b->items[i])) return 0;
      return 1;
    case V_MAP:
      for (uint32_t i = 0; i < a->n; i++)
        if (!same(&a->entries[i].key, &b->entries[i].key) ||
            !same(&a->entries[i].val, &b->entries[i].val))
          return 0;
      return 1;
    case V_DOUBLE:
      return a->d == b->d && __builtin_signbit(a->d) == __builtin_signbit(b->d);
    default:
      return value_equal(a, b);
  }
}

/* The builder's root written as JSON reads back to the same values. */
static void round_trip(arena *a, const value *root) {
  json_buf jb;
  json_buf_init(&jb, a);
  FUZZ_CHECK(json_write(&jb, root, 0) == 0, "a built value JSON cannot carry");
  value back;
  json_error je;
  FUZZ_CHECK(json_parse(a, jb.data, jb.len, NULL, &back, &je) == 0, "%s: %s", jb.data, je.message);
  FUZZ_CHECK(same(root, &back), "read back differently: %s", jb.data);
}

static void from_json(arena *a, const uint8_t *data, size_t size) {
  value v;
  if (json_parse(a, (const char *)data, size, NULL, &v, NULL) != 0 || v.kind != V_MAP) return;
  vd_builder_reset(B);
  int rc = walk(B, &v);
  vd_error err;
  if (rc == VD_ELIMIT) {
    vd_builder_error(B, &err);
    FUZZ_CHECK(strstr(err.message, "511 levels"), "%s", err.message);
    return;
  }
  FUZZ_CHECK(rc == 0, "refused what JSON reads: %d", rc);
  value root;
  size_t bytes;
  FUZZ_CHECK(builder_context(B, &root, &bytes, &err) == 0, "%s", err.message);
  FUZZ_CHECK(same(&root, &v), "built values differ from the reader's");
  round_trip(a, &root);
  vd_request r = {.action = "gate"};
  r.context_json = (const char *)data;
  r.context_len = (long)size;
  int rj = vd_decide(E, &r, D, &err);
  char want[256] = "";
  if (rj == 0)
    snprintf(want, sizeof want, "%s %s %s", vd_decision_action(D) ? vd_decision_action(D) : "-",
             vd_decision_rule(D) ? vd_decision_rule(D) : "-", vd_decision_source(D));
  r.context_json = NULL;
  int rb = vd_decide_built(E, &r, B, D, &err);
  FUZZ_CHECK(rj == rb || rj == VD_ELIMIT || rb == VD_ELIMIT, "json %d, built %d", rj, rb);
  if (rj == 0 && rb == 0) {
    char got[256];
    snprintf(got, sizeof got, "%s %s %s", vd_decision_action(D) ? vd_decision_action(D) : "-",
             vd_decision_rule(D) ? vd_decision_rule(D) : "-", vd_decision_source(D));
    FUZZ_CHECK(strcmp(got, want) == 0, "built %s, json %s", got, want);
  }
}

static void events(arena *a, const uint8_t *data, size_t size) {
  vd_builder_reset(B);
  for (size_t i = 0; i < size; i++) {
    uint8_t op = data[i] & 15, len = (uint8_t)(data[i] >> 4);
    const char *s = (const char *)data + i + 1;
    size_t n = len <= size - i - 1 ? len : size - i - 1;
    int64_t num = 0;
    memcpy(&num, s, n < 8 ? n : 8);
    int rc;
    switch (op) {
      case 0:
        rc = vd_build_null(B);
        break;
      case 1:
        rc = vd_build_bool(B, len & 1);
        break;
      case 2:
        rc = vd_build_int(B, num);
        i += n < 8 ? n : 8;
        break;
      case 3:
        rc = vd_build_uint(B, (uint64_t)num);
        i += n < 8 ? n : 8;
        break;
      case 4: {
        double d;
        memcpy(&d, &num, 8);
        rc = vd_build_double(B, d);
        i += n < 8 ? n : 8;
        break;
      }
      case 5:
        rc = vd_build_string(B, s, n);
        i += n;
        break;
      case 6:
      case 7:
        rc = vd_build_key(B, s, n);
        i += n;
        break;
      case 8:
      case 9:
        rc = vd_build_map_begin(B);
        break;
      case 10:
        rc = vd_build_map_end(B);
        break;
      case 11:
      case 12:
        rc = vd_build_list_begin(B);
        break;
      case 13:
        rc = vd_build_list_end(B);
        break;
      default:
        rc = 0;
        FUZZ_CHECK(vd_builder_path(B)[0] == '$', "a path not from $");
        break;
    }
    if (rc) {
      vd_error err;
      FUZZ_CHECK(vd_builder_error(B, &err) == rc && err.message[0] && err.path[0] == '$',
                 "refused %d without its error", rc);
      break;
    }
  }
  value root;
  size_t bytes;
  vd_error err;
  if (builder_context(B, &root, &bytes, &err) == 0) {
    round_trip(a, &root);
    vd_request r = {.action = "gate"};
    int rc = vd_decide_built(E, &r, B, D, &err);
    FUZZ_CHECK(rc == 0 || err.message[0], "refused %d without a message", rc);
  } else {
    FUZZ_CHECK(err.message[0] && strncmp(err.path, "$.context", 9) == 0, "%s", err.message);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!E) LLVMFuzzerInitialize(NULL, NULL);
  arena a;
  arena_init(&a, NULL, 0, 0);
  if (size && data[0] == '{')
    from_json(&a, data, size);
  else
    events(&a, data, size);
  arena_free(&a);
  return 0;
}
