#!/bin/sh
# Runs inside the bundle builder: builds CPython X.Y from Debian's source package (the builder's Debian ships
# only Python 3.11; no other registry is reachable) into PREFIX, linked against the builder's glibc, so that a
# bundle needing a newer Python runs in the same images as the others. Usage: cpython.sh X.Y PREFIX
set -eu
version="$1"
prefix="$2"
work=/tmp/agentcompass-cpython
mkdir -p "$work"
cd "$work"
echo "deb-src http://deb.debian.org/debian trixie main" > /etc/apt/sources.list.d/agentcompass-cpython-src.list
apt-get update -qq
apt-get source --download-only -qq "python$version"
rm -f /etc/apt/sources.list.d/agentcompass-cpython-src.list
rm -rf /var/lib/apt/lists/*
tarball=$(ls python"$version"_*.orig.tar.* | head -n 1)
echo "agentcompass-bundle: building CPython from $tarball"
tar xf "$tarball"
cd "$(tar tf "$tarball" | head -n 1 | cut -d/ -f1)"
./configure --quiet --prefix="$prefix" --with-ensurepip=install --disable-test-modules >/dev/null
make -s -j"$(nproc)" >/dev/null 2>make.err || { tail -n 40 make.err; exit 1; }
make -s install >/dev/null 2>install.err || { tail -n 40 install.err; exit 1; }
rm -rf "$prefix/lib/python$version/test" "$prefix/lib/python$version/idlelib" \
       "$prefix/lib/python$version/tkinter" "$prefix/lib/python$version/turtledemo"
"$prefix/bin/python$version" -c "import ssl, ctypes, sqlite3, lzma, bz2, zlib, uuid; print('agentcompass-bundle: CPython', ssl.OPENSSL_VERSION)"
cd /
rm -rf "$work"
