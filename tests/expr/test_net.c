/* test_net.c — IP and CIDR functions of lib_net.c, called through their
 * table: what parses (Go net/netip with Kubernetes' restrictions), the
 * canonical text, the address classes, containment and masking. */
#include <stdarg.h>

#include "expr/lib.h"
#include "test.h"

static arena A;
static eval_ctx C;

static value call(const char *name, int receiver, uint32_t n, ...) {
  value args[4];
  va_list ap;
  va_start(ap, n);
  for (uint32_t i = 0; i < n; i++) args[i] = va_arg(ap, value);
  va_end(ap);
  for (const builtin *b = lib_net_builtins; b->name; b++) {
    if (strcmp(b->name, name) != 0 || b->receiver != receiver || b->nargs != n) continue;
    int ok = 1;
    for (uint32_t i = 0; i < n; i++)
      if (b->kinds[i] != K_ANY && b->kinds[i] != args[i].kind) ok = 0;
    if (ok) return b->fn(&C, args, n, NULL);
  }
  return VALUE_ERR("no matching overload");
}

static value S(const char *s) {
  value v = value_str(s, (uint32_t)strlen(s));
  v.flags = VF_ASCII;
  return v;
}

static value ip(const char *s) { return call("ip", 0, 1, S(s)); }
static value cidr(const char *s) { return call("cidr", 0, 1, S(s)); }

static int text_is(value v, const char *want) {
  return v.kind == V_STRING && v.n == strlen(want) && memcmp(v.s, want, v.n) == 0;
}

static int is_true(value v) { return v.kind == V_BOOL && v.b; }
static int is_false(value v) { return v.kind == V_BOOL && !v.b; }

