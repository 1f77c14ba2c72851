/* mask.c — what a strategy's `snapshot: {mask, hash}` keeps out of its
 * snapshots, applied to the decision's inputs just before they are
 * captured (docs/snapshots.md, "Masked fields").
 *
 * The request a snapshot holds is then not the caller's text byte for byte
 * but the same request written again from its parsed values, with each
 * masked context field replaced by the string "[masked]" and each hashed
 * one by "hmac-sha256:" and the hex HMAC-SHA256, under the node's secret,
 * of the field's text (a string's bytes; any other value's compact JSON),
 * so that equal values give equal hashes across snapshots and nodes that
 * share the secret, and nobody without it can test a guess. A let whose
 * value comes from such a field is recorded as "[masked]" too. The decision
 * itself, and its answer, are made from the clear values; only what is
 * recorded changes. The secret never reaches a snapshot.
 *
 * Only the decisions of strategies that declare `snapshot:` pay for this. */
#include <string.h>

#include "core/json.h"
#include "core/sha256.h"
#include "engine/engine.h"

static const char MASKED[] = "[masked]";

/* A copy of map m (in a) with the path's leaf replaced by what the mode
 * says; m itself when the path is not in it. */
static value replace(arena *a, const value *m, const policy_path *p, uint32_t at, int hash,
                     const uint8_t *key, size_t key_len) {
  if (m->kind != V_MAP) return *m;
  const value *cur = value_map_get(m, p->parts[at], strlen(p->parts[at]));
  if (!cur) return *m;
  value nv;
  if (at + 1 < p->nparts) {
    nv = replace(a, cur, p, at + 1, hash, key, key_len);
  } else if (!hash) {
    nv = value_str(MASKED, sizeof MASKED - 1);
  } else {
    const char *text = cur->s;
    size_t n = cur->n;
    json_buf b;
    json_buf_init(&b, a);
    if (cur->kind != V_STRING) {
      json_write(&b, cur, 1);
      text = b.data;
      n = b.len;
    }
    unsigned char md[32];
    hmac_sha256(key, key_len, text ? text : "", text ? n : 0, md);
    char *out = arena_alloc(a, 12 + 64 + 1);
    if (!out) return *m;
    memcpy(out, "hmac-sha256:", 12);
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
      out[12 + 2 * i] = hex[md[i] >> 4];
      out[12 + 2 * i + 1] = hex[md[i] & 15];
    }
    out[76] = 0;
    nv = value_str(out, 76);
  }
  map_entry *e = arena_memdup(a, m->entries, m->n * sizeof *e);
  if (!e) return *m;
  for (uint32_t i = 0; i < m->n; i++)
    if (&m->entries[i].val == cur) e[i].val = nv;
  return value_map(e, m->n);
}

const strategy *mask_strategy(const policy_bundle *b, const char *name) {
  for (uint32_t i = 0; name && i < b->nstrategies; i++) {
    const strategy *s = &b->strategies[i];
    if ((s->nsnap_mask || s->nsnap_hash) && s->name && !strcmp(s->name, name)) return s;
  }
  return NULL;
}

int mask_for_record(const strategy *s, const decide_request *req, vd_decision *d,
                    const uint8_t *key, size_t key_len, record_input *in) {
  arena *a = &d->mem;
  value ctx = req->context;
  for (uint32_t i = 0; i < s->nsnap_mask; i++)
    ctx = replace(a, &ctx, &s->snap_mask[i], 0, 0, key, key_len);
  for (uint32_t i = 0; i < s->nsnap_hash; i++)
    ctx = replace(a, &ctx, &s->snap_hash[i], 0, 1, key, key_len);
  json_buf b;
  json_buf_init(&b, a);
  json_buf_put(&b, "{\"action\":", 10);
  json_write(&b, &req->action, 1);
  if (req->candidates.n) {
    json_buf_put(&b, ",\"candidates\":", 14);
    json_write(&b, &req->candidates, 1);
  }
  json_buf_put(&b, ",\"context\":", 11);
  json_write(&b, &ctx, 1);
  if (req->key.n) {
    json_buf_put(&b, ",\"key\":", 7);
    json_write(&b, &req->key, 1);
  }
  json_buf_putc(&b, '}');
  if (b.oom) return -1;
  in->json = b.data;
  in->json_len = b.len;
  in->creq = NULL;
  /* lets computed from the fields: recorded masked */
  for (uint32_t i = 0; s->let_masked && d->let_values && i < d->nlets; i++)
    for (uint32_t j = 0; j < s->nlets; j++)
      if (s->let_masked[j] && s->lets[j].name && d->lets[i] && !strcmp(s->lets[j].name, d->lets[i]))
        d->let_values[i] = value_str(MASKED, sizeof MASKED - 1);
  return 0;
}
