/* cmd_bundle.c — `verdict bundle`: the signed bundle files a server pulls
 * (`verdict serve --bundle-url`): an ed25519 key pair, a bundle folder
 * packed as a .tar.gz, its detached signature made and checked. The
 * formats are in src/server/bundle.h and docs/deploy.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "server/bundle.h"

const char cmd_bundle_help[] =
    "usage: verdict bundle keygen --out NAME\n"
    "       verdict bundle pack DIR -o FILE.tar.gz\n"
    "       verdict bundle sign --key NAME.key FILE.tar.gz\n"
    "       verdict bundle verify --pub NAME.pub FILE.tar.gz [--sig FILE.sig]\n"
    "\n"
    "The files `verdict serve --bundle-url` pulls: a policy bundle folder packed\n"
    "as a .tar.gz and its detached ed25519 signature beside it (FILE.tar.gz.sig).\n"
    "\n"
    "  keygen   writes NAME.key (the private key, PEM, mode 0600; never over an\n"
    "           existing file) and NAME.pub (the public key, PEM), which the\n"
    "           servers are given with --bundle-pubkey\n"
    "  pack     packs the bundle folder DIR: regular files and folders only, in\n"
    "           name order, names starting with '.' (such as .verdict) left out;\n"
    "           a link or special file is an error. Check it first: verdict check DIR\n"
    "  sign     writes FILE.tar.gz.sig: one line, the base64 of the 64-byte\n"
    "           ed25519 signature over the file's bytes exactly (no pre-hash)\n"
    "  verify   checks the signature (FILE.tar.gz.sig unless --sig names it)\n"
    "\n"
    "options:\n"
    "      --out NAME   keygen: the two files' name without .key and .pub\n"
    "  -o, --output FILE  pack: the .tar.gz to write (replaced if there)\n"
    "      --key FILE   sign: the private key\n"
    "      --pub FILE   verify: the public key\n"
    "      --sig FILE   verify: the signature file\n"
    "  -h, --help       this text\n"
    "\n"
    "Exit status: 0 done (verify: the signature is good); 1 the work failed\n"
    "(verify: the signature is bad or missing, or the key is not an ed25519\n"
    "public key); 2 bad usage.\n"
    "\n"
    "examples:\n"
    "  verdict bundle keygen --out release\n"
    "  verdict bundle pack policies -o policies.tar.gz\n"
    "  verdict bundle sign --key release.key policies.tar.gz\n"
    "  verdict bundle verify --pub release.pub policies.tar.gz\n"
    "\n"
    "Publishing and pulling: docs/deploy.md (\"Bundles pulled from a server, signed\")\n";

static int usage_error(const char *msg, const char *arg) {
  return cli_usage_error("bundle", msg, arg);
}

static int fail(const char *sub, const char *why) {
  fprintf(stderr, "verdict bundle %s: %s\n", sub, why);
  return 1;
}

/* Options of one subcommand: --NAME VALUE pairs into vals (by the index of
 * names), one positional argument into *pos. 0 or a usage error's status. */
static int parse(int argc, char **argv, const char *const *names, const char **vals, int nnames,
                 const char **pos) {
  *pos = NULL;
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i];
    int k = -1;
    for (int j = 0; j < nnames && k < 0; j++)
      if (strcmp(a, names[j]) == 0 || (strcmp(names[j], "--output") == 0 && strcmp(a, "-o") == 0))
        k = j;
    if (k >= 0) {
      if (i + 1 >= argc || !*argv[i + 1]) return usage_error("missing value after", a);
      vals[k] = argv[++i];
    } else if (a[0] == '-' && a[1]) {
      return usage_error("unknown option", a);
    } else if (*pos) {
      return usage_error("unexpected argument", a);
    } else {
      *pos = a;
    }
  }
  return 0;
}

static int keygen(int argc, char **argv) {
  static const char *const names[] = {"--out"};
  const char *vals[1] = {NULL}, *pos;
  int rc = parse(argc, argv, names, vals, 1, &pos);
  if (rc) return rc;
  if (pos) return usage_error("unexpected argument", pos);
  if (!vals[0]) return usage_error("keygen needs --out NAME", NULL);
  char why[700];
  if (bundle_keygen(vals[0], why, sizeof why) != 0) return fail("keygen", why);
  printf("wrote %s.key (private, keep it off the servers) and %s.pub\n", vals[0], vals[0]);
  return 0;
}

