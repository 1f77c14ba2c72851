/* lib_net.c — IP addresses and CIDR prefixes in the condition language, in
 * the style of Kubernetes' CEL network library (k8s.io/apiserver
 * pkg/cel/library ip.go and cidr.go; cel-go ext/network.go is the same
 * library): isIP, ip, ip.isCanonical, family, isUnspecified, isLoopback,
 * isLinkLocalMulticast, isLinkLocalUnicast, isGlobalUnicast, isCIDR, cidr,
 * containsIP, containsCIDR, ip() of a cidr, masked, prefixLength.
 *
 * Representation: an IP or a CIDR is a V_STRING holding its canonical text
 * ("10.0.0.1", "2001:db8::1", "10.0.0.0/8") tagged with VF_IP or VF_CIDR.
 * This adds no value kind: equality of two addresses is string equality of
 * canonical forms (ip('::1') == ip('0:0::1')), JSON output is the readable
 * text, and string(x) only drops the tag. The methods accept only tagged
 * strings, so '10.0.0.1'.family() is "no such overload", as in Kubernetes.
 * The price: type(ip('::1')) is string, and a tagged string equals a plain
 * string with the same text.
 *
 * Parsing follows Go's net/netip with Kubernetes' restrictions: IPv4 is four
 * decimal fields without leading zeros; IPv6 is RFC 4291 text (with "::" and
 * an optional embedded dotted quad); zones ("fe80::1%eth0") and IPv4-mapped
 * IPv6 addresses ("::ffff:1.2.3.4") are rejected; a prefix length is decimal
 * without leading zeros. Canonical IPv6 text is RFC 5952 (lower case, the
 * longest run of two or more zero groups as "::"). A CIDR keeps the address
 * as written (cidr('10.0.0.1/8') is allowed; masked() clears the host bits).
 *
 * containsCIDR is real containment (same family, the inner prefix at least
 * as long, and inside the outer one), as cel-go's network library and the
 * Kubernetes documentation describe it.
 *
 * The parsed form rides along. Every ip()/cidr() value this file makes holds,
 * in the same allocation, its text, a NUL, then NET_EXTRA bytes: the family,
 * the prefix length and the 16 address bytes; VF_NETBIN says they are there.
 * The string is still just the text (n does not count them), so equality,
 * string() and JSON output see nothing of it; but containsIP and the other
 * methods read the address without parsing text again. That matters because
 * a policy's cidr("10.0.0.0/8") constants are folded at compile time and then
 * tested against every request's address. A deep copy of a constant
 * (value_copy_deep) copies the extra bytes too (net_value_extra); a tagged
 * string without VF_NETBIN (made elsewhere) is parsed as before. */
#include <string.h>

#include "expr/lib.h"

#include "expr/program.h"

#define NO_OVERLOAD VALUE_ERR("no such overload")
#define OOM_ERROR VALUE_ERR("out of memory")

/* string: the parsed form follows the text's NUL (see the top of the file).
 * Bit 0x08 of value.flags; only this file sets it. */
#define VF_NETBIN 0x08

typedef struct netaddr {
  uint8_t b[16]; /* IPv4 uses b[0..4) */
  uint8_t v4;
} netaddr;

/* After the NUL: v4, prefix length (0 for an address), the address bytes. */
enum { NET_EXTRA = 18 };

size_t net_value_extra(const value *v) {
  return v->kind == V_STRING && (v->flags & VF_NETBIN) ? NET_EXTRA : 0;
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }

