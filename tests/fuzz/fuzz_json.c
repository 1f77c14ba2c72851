/* fuzz_json.c — the JSON reader on arbitrary bytes, in its three modes
 * (strict, lenient, duplicate keys last-wins), plus the writer on whatever
 * was read. Checks: no crash, leak or UB; an error always has a place
 * (line, column >= 1, offset within the input, a path starting with $, a
 * message); strict acceptance implies acceptance by the two looser modes;
 * what was read writes without failing, and the written text reads back
 * and writes again to the same bytes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/json.h"
#include "fuzz.h"

static arena A;
static int A_ready;

/* 0 accepted (and the round trip checked), -1 rejected. */
static int one_mode(const uint8_t *data, size_t size, int lenient, int dup) {
  json_opts o;
  memset(&o, 0, sizeof o);
  o.lenient = lenient;
  o.duplicates = dup;
  value v;
  json_error e;
  memset(&e, 0, sizeof e);
  if (json_parse(&A, (const char *)data, size, &o, &v, &e) != 0) {
    FUZZ_CHECK(e.line >= 1 && e.column >= 1, "error without a place: %s", e.message);
    FUZZ_CHECK(e.offset <= size, "error offset %zu past the input (%zu)", e.offset, size);
    FUZZ_CHECK(e.path[0] == '$', "error path %s", e.path);
    FUZZ_CHECK(e.message[0] != '\0', "error without a message");
    return -1;
  }
  json_buf b1, b2;
  json_buf_init(&b1, NULL);
  json_buf_init(&b2, NULL);
  FUZZ_CHECK(json_write(&b1, &v, lenient) == 0, "a value just read does not write");
  value v2;
  int rc = json_parse(&A, b1.data, b1.len, &o, &v2, &e);
  FUZZ_CHECK(rc == 0, "written text does not read back: %s: %s", e.message, b1.data);
  FUZZ_CHECK(json_write(&b2, &v2, lenient) == 0, "a value read back does not write");
  FUZZ_CHECK(b1.len == b2.len && memcmp(b1.data, b2.data, b1.len) == 0,
             "write(read(write(v))) != write(v):\n%s\n%s", b1.data, b2.data);
  json_buf_free(&b1);
  json_buf_free(&b2);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!A_ready) {
    arena_init(&A, NULL, 0, 256u << 20);
    A_ready = 1;
  }
  int strict = one_mode(data, size, 0, JSON_DUP_REJECT);
  arena_reset(&A);
  int lenient = one_mode(data, size, 1, JSON_DUP_REJECT);
  arena_reset(&A);
  int last = one_mode(data, size, 0, JSON_DUP_LAST_WINS);
  arena_reset(&A);
  if (strict == 0) {
    FUZZ_CHECK(lenient == 0, "strict accepts what lenient rejects");
    FUZZ_CHECK(last == 0, "rejecting duplicates accepts what last-wins rejects");
  }
  return 0;
}
