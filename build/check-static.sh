#!/usr/bin/env bash
# Fails unless the given binary is a statically linked ELF executable, as a
# release pipeline would check before shipping it into /opt/cni/bin.
set -euo pipefail
bin=${1:?usage: check-static.sh BINARY}
if ! head -c4 "$bin" | grep -q 'ELF'; then
	echo "check-static: $bin is not an ELF binary" >&2
	exit 1
fi
# A dynamic executable has a PT_INTERP program header naming the loader.
if LC_ALL=C grep -qa -e '/lib64/ld-linux' -e '/lib/ld-linux' -e '/lib/ld-musl' "$bin"; then
	echo "check-static: $bin is dynamically linked (has an ELF interpreter)" >&2
	exit 1
fi
if command -v ldd >/dev/null && ldd "$bin" 2>&1 | grep -q '=>'; then
	echo "check-static: $bin links shared libraries:" >&2
	ldd "$bin" >&2
	exit 1
fi
echo "check-static: $bin is statically linked"