static int hex_val(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Four decimal fields 0..255, no leading zeros, nothing else. */
static int parse_v4(const char *s, size_t n, uint8_t out[4], const char **why) {
  size_t i = 0;
  for (int field = 0; field < 4; field++) {
    if (field) {
      if (i >= n || s[i] != '.') {
        *why = i >= n ? "IPv4 address too short" : "unexpected character";
        return -1;
      }
      i++;
    }
    size_t start = i;
    unsigned v = 0;
    while (i < n && is_digit(s[i]) && i - start < 4) v = v * 10 + (unsigned)(s[i++] - '0');
    if (i == start) {
      *why = "empty field in IPv4 address";
      return -1;
    }
    if (i - start > 1 && s[start] == '0') {
      *why = "IPv4 field has a leading zero";
      return -1;
    }
    if (v > 255) {
      *why = "IPv4 field has a value above 255";
      return -1;
    }
    out[field] = (uint8_t)v;
  }
  if (i != n) {
    *why = i < n && s[i] == '.' ? "IPv4 address too long" : "unexpected character";
    return -1;
  }
  return 0;
}

static int parse_v6(const char *s, size_t n, uint8_t out[16], const char **why) {
  memset(out, 0, 16);
  int ellipsis = -1; /* byte index where "::" stands */
  int bi = 0;
  size_t i = 0;
  if (n >= 2 && s[0] == ':' && s[1] == ':') {
    ellipsis = 0;
    i = 2;
  }
  while (i < n) {
    size_t start = i;
    unsigned v = 0;
    int h;
    while (i < n && (h = hex_val(s[i])) >= 0) {
      if (i - start == 4) {
        *why = "IPv6 field has more than 4 hex digits";
        return -1;
      }
      v = v * 16 + (unsigned)h;
      i++;
    }
    if (i < n && s[i] == '.') { /* an embedded IPv4 address ends the text */
      if ((ellipsis < 0 && bi != 12) || bi > 12) {
        *why = "embedded IPv4 address in the wrong place";
        return -1;
      }
      if (parse_v4(s + start, n - start, out + bi, why)) return -1;
      bi += 4;
      i = n;
      break;
    }
    if (i == start) {
      *why = i < n && s[i] == '%' ? "IPv6 zones are not allowed" : "empty or invalid IPv6 field";
      return -1;
    }
    if (bi == 16) {
      *why = "IPv6 address too long";
      return -1;
    }
    out[bi++] = (uint8_t)(v >> 8);
    out[bi++] = (uint8_t)v;
    if (i == n) break;
    if (s[i] != ':') {
      *why = s[i] == '%' ? "IPv6 zones are not allowed" : "unexpected character";
      return -1;
    }
    i++;
    if (i < n && s[i] == ':') {
      if (ellipsis >= 0) {
        *why = "more than one \"::\"";
        return -1;
      }
      ellipsis = bi;
      i++;
    } else if (i == n) {
      *why = "IPv6 address ends with ':'";
      return -1;
    }
  }
  if (bi < 16) {
    if (ellipsis < 0) {
      *why = "IPv6 address too short";
      return -1;
    }
    int tail = bi - ellipsis;
    memmove(out + 16 - tail, out + ellipsis, (size_t)tail);
    memset(out + ellipsis, 0, (size_t)(16 - tail - ellipsis));
  } else if (ellipsis >= 0) {
    *why = "\"::\" must stand for at least one zero field";
    return -1;
  }
  return 0;
}

static int is_4in6(const netaddr *a) {
  static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return !a->v4 && memcmp(a->b, prefix, 12) == 0;
}

static int parse_ip(const char *s, size_t n, netaddr *a, const char **why) {
  memset(a, 0, sizeof *a);
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '.') {
      a->v4 = 1;
      return parse_v4(s, n, a->b, why);
    }
    if (s[i] == ':') {
      if (parse_v6(s, n, a->b, why)) return -1;
      if (is_4in6(a)) {
        *why = "IPv4-mapped IPv6 addresses are not allowed";
        return -1;
      }
      return 0;
    }
    if (s[i] == '%') break;
  }
  *why = n == 0 ? "empty string" : "not an IPv4 or IPv6 address";
  return -1;
}

static int parse_cidr(const char *s, size_t n, netaddr *a, int *bits, const char **why) {
  size_t slash = n;
  while (slash > 0 && s[slash - 1] != '/') slash--;
  if (slash == 0) {
    *why = "no '/' before the prefix length";
    return -1;
  }
  if (parse_ip(s, slash - 1, a, why)) return -1;
  const char *b = s + slash;
  size_t bl = n - slash;
  int max = a->v4 ? 32 : 128, v = 0;
  if (bl == 0 || bl > 3 || (bl > 1 && b[0] == '0')) {
    *why = "bad prefix length";
    return -1;
  }
  for (size_t i = 0; i < bl; i++) {
    if (!is_digit(b[i])) {
      *why = "bad prefix length";
      return -1;
    }
    v = v * 10 + (b[i] - '0');
  }
  if (v > max) {
    *why = a->v4 ? "prefix length above 32" : "prefix length above 128";
    return -1;
  }
  *bits = v;
  return 0;
}

static char *put_dec(char *p, unsigned v) {
  if (v >= 100) *p++ = (char)('0' + v / 100);
  if (v >= 10) *p++ = (char)('0' + v / 10 % 10);
  *p++ = (char)('0' + v % 10);
  return p;
}

static char *put_hex(char *p, unsigned v) {
  static const char digits[] = "0123456789abcdef";
  int shift = 12;
  while (shift > 0 && !(v >> shift)) shift -= 4;
  for (; shift >= 0; shift -= 4) *p++ = digits[(v >> shift) & 0xf];
  return p;
}