static int pack(int argc, char **argv) {
  static const char *const names[] = {"--output"};
  const char *vals[1] = {NULL}, *pos;
  int rc = parse(argc, argv, names, vals, 1, &pos);
  if (rc) return rc;
  if (!pos) return usage_error("pack needs the bundle folder DIR", NULL);
  if (!vals[0]) return usage_error("pack needs -o FILE.tar.gz", NULL);
  char why[700];
  if (bundle_pack(pos, vals[0], why, sizeof why) != 0) return fail("pack", why);
  printf("wrote %s\n", vals[0]);
  return 0;
}

static int sign(int argc, char **argv) {
  static const char *const names[] = {"--key"};
  const char *vals[1] = {NULL}, *pos;
  int rc = parse(argc, argv, names, vals, 1, &pos);
  if (rc) return rc;
  if (!pos) return usage_error("sign needs the FILE.tar.gz to sign", NULL);
  if (!vals[0]) return usage_error("sign needs --key NAME.key", NULL);
  size_t len;
  char *data = cli_read_file("bundle sign", pos, &len);
  if (!data) return 1;
  char sig[90], why[700];
  rc = bundle_sign(vals[0], data, len, sig, why, sizeof why);
  free(data);
  if (rc != 0) return fail("sign", why);
  size_t pl = strlen(pos) + 5;
  char *out = malloc(pl);
  if (!out) return fail("sign", "out of memory");
  snprintf(out, pl, "%s.sig", pos);
  FILE *f = cli_open_file("bundle sign", out, "w");
  rc = 1;
  if (f) {
    int bad = fputs(sig, f) < 0;
    if (fclose(f) != 0 || bad)
      fprintf(stderr, "verdict bundle sign: %s: write error\n", out);
    else
      printf("wrote %s\n", out), rc = 0;
  }
  free(out);
  return rc;
}

static int verify(int argc, char **argv) {
  static const char *const names[] = {"--pub", "--sig"};
  const char *vals[2] = {NULL, NULL}, *pos;
  int rc = parse(argc, argv, names, vals, 2, &pos);
  if (rc) return rc;
  if (!pos) return usage_error("verify needs the FILE.tar.gz to check", NULL);
  if (!vals[0]) return usage_error("verify needs --pub NAME.pub", NULL);
  char why[700], *pem = NULL, *sigpath = NULL;
  if (bundle_pubkey_load(vals[0], &pem, why, sizeof why) != 0) return fail("verify", why);
  if (!vals[1]) {
    size_t pl = strlen(pos) + 5;
    if (!(sigpath = malloc(pl))) return free(pem), fail("verify", "out of memory");
    snprintf(sigpath, pl, "%s.sig", pos);
  }
  const char *sp = vals[1] ? vals[1] : sigpath;
  size_t len = 0, slen = 0;
  char *data = cli_read_file("bundle verify", pos, &len);
  char *sig = data ? cli_read_file("bundle verify", sp, &slen) : NULL;
  rc = 1;
  if (data && sig) {
    int v = bundle_verify(pem, data, len, sig, slen, why, sizeof why);
    if (v == 0) {
      printf("%s: good signature (%s)\n", pos, vals[0]);
      rc = 0;
    } else {
      fprintf(stderr, "verdict bundle verify: %s: %s: %s\n", pos, sp, why);
    }
  }
  free(data);
  free(sig);
  free(sigpath);
  free(pem);
  return rc;
}

int cmd_bundle(int argc, char **argv) {
  if (argc < 2) return usage_error("give keygen, pack, sign or verify", NULL);
  const char *sub = argv[1];
  if (strcmp(sub, "keygen") == 0) return keygen(argc, argv);
  if (strcmp(sub, "pack") == 0) return pack(argc, argv);
  if (strcmp(sub, "sign") == 0) return sign(argc, argv);
  if (strcmp(sub, "verify") == 0) return verify(argc, argv);
  return usage_error("unknown subcommand (keygen, pack, sign, verify):", sub);
}
