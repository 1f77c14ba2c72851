# setup.py — builds the `verdict` extension module against the libverdict
# archive of a CMake build of this repository (docs/bindings.md, "Python").
#
# The archive is linked into the module, so the module carries one copy of
# the engine and needs no libverdict.so at run time; the libraries verdict
# uses (PCRE2, libfyaml, liburcu, libuv, hiredis, zstd) are linked as the
# system's shared ones, through pkg-config.
#
#   VERDICT_BUILD_DIR   the CMake build folder (default: build/ at the top of
#                       the repository); it must hold libverdict.a
import os
import shlex
import subprocess

from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("VERDICT_BUILD_DIR") or os.path.join(TOP, "build")
ARCHIVE = os.path.join(BUILD, "libverdict.a")
DEPS = ["libpcre2-8", "libfyaml", "liburcu-bp", "libuv", "hiredis", "libzstd"]

if not os.path.exists(ARCHIVE):
    raise SystemExit(
        f"{ARCHIVE} is missing: build the library first (make build, or cmake --build build), "
        "or name its build folder in VERDICT_BUILD_DIR")


def pkg_config(*args):
    try:
        out = subprocess.run(["pkg-config", *args, *DEPS], check=True, capture_output=True,
                             text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise SystemExit(f"pkg-config {' '.join(args)} {' '.join(DEPS)} failed: {e} "
                         "(scripts/deps installs the -dev packages)")
    return shlex.split(out)


def version():
    with open(os.path.join(TOP, "include", "verdict.h")) as f:
        parts = {}
        for line in f:
            for k in ("MAJOR", "MINOR", "PATCH"):
                if line.startswith(f"#define VD_VERSION_{k} "):
                    parts[k] = line.split()[2]
    return f"{parts['MAJOR']}.{parts['MINOR']}.{parts['PATCH']}"


setup(
    name="verdict",
    version=version(),
    description="verdict's decision engine, in process",
    ext_modules=[
        Extension(
            "verdict",
            sources=["verdict.c"],
            include_dirs=[os.path.join(TOP, "include")],
            extra_compile_args=["-std=c11", "-Wall", "-Wextra", "-Werror",
                                "-Wno-unused-parameter", "-Wno-missing-field-initializers",
                                "-Wno-cast-function-type"] + pkg_config("--cflags"),
            extra_objects=[ARCHIVE],
            extra_link_args=pkg_config("--libs") + ["-lpthread", "-lm"],
            depends=[ARCHIVE, os.path.join(TOP, "include", "verdict.h")],
        )
    ],
)