/* Canonical text; out needs 40 bytes (not NUL-terminated). */
static size_t format_ip(const netaddr *a, char *out) {
  char *p = out;
  if (a->v4) {
    for (int k = 0; k < 4; k++) {
      if (k) *p++ = '.';
      p = put_dec(p, a->b[k]);
    }
    return (size_t)(p - out);
  }
  unsigned g[8];
  for (int k = 0; k < 8; k++) g[k] = (unsigned)a->b[2 * k] << 8 | a->b[2 * k + 1];
  int zs = -1, zl = 1; /* longest run of >= 2 zero groups, first on a tie */
  for (int k = 0; k < 8;) {
    int j = k;
    while (j < 8 && g[j] == 0) j++;
    if (j - k > zl) zs = k, zl = j - k;
    k = j > k ? j : k + 1;
  }
  for (int k = 0; k < 8; k++) {
    if (k == zs) {
      *p++ = ':';
      *p++ = ':';
      k += zl - 1;
      continue;
    }
    if (k > 0 && k != zs + zl) *p++ = ':';
    p = put_hex(p, g[k]);
  }
  return (size_t)(p - out);
}

/* text[0..n), a NUL and the parsed form, in one arena block. */
static value tagged(eval_ctx *ctx, const char *text, size_t n, uint8_t flag, const netaddr *a,
                    int bits) {
  char *p = arena_alloc(ctx->arena, n + 1 + NET_EXTRA);
  if (!p) return OOM_ERROR;
  memcpy(p, text, n);
  p[n] = '\0';
  p[n + 1] = (char)a->v4;
  p[n + 2] = (char)bits;
  memcpy(p + n + 3, a->b, 16);
  value v = value_str(p, (uint32_t)n);
  v.flags = VF_ASCII | VF_NETBIN | flag;
  return v;
}

static value make_ip(eval_ctx *ctx, const netaddr *a) {
  char t[48];
  return tagged(ctx, t, format_ip(a, t), VF_IP, a, 0);
}

static value make_cidr(eval_ctx *ctx, const netaddr *a, int bits) {
  char t[56];
  size_t n = format_ip(a, t);
  t[n++] = '/';
  n = (size_t)(put_dec(t + n, (unsigned)bits) - t);
  return tagged(ctx, t, n, VF_CIDR, a, bits);
}

/* The parsed form of a VF_NETBIN value. */
static void net_read(const value *v, netaddr *a, int *bits) {
  const uint8_t *x = (const uint8_t *)v->s + v->n + 1;
  a->v4 = x[0];
  if (bits) *bits = x[1];
  memcpy(a->b, x + 2, 16);
}

static value ip_error(eval_ctx *ctx, const value *s, const char *why) {
  return value_errorf(ctx->arena, "ip: '%.*s' is not a valid IP address: %s",
                      (int)(s->n > 64 ? 64 : s->n), s->s, why);
}

static value cidr_error(eval_ctx *ctx, const value *s, const char *why) {
  return value_errorf(ctx->arena, "cidr: '%.*s' is not a valid CIDR: %s",
                      (int)(s->n > 64 ? 64 : s->n), s->s, why);
}

/* The address of a tagged IP value (its text is canonical, so it parses). */
static int ip_of(const value *v, netaddr *a) {
  const char *why;
  if (v->kind != V_STRING || !(v->flags & VF_IP)) return -1;
  if (v->flags & VF_NETBIN) {
    net_read(v, a, NULL);
    return 0;
  }
  return parse_ip(v->s, v->n, a, &why);
}

static int cidr_of(const value *v, netaddr *a, int *bits) {
  const char *why;
  if (v->kind != V_STRING || !(v->flags & VF_CIDR)) return -1;
  if (v->flags & VF_NETBIN) {
    net_read(v, a, bits);
    return 0;
  }
  return parse_cidr(v->s, v->n, a, bits, &why);
}

/* ----------------------------------------------------------------- IPs */

static value fn_is_ip(eval_ctx *ctx, const value *args, uint32_t nargs, void *aux) {
  netaddr a;
  const char *why;
  return value_bool(parse_ip(args[0].s, args[0].n, &a, &why) == 0);
}

static value fn_ip(eval_ctx *ctx, const value *args, uint32_t nargs, void *aux) {
  if (args[0].flags & VF_IP) return args[0];
  netaddr a;
  const char *why;
  if (parse_ip(args[0].s, args[0].n, &a, &why)) return ip_error(ctx, &args[0], why);
  /* An IPv4 address that parses is canonical as written (four fields, no
   * leading zeros): keep the text instead of formatting it again. */
  if (a.v4) return tagged(ctx, args[0].s, args[0].n, VF_IP, &a, 0);
  return make_ip(ctx, &a);
}