static void test_is_ip_accepts_what_netip_and_kubernetes_accept(void) {
  const char *good[] = {"127.0.0.1",
                        "0.0.0.0",
                        "255.255.255.255",
                        "::1",
                        "::",
                        "2001:db8::abcd",
                        "2001:DB8::ABCD",
                        "fe80::1",
                        "1:2:3:4:5:6:7:8",
                        "1::",
                        "::1.2.3.4",
                        "1:2:3:4:5:6:1.2.3.4",
                        "0:0:0:0:0:0:0:1",
                        "2001:db8:0:0:0:0:0:abcd"};
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
    CHECK_MSG(is_true(call("isIP", 0, 1, S(good[i]))), "isIP('%s')", good[i]);
  const char *bad[] = {"",
                       "127.0.0.256",
                       "127.0.0",
                       "127.0.0.1.1",
                       "127.00.0.1",
                       "01.2.3.4",
                       "1.2.3.4 ",
                       " 1.2.3.4",
                       "1..2.3",
                       ":::1",
                       "1:2:3:4:5:6:7:8:9",
                       "1:2:3:4:5:6:7",
                       "1::2::3",
                       "12345::1",
                       "::ffff:1.2.3.4", /* IPv4-mapped */
                       "fe80::1%eth0",   /* zone */
                       "1:2:3:4:5:6:7::8" /* "::" standing for nothing */,
                       "1:",
                       ":1",
                       "::1.2.3",
                       "1:2:3:4:5:6:7:1.2.3.4",
                       "g::1",
                       "localhost",
                       "10.0.0.0/8"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    CHECK_MSG(is_false(call("isIP", 0, 1, S(bad[i]))), "isIP('%s') should be false", bad[i]);
  value e = ip("127.0.0.256");
  CHECK(e.kind == V_ERROR && strstr(e.s, "127.0.0.256") != NULL);
  CHECK(ip("::ffff:1.2.3.4").kind == V_ERROR);
}

static void test_ip_values_are_canonical_tagged_strings(void) {
  value v = ip("2001:DB8:0:0:0:0:0:ABCD");
  CHECK(text_is(v, "2001:db8::abcd") && (v.flags & VF_IP));
  CHECK(text_is(ip("0:0:0:0:0:0:0:1"), "::1"));
  CHECK(text_is(ip("0:0:0:0:0:0:0:0"), "::"));
  CHECK(text_is(ip("1:0:0:2:0:0:0:3"), "1:0:0:2::3"));      /* longest zero run */
  CHECK(text_is(ip("1:0:0:2:0:0:3:4"), "1::2:0:0:3:4"));    /* first of equal runs */
  CHECK(text_is(ip("1:0:2:3:4:5:6:7"), "1:0:2:3:4:5:6:7")); /* one zero group stays */
  CHECK(text_is(ip("1:2:3:4:5:6:7:0"), "1:2:3:4:5:6:7:0"));
  CHECK(text_is(ip("1:2:3:4:5:6::"), "1:2:3:4:5:6::"));
  CHECK(text_is(ip("::1.2.3.4"), "::102:304"));
  CHECK(ip("192.168.000.1").kind == V_ERROR);
  /* ip() of an IP value is the same value */
  CHECK(text_is(call("ip", 0, 1, v), "2001:db8::abcd"));
  CHECK(is_true(call("ip.isCanonical", 0, 1, S("127.0.0.1"))));
  CHECK(is_true(call("ip.isCanonical", 0, 1, S("2001:db8::abcd"))));
  CHECK(is_false(call("ip.isCanonical", 0, 1, S("2001:DB8::ABCD"))));
  CHECK(is_false(call("ip.isCanonical", 0, 1, S("2001:db8::0:0:0:abcd"))));
  CHECK(call("ip.isCanonical", 0, 1, S("nope")).kind == V_ERROR);
}

static void test_ip_classes(void) {
  CHECK(call("family", 1, 1, ip("127.0.0.1")).i == 4);
  CHECK(call("family", 1, 1, ip("::1")).i == 6);
  /* methods need an IP value, not any string */
  CHECK(call("family", 1, 1, S("127.0.0.1")).kind == V_ERROR);
  CHECK(is_true(call("isUnspecified", 1, 1, ip("0.0.0.0"))));
  CHECK(is_true(call("isUnspecified", 1, 1, ip("::"))));
  CHECK(is_false(call("isUnspecified", 1, 1, ip("::1"))));
  CHECK(is_true(call("isLoopback", 1, 1, ip("127.1.2.3"))));
  CHECK(is_true(call("isLoopback", 1, 1, ip("::1"))));
  CHECK(is_false(call("isLoopback", 1, 1, ip("192.168.0.1"))));
  CHECK(is_false(call("isLoopback", 1, 1, ip("2001:db8::abcd"))));
  CHECK(is_true(call("isLinkLocalMulticast", 1, 1, ip("224.0.0.1"))));
  CHECK(is_false(call("isLinkLocalMulticast", 1, 1, ip("224.0.1.1"))));
  CHECK(is_true(call("isLinkLocalMulticast", 1, 1, ip("ff02::1"))));
  CHECK(is_false(call("isLinkLocalMulticast", 1, 1, ip("fd00::1"))));
  CHECK(is_true(call("isLinkLocalUnicast", 1, 1, ip("169.254.169.254"))));
  CHECK(is_false(call("isLinkLocalUnicast", 1, 1, ip("192.168.0.1"))));
  CHECK(is_true(call("isLinkLocalUnicast", 1, 1, ip("fe80::1"))));
  CHECK(is_true(call("isLinkLocalUnicast", 1, 1, ip("febf::1"))));
  CHECK(is_false(call("isLinkLocalUnicast", 1, 1, ip("fd80::1"))));
  CHECK(is_true(call("isGlobalUnicast", 1, 1, ip("192.168.0.1"))));
  CHECK(is_true(call("isGlobalUnicast", 1, 1, ip("10.0.0.1"))));
  CHECK(is_false(call("isGlobalUnicast", 1, 1, ip("255.255.255.255"))));
  CHECK(is_false(call("isGlobalUnicast", 1, 1, ip("0.0.0.0"))));
  CHECK(is_false(call("isGlobalUnicast", 1, 1, ip("224.0.0.1"))));
  CHECK(is_true(call("isGlobalUnicast", 1, 1, ip("2001:db8::abcd"))));
  CHECK(is_false(call("isGlobalUnicast", 1, 1, ip("ff00::1"))));
  CHECK(is_false(call("isGlobalUnicast", 1, 1, ip("fe80::1"))));
}

static void test_cidr_parsing_and_parts(void) {
  CHECK(is_true(call("isCIDR", 0, 1, S("192.168.0.0/16"))));
  CHECK(is_true(call("isCIDR", 0, 1, S("::1/128"))));
  CHECK(is_true(call("isCIDR", 0, 1, S("0.0.0.0/0"))));
  CHECK(is_true(call("isCIDR", 0, 1, S("192.168.0.1/24")))); /* host bits are allowed */
  const char *bad[] = {
      "192.168.0.0/33", "::1/129",        "192.168.0.0/",      "192.168.0.0",    "192.168.0.0/08",
      "192.168.0.0/-1", "192.168.0.0/+8", "::ffff:1.2.3.4/96", "fe80::%eth0/64", "/8",
      "1.2.3.4/8/8",    "10.0.0.0/1000"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    CHECK_MSG(is_false(call("isCIDR", 0, 1, S(bad[i]))), "isCIDR('%s') should be false", bad[i]);
  CHECK(cidr("192.168.0.0/33").kind == V_ERROR);
  value c = cidr("2001:DB8:1::/32");
  CHECK(text_is(c, "2001:db8:1::/32") && (c.flags & VF_CIDR));
  CHECK(text_is(call("masked", 1, 1, c), "2001:db8::/32"));
  CHECK(text_is(call("masked", 1, 1, cidr("192.168.0.1/24")), "192.168.0.0/24"));
  CHECK(text_is(call("masked", 1, 1, cidr("192.168.255.255/17")), "192.168.128.0/17"));
  CHECK(text_is(call("masked", 1, 1, cidr("10.1.2.3/0")), "0.0.0.0/0"));
  value i = call("ip", 1, 1, cidr("192.168.0.1/24"));
  CHECK(text_is(i, "192.168.0.1") && (i.flags & VF_IP));
  CHECK(call("family", 1, 1, i).i == 4);
  CHECK(call("prefixLength", 1, 1, cidr("192.168.0.0/16")).i == 16);
  CHECK(call("prefixLength", 1, 1, cidr("::1/128")).i == 128);
  /* a plain string or an IP is not a CIDR receiver */
  CHECK(call("prefixLength", 1, 1, S("10.0.0.0/8")).kind == V_ERROR);
  CHECK(call("prefixLength", 1, 1, ip("10.0.0.1")).kind == V_ERROR);
}

static void test_cidr_containment(void) {
  value net = cidr("192.168.0.0/24");
  CHECK(is_true(call("containsIP", 1, 2, net, ip("192.168.0.1"))));
  CHECK(is_false(call("containsIP", 1, 2, net, ip("192.168.1.1"))));
  CHECK(is_true(call("containsIP", 1, 2, net, S("192.168.0.255"))));
  CHECK(is_false(call("containsIP", 1, 2, net, S("192.168.1.1"))));
  CHECK(is_false(call("containsIP", 1, 2, net, ip("::1"))));
  CHECK(call("containsIP", 1, 2, net, S("not an ip")).kind == V_ERROR);
  CHECK(is_true(call("containsIP", 1, 2, cidr("0.0.0.0/0"), S("8.8.8.8"))));
  CHECK(is_false(call("containsIP", 1, 2, cidr("0.0.0.0/0"), S("::1"))));
  CHECK(is_true(call("containsIP", 1, 2, cidr("10.0.0.0/9"), S("10.127.255.255"))));
  CHECK(is_false(call("containsIP", 1, 2, cidr("10.0.0.0/9"), S("10.128.0.0"))));
  CHECK(is_true(call("containsIP", 1, 2, cidr("2001:db8::/32"), ip("2001:db8::1"))));
  CHECK(is_false(call("containsIP", 1, 2, cidr("2001:db8::/32"), S("2001:dc8::1"))));

  CHECK(is_true(call("containsCIDR", 1, 2, net, cidr("192.168.0.0/25"))));
  CHECK(is_false(call("containsCIDR", 1, 2, net, cidr("192.168.0.0/23"))));
  CHECK(is_true(call("containsCIDR", 1, 2, net, S("192.168.0.128/25"))));
  CHECK(is_true(call("containsCIDR", 1, 2, net, S("192.168.0.0/24"))));
  CHECK(is_true(call("containsCIDR", 1, 2, cidr("192.168.0.0/16"), S("192.168.10.0/24"))));
  CHECK(is_true(call("containsCIDR", 1, 2, cidr("10.0.0.0/8"), S("10.1.0.0/16"))));
  CHECK(is_false(call("containsCIDR", 1, 2, cidr("192.168.1.0/24"), S("192.168.2.0/24"))));
  CHECK(is_false(call("containsCIDR", 1, 2, cidr("::/0"), S("10.0.0.0/8"))));
  CHECK(is_true(call("containsCIDR", 1, 2, cidr("2001:db8::/32"), S("2001:db8::/33"))));
  CHECK(is_false(call("containsCIDR", 1, 2, cidr("2001:db8::/32"), S("2001:db8::/31"))));
  CHECK(call("containsCIDR", 1, 2, net, S("192.168.0.0")).kind == V_ERROR);
  CHECK(call("containsCIDR", 1, 2, net, ip("192.168.0.1")).kind == V_ERROR);
}

int main(void) {
  arena_init(&A, NULL, 0, 0);
  C.arena = &A;
  TEST_RUN(test_is_ip_accepts_what_netip_and_kubernetes_accept);
  TEST_RUN(test_ip_values_are_canonical_tagged_strings);
  TEST_RUN(test_ip_classes);
  TEST_RUN(test_cidr_parsing_and_parts);
  TEST_RUN(test_cidr_containment);
  arena_free(&A);
  TEST_END();
}