static value fn_ip_is_canonical(eval_ctx *ctx, const value *args, uint32_t nargs, void *aux) {
  netaddr a;
  const char *why;
  if (parse_ip(args[0].s, args[0].n, &a, &why)) return ip_error(ctx, &args[0], why);
  char t[48];
  size_t n = format_ip(&a, t);
  return value_bool(n == args[0].n && memcmp(t, args[0].s, n) == 0);
}

static value fn_family(eval_ctx *ctx, const value *args, uint32_t nargs, void *aux) {
  netaddr a;
  if (ip_of(&args[0], &a)) return NO_OVERLOAD;
  return value_int(a.v4 ? 4 : 6);
}

static int all_zero(const uint8_t *b, int n) {
  for (int i = 0; i < n; i++)
    if (b[i]) return 0;
  return 1;
}

static int is_unspecified(const netaddr *a) { return all_zero(a->b, a->v4 ? 4 : 16); }

static int is_loopback(const netaddr *a) {
  if (a->v4) return a->b[0] == 127;
  return all_zero(a->b, 15) && a->b[15] == 1;
}

static int is_multicast(const netaddr *a) {
  return a->v4 ? (a->b[0] & 0xf0) == 0xe0 : a->b[0] == 0xff;
}

static int is_ll_unicast(const netaddr *a) {
  if (a->v4) return a->b[0] == 169 && a->b[1] == 254;
  return a->b[0] == 0xfe && (a->b[1] & 0xc0) == 0x80;
}

static int is_ll_multicast(const netaddr *a) {
  if (a->v4) return a->b[0] == 224 && a->b[1] == 0 && a->b[2] == 0;
  return a->b[0] == 0xff && a->b[1] == 0x02;
}

static int is_global_unicast(const netaddr *a) {
  if (a->v4 && a->b[0] == 255 && a->b[1] == 255 && a->b[2] == 255 && a->b[3] == 255) return 0;
  return !is_unspecified(a) && !is_loopback(a) && !is_multicast(a) && !is_ll_unicast(a);
}

#define IP_PREDICATE(fname, pred)                                                   \
  static value fname(eval_ctx *ctx, const value *args, uint32_t nargs, void *aux) { \
    netaddr a;                                                                      \
    if (ip_of(&args[0], &a)) return NO_OVERLOAD;                                    \
    return value_bool(pred(&a));                                                    \
  }

IP_PREDICATE(fn_is_unspecified, is_unspecified)
IP_PREDICATE(fn_is_loopback, is_loopback)
IP_PREDICATE(fn_is_ll_multicast, is_ll_multicast)
IP_PREDICATE(fn_is_ll_unicast, is_ll_unicast)
IP_PREDICATE(fn_is_global_unicast, is_global_unicast)

/* --------------------------------------------------------------- CIDRs */

static value fn_is_cidr(eval_ctx *ctx, const value *args, uint32_t nargs, void *aux) {
  netaddr a;
  int bits;
  const char *why;
  return value_bool(parse_cidr(args[0].s, args[0].n, &a, &bits, &why) == 0);
}

static value fn_cidr(eval_ctx *ctx, const value *args, uint32_t nargs, void *aux) {
  if (args[0].flags & VF_CIDR) return args[0];
  netaddr a;
  int bits;
  const char *why;
  if (parse_cidr(args[0].s, args[0].n, &a, &bits, &why)) return cidr_error(ctx, &args[0], why);
  return make_cidr(ctx, &a, bits);
}

/* Whether the first `bits` bits of x and y agree. */
static int same_prefix(const netaddr *x, const netaddr *y, int bits) {
  int whole = bits / 8, rest = bits % 8;
  if (memcmp(x->b, y->b, (size_t)whole) != 0) return 0;
  if (!rest) return 1;
  uint8_t mask = (uint8_t)(0xff << (8 - rest));
  return (x->b[whole] & mask) == (y->b[whole] & mask);
}

static value fn_contains_ip(eval_ctx *ctx, const value *args, uint32_t nargs, void *aux) {
  netaddr net, a;
  int bits;
  if (cidr_of(&args[0], &net, &bits)) return NO_OVERLOAD;
  if (args[1].flags & VF_IP) {
    if (ip_of(&args[1], &a)) return NO_OVERLOAD;
  } else {
    const char *why;
    if (args[1].flags & VF_CIDR) return NO_OVERLOAD;
    if (parse_ip(args[1].s, args[1].n, &a, &why)) return ip_error(ctx, &args[1], why);
  }
  return value_bool(net.v4 == a.v4 && same_prefix(&net, &a, bits));
}

int net_contains_ip_fast(const value *cidr, const value *ip) {
  const uint8_t want = VF_NETBIN | VF_CIDR;
  if (cidr->kind != V_STRING || ip->kind != V_STRING || (cidr->flags & want) != want ||
      (ip->flags & (VF_NETBIN | VF_IP | VF_CIDR)) != (VF_NETBIN | VF_IP))
    return -1;
  /* straight from the parsed forms: family, prefix length, address */
  const uint8_t *c = (const uint8_t *)cidr->s + cidr->n + 1,
                *a = (const uint8_t *)ip->s + ip->n + 1;
  if (c[0] != a[0]) return 0;
  int bits = c[1], whole = bits / 8, rest = bits % 8;
  for (int i = 0; i < whole; i++)
    if (c[2 + i] != a[2 + i]) return 0;
  uint8_t mask = (uint8_t)(0xff << (8 - rest));
  return !rest || ((c[2 + whole] ^ a[2 + whole]) & mask) == 0;
}

static value fn_contains_cidr(eval_ctx *ctx, const value *args, uint32_t nargs, void *aux) {
  netaddr outer, inner;
  int obits, ibits;
  if (cidr_of(&args[0], &outer, &obits)) return NO_OVERLOAD;
  if (args[1].flags & VF_CIDR) {
    if (cidr_of(&args[1], &inner, &ibits)) return NO_OVERLOAD;
  } else {
    const char *why;
    if (args[1].flags & VF_IP) return NO_OVERLOAD;
    if (parse_cidr(args[1].s, args[1].n, &inner, &ibits, &why))
      return cidr_error(ctx, &args[1], why);
  }
  return value_bool(outer.v4 == inner.v4 && ibits >= obits && same_prefix(&outer, &inner, obits));
}

static value fn_cidr_ip(eval_ctx *ctx, const value *args, uint32_t nargs, void *aux) {
  netaddr a;
  int bits;
  if (cidr_of(&args[0], &a, &bits)) return NO_OVERLOAD;
  return make_ip(ctx, &a);
}

static value fn_masked(eval_ctx *ctx, const value *args, uint32_t nargs, void *aux) {
  netaddr a;
  int bits;
  if (cidr_of(&args[0], &a, &bits)) return NO_OVERLOAD;
  int len = a.v4 ? 4 : 16;
  for (int i = 0; i < len; i++) {
    int keep = bits - i * 8;
    if (keep <= 0)
      a.b[i] = 0;
    else if (keep < 8)
      a.b[i] &= (uint8_t)(0xff << (8 - keep));
  }
  return make_cidr(ctx, &a, bits);
}

static value fn_prefix_length(eval_ctx *ctx, const value *args, uint32_t nargs, void *aux) {
  netaddr a;
  int bits;
  if (cidr_of(&args[0], &a, &bits)) return NO_OVERLOAD;
  return value_int(bits);
}

#define S V_STRING

const builtin lib_net_builtins[] = {
    {"isIP", 0, 1, {S}, fn_is_ip, NULL, NULL, 0},
    {"ip", 0, 1, {S}, fn_ip, NULL, NULL, 0},
    {"ip.isCanonical", 0, 1, {S}, fn_ip_is_canonical, NULL, NULL, 0},
    {"family", 1, 1, {S}, fn_family, NULL, NULL, 0},
    {"isUnspecified", 1, 1, {S}, fn_is_unspecified, NULL, NULL, 0},
    {"isLoopback", 1, 1, {S}, fn_is_loopback, NULL, NULL, 0},
    {"isLinkLocalMulticast", 1, 1, {S}, fn_is_ll_multicast, NULL, NULL, 0},
    {"isLinkLocalUnicast", 1, 1, {S}, fn_is_ll_unicast, NULL, NULL, 0},
    {"isGlobalUnicast", 1, 1, {S}, fn_is_global_unicast, NULL, NULL, 0},
    {"isCIDR", 0, 1, {S}, fn_is_cidr, NULL, NULL, 0},
    {"cidr", 0, 1, {S}, fn_cidr, NULL, NULL, 0},
    {"containsIP", 1, 2, {S, S}, fn_contains_ip, NULL, NULL, 0},
    {"containsCIDR", 1, 2, {S, S}, fn_contains_cidr, NULL, NULL, 0},
    {"ip", 1, 1, {S}, fn_cidr_ip, NULL, NULL, 0},
    {"masked", 1, 1, {S}, fn_masked, NULL, NULL, 0},
    {"prefixLength", 1, 1, {S}, fn_prefix_length, NULL, NULL, 0},
    {0},
};
