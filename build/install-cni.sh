#!/usr/bin/env bash
# install-cni.sh: install calico-aio on a host as the Calico CNI plugin and,
# optionally, as the calico-node systemd service. The DaemonSet's init
# container runs it with DESTDIR=/host; on a plain host run it as root.
#
# What it installs (every path below is prefixed with $DESTDIR):
#   $CNI_BIN_DIR/calico-aio                  the binary (copied atomically)
#   $CNI_BIN_DIR/calico, calico-ipam         symlinks to calico-aio
#   $CNI_CONF_DIR/$CNI_CONF_NAME             the CNI network config (0644)
# and with --systemd:
#   /usr/local/bin/calico-aio                the binary
#   /usr/local/bin/calico-node, calicoctl    symlinks to calico-aio
#   $SYSTEMD_DIR/calico-node.service         the unit
#   /etc/calico/calico-node.env              the unit's environment (only if absent)
#
# Running it twice gives the same result; --uninstall removes what it installed.
set -eu
set -o pipefail 2>/dev/null || true
# bash >= 5.2 would expand '&' in ${var//pat/rep} replacements; we want it literal.
shopt -u patsub_replacement 2>/dev/null || true

prog=install-cni
script_dir=$(cd "$(dirname "$0")" && pwd)

usage() {
	cat <<EOF
usage: install-cni.sh [options]

Install calico-aio as the Calico CNI plugin (and with --systemd as the
calico-node service) under DESTDIR.

options:
  --source PATH    the calico-aio binary to install [CALICO_AIO_BINARY]
                   (default: calico-aio next to this script, ../bin/calico-aio,
                   then /usr/local/bin/calico-aio)
  --destdir DIR    root to install into [DESTDIR, default /]
  --systemd        also install calico-node.service and the binary in /usr/local/bin
  --enable         with --systemd and DESTDIR=/: systemctl enable --now calico-node
  --uninstall      remove what an install put there (add --systemd for the service)
  -h, --help       this help

environment:
  CNI_BIN_DIR        CNI plugin directory (default /opt/cni/bin)
  CNI_CONF_DIR       CNI config directory (default /etc/cni/net.d)
  CNI_CONF_NAME      config file name (default 10-calico.conflist)
  CNI_NETWORK_CONFIG a whole conflist to write instead of the default; Calico's
                     placeholders __ETCD_ENDPOINTS__, __KUBECONFIG_FILEPATH__,
                     __CNI_MTU__, __LOG_LEVEL__, __DATASTORE_TYPE__,
                     __ETCD_CA_CERT_FILE__, __ETCD_CERT_FILE__, __ETCD_KEY_FILE__
                     and __KUBERNETES_NODE_NAME__ are filled in
  ETCD_ENDPOINTS     comma-separated etcd URLs (default http://127.0.0.1:2379,
                     the embedded etcd of a calico-node run without endpoints)
  ETCD_CA_CERT_FILE, ETCD_CERT_FILE, ETCD_KEY_FILE   etcd TLS files (host paths)
  KUBECONFIG         kubeconfig path on the host, written to kubernetes.kubeconfig
  CNI_MTU            pod MTU (default 0: what calico-node wrote in /var/lib/calico/mtu)
  LOG_LEVEL          plugin log level (default info)
  SYSTEMD_DIR        unit directory (default /etc/systemd/system)
  SERVICE_FILE       the unit to install (default calico-node.service next to
                     this script, then /usr/local/share/calico-aio/calico-node.service)

The node name is not written into the config: the plugin reads the
nodename file calico-node writes (/var/lib/calico/nodename).
EOF
}

die() {
	echo "$prog: error: $*" >&2
	exit 1
}
say() { echo "$prog: $*"; }

systemd=0
uninstall=0
enable=0
source_bin=${CALICO_AIO_BINARY:-}
while [ $# -gt 0 ]; do
	case $1 in
	--source) [ $# -ge 2 ] || die "--source needs a path"; source_bin=$2; shift ;;
	--source=*) source_bin=${1#*=} ;;
	--destdir) [ $# -ge 2 ] || die "--destdir needs a directory"; DESTDIR=$2; shift ;;
	--destdir=*) DESTDIR=${1#*=} ;;
	--systemd) systemd=1 ;;
	--enable) enable=1 ;;
	--uninstall) uninstall=1 ;;
	-h | --help) usage; exit 0 ;;
	*) usage >&2; die "unknown argument: $1" ;;
	esac
	shift
done

DESTDIR=${DESTDIR:-/}
CNI_BIN_DIR=${CNI_BIN_DIR:-/opt/cni/bin}
CNI_CONF_DIR=${CNI_CONF_DIR:-/etc/cni/net.d}
CNI_CONF_NAME=${CNI_CONF_NAME:-10-calico.conflist}
SYSTEMD_DIR=${SYSTEMD_DIR:-/etc/systemd/system}
ETCD_ENDPOINTS=${ETCD_ENDPOINTS:-}
ETCD_CA_CERT_FILE=${ETCD_CA_CERT_FILE:-}
ETCD_CERT_FILE=${ETCD_CERT_FILE:-}
ETCD_KEY_FILE=${ETCD_KEY_FILE:-}
KUBECONFIG=${KUBECONFIG:-}
CNI_MTU=${CNI_MTU:-0}
LOG_LEVEL=${LOG_LEVEL:-info}
HOST_BIN_DIR=/usr/local/bin
ENV_FILE=/etc/calico/calico-node.env

case $DESTDIR in
/*) ;;
*) die "DESTDIR must be an absolute path, got '$DESTDIR'" ;;
esac
for v in CNI_BIN_DIR CNI_CONF_DIR SYSTEMD_DIR; do
	case ${!v} in
	/*) ;;
	*) die "$v must be an absolute path, got '${!v}'" ;;
	esac
done
case $CNI_CONF_NAME in
*/* | "") die "CNI_CONF_NAME must be a plain file name, got '$CNI_CONF_NAME'" ;;
esac
[ "$enable" = 0 ] || [ "$systemd" = 1 ] || die "--enable needs --systemd"
[ "$enable" = 0 ] || [ "${DESTDIR%/}" = "" ] || die "--enable only works with DESTDIR=/"

# root PATH: PATH under DESTDIR, without a doubled slash.
root() { printf '%s%s' "${DESTDIR%/}" "$1"; }
host_is_root() { [ "${DESTDIR%/}" = "" ]; }

# ---------------------------------------------------------------- helpers

# install_file SRC DST MODE: copy SRC to DST through a temporary file in DST's
# directory and rename it into place, so readers see the old or the new file,
# never a partial one. An identical DST is left alone.
install_file() {
	local src=$1 dst=$2 mode=$3 tmp
	[ ! -d "$dst" ] || die "$dst is a directory"
	if [ -f "$dst" ] && [ ! -L "$dst" ] && cmp -s "$src" "$dst" 2>/dev/null; then
		chmod "$mode" "$dst"
		return 0
	fi
	mkdir -p "$(dirname "$dst")"
	tmp=$(dirname "$dst")/.$(basename "$dst").tmp.$$
	rm -f "$tmp"
	cp "$src" "$tmp" || { rm -f "$tmp"; die "cannot copy $src to $tmp"; }
	chmod "$mode" "$tmp"
	mv -f "$tmp" "$dst" || { rm -f "$tmp"; die "cannot move $tmp to $dst"; }
	say "installed $dst"
}

# write_file DST MODE CONTENT: install_file with CONTENT (plus a final newline).
write_file() {
	local dst=$1 mode=$2 tmp
	mkdir -p "$(dirname "$dst")"
	tmp=$(dirname "$dst")/.$(basename "$dst").new.$$
	printf '%s\n' "$3" >"$tmp" || { rm -f "$tmp"; die "cannot write $tmp"; }
	install_file "$tmp" "$dst" "$mode"
	rm -f "$tmp"
}

# link_to TARGET LINK: make LINK a symlink to TARGET (relative, same
# directory), replacing whatever file is there atomically.
link_to() {
	local target=$1 link=$2 tmp
	[ ! -d "$link" ] || [ -L "$link" ] || die "$link is a directory"
	if [ -L "$link" ] && [ "$(readlink "$link")" = "$target" ]; then
		return 0
	fi
	tmp=$(dirname "$link")/.$(basename "$link").lnk.$$
	rm -f "$tmp"
	ln -s "$target" "$tmp"
	mv -f "$tmp" "$link" || { rm -f "$tmp"; die "cannot move $tmp to $link"; }
	say "linked $link -> $target"
}

# unlink_if_ours LINK TARGET: remove LINK if it is a symlink to TARGET.
unlink_if_ours() {
	if [ -L "$1" ] && [ "$(readlink "$1")" = "$2" ]; then
		rm -f "$1"
		say "removed $1"
	elif [ -e "$1" ] || [ -L "$1" ]; then
		say "left $1 alone: not a link to $2"
	fi
}

remove() {
	if [ -e "$1" ] || [ -L "$1" ]; then
		rm -f "$1"
		say "removed $1"
	fi
}

# json_string VALUE: VALUE as the inside of a JSON string (check_values has
# already refused control characters, the only other thing JSON escapes).
json_string() {
	local s=$1
	s=${s//\\/\\\\}
	s=${s//\"/\\\"}
	printf '%s' "$s"
}

check_values() {
	local v
	for v in ETCD_ENDPOINTS ETCD_CA_CERT_FILE ETCD_CERT_FILE ETCD_KEY_FILE KUBECONFIG LOG_LEVEL NODENAME KUBERNETES_NODE_NAME; do
		case ${!v:-} in
		*[[:cntrl:]]*) die "$v contains control characters" ;;
		esac
	done
	[[ $CNI_MTU =~ ^[0-9]+$ ]] || die "CNI_MTU must be a number, got '$CNI_MTU'"
}

check_endpoints() {
	local e rest=$1, re='^https?://[][A-Za-z0-9.:%_~@-]+(/.*)?$'
	while [ -n "$rest" ]; do
		e=${rest%%,*}
		rest=${rest#*,}
		e=${e// /}
		[ -n "$e" ] || continue
		[[ $e =~ $re ]] ||
			die "ETCD_ENDPOINTS: '$e' is not an http(s) URL (set it to your etcd cluster's client URLs)"
	done
}

find_source() {
	local c
	if [ -n "$source_bin" ]; then
		[ -f "$source_bin" ] || die "source binary $source_bin does not exist or is not a regular file"
		[ -r "$source_bin" ] || die "source binary $source_bin is not readable"
		return 0
	fi
	for c in "$script_dir/calico-aio" "$script_dir/../bin/calico-aio" /usr/local/bin/calico-aio; do
		if [ -f "$c" ] && [ -r "$c" ]; then
			source_bin=$c
			return 0
		fi
	done
	die "source binary not found: tried $script_dir/calico-aio, $script_dir/../bin/calico-aio and /usr/local/bin/calico-aio (use --source PATH or CALICO_AIO_BINARY)"
}

find_service_file() {
	local c
	if [ -n "${SERVICE_FILE:-}" ]; then
		[ -f "$SERVICE_FILE" ] || die "unit file $SERVICE_FILE does not exist"
		return 0
	fi
	for c in "$script_dir/calico-node.service" /usr/local/share/calico-aio/calico-node.service; do
		if [ -f "$c" ]; then
			SERVICE_FILE=$c
			return 0
		fi
	done
	die "unit file not found: tried $script_dir/calico-node.service and /usr/local/share/calico-aio/calico-node.service (set SERVICE_FILE)"
}

# default_conflist prints Calico's usual single-network config.
default_conflist() {
	local eps=${ETCD_ENDPOINTS:-http://127.0.0.1:2379} tls="" k8s=""
	[ -z "$ETCD_CA_CERT_FILE" ] || tls="$tls
      \"etcd_ca_cert_file\": \"$(json_string "$ETCD_CA_CERT_FILE")\","
	[ -z "$ETCD_CERT_FILE" ] || tls="$tls
      \"etcd_cert_file\": \"$(json_string "$ETCD_CERT_FILE")\","
	[ -z "$ETCD_KEY_FILE" ] || tls="$tls
      \"etcd_key_file\": \"$(json_string "$ETCD_KEY_FILE")\","
	[ -z "$KUBECONFIG" ] || k8s=",
      \"kubernetes\": {
        \"kubeconfig\": \"$(json_string "$KUBECONFIG")\"
      }"
	cat <<EOF
{
  "name": "k8s-pod-network",
  "cniVersion": "1.0.0",
  "plugins": [
    {
      "type": "calico",
      "log_level": "$(json_string "$LOG_LEVEL")",
      "datastore_type": "etcdv3",
      "etcd_endpoints": "$(json_string "$eps")",$tls
      "mtu": $CNI_MTU,
      "ipam": {
        "type": "calico-ipam"
      },
      "policy": {
        "type": "k8s"
      }$k8s
    },
    {
      "type": "portmap",
      "snat": true,
      "capabilities": {
        "portMappings": true
      }
    }
  ]
}
EOF
}

# custom_conflist prints CNI_NETWORK_CONFIG with Calico's placeholders filled in.
custom_conflist() {
	local c=$CNI_NETWORK_CONFIG node=${KUBERNETES_NODE_NAME:-${NODENAME:-}}
	if [ -z "$node" ] && [[ $c == *__KUBERNETES_NODE_NAME__* ]]; then
		node=$(hostname 2>/dev/null || cat /proc/sys/kernel/hostname)
	fi
	c=${c//__ETCD_ENDPOINTS__/$(json_string "${ETCD_ENDPOINTS:-http://127.0.0.1:2379}")}
	c=${c//__ETCD_CA_CERT_FILE__/$(json_string "$ETCD_CA_CERT_FILE")}
	c=${c//__ETCD_CERT_FILE__/$(json_string "$ETCD_CERT_FILE")}
	c=${c//__ETCD_KEY_FILE__/$(json_string "$ETCD_KEY_FILE")}
	c=${c//__KUBECONFIG_FILEPATH__/$(json_string "$KUBECONFIG")}
	c=${c//__LOG_LEVEL__/$(json_string "$LOG_LEVEL")}
	c=${c//__DATASTORE_TYPE__/etcdv3}
	c=${c//__CNI_MTU__/$CNI_MTU}
	c=${c//__KUBERNETES_NODE_NAME__/$(json_string "$node")}
	printf '%s\n' "$c"
}

env_file_content() {
	echo "# Environment for calico-node.service (see calico-node --help for every variable)."
	echo "# Written by install-cni.sh only when absent; edit freely."
	if [ -n "$ETCD_ENDPOINTS" ]; then
		echo "ETCD_ENDPOINTS=$ETCD_ENDPOINTS"
	else
		echo "# Empty: calico-node runs an embedded etcd on http://127.0.0.1:2379."
		echo "#ETCD_ENDPOINTS=https://10.0.0.10:2379"
	fi
	[ -z "$ETCD_CA_CERT_FILE" ] || echo "ETCD_CA_CERT_FILE=$ETCD_CA_CERT_FILE"
	[ -z "$ETCD_CERT_FILE" ] || echo "ETCD_CERT_FILE=$ETCD_CERT_FILE"
	[ -z "$ETCD_KEY_FILE" ] || echo "ETCD_KEY_FILE=$ETCD_KEY_FILE"
	if [ -n "${NODENAME:-}" ]; then
		echo "NODENAME=$NODENAME"
	else
		echo "# Default: the hostname."
		echo "#NODENAME="
	fi
	[ -z "$KUBECONFIG" ] || echo "KUBECONFIG=$KUBECONFIG"
}

systemd_running() { host_is_root && command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; }

# ---------------------------------------------------------------- uninstall

if [ "$uninstall" = 1 ]; then
	bindir=$(root "$CNI_BIN_DIR")
	unlink_if_ours "$bindir/calico" calico-aio
	unlink_if_ours "$bindir/calico-ipam" calico-aio
	remove "$bindir/calico-aio"
	remove "$(root "$CNI_CONF_DIR")/$CNI_CONF_NAME"
	if [ "$systemd" = 1 ]; then
		if systemd_running; then
			systemctl disable --now calico-node.service 2>/dev/null || true
		fi
		remove "$(root "$SYSTEMD_DIR")/calico-node.service"
		remove "$(root "$ENV_FILE")"
		rmdir "$(root "$(dirname "$ENV_FILE")")" 2>/dev/null || true
		unlink_if_ours "$(root "$HOST_BIN_DIR")/calico-node" calico-aio
		unlink_if_ours "$(root "$HOST_BIN_DIR")/calicoctl" calico-aio
		remove "$(root "$HOST_BIN_DIR")/calico-aio"
		if systemd_running; then systemctl daemon-reload || true; fi
	elif [ -e "$(root "$SYSTEMD_DIR")/calico-node.service" ]; then
		say "note: $(root "$SYSTEMD_DIR")/calico-node.service is still installed; add --systemd to remove the service too"
	fi
	say "uninstalled"
	exit 0
fi

# ---------------------------------------------------------------- install

find_source
[ "$systemd" = 0 ] || find_service_file
check_values
check_endpoints "$ETCD_ENDPOINTS"

bindir=$(root "$CNI_BIN_DIR")
install_file "$source_bin" "$bindir/calico-aio" 0755
link_to calico-aio "$bindir/calico"
link_to calico-aio "$bindir/calico-ipam"

if [ -n "${CNI_NETWORK_CONFIG:-}" ]; then
	conf=$(custom_conflist)
else
	conf=$(default_conflist)
fi
write_file "$(root "$CNI_CONF_DIR")/$CNI_CONF_NAME" 0644 "$conf"

if [ "$systemd" = 1 ]; then
	hostbin=$(root "$HOST_BIN_DIR")
	install_file "$source_bin" "$hostbin/calico-aio" 0755
	link_to calico-aio "$hostbin/calico-node"
	link_to calico-aio "$hostbin/calicoctl"
	install_file "$SERVICE_FILE" "$(root "$SYSTEMD_DIR")/calico-node.service" 0644
	env=$(root "$ENV_FILE")
	if [ ! -e "$env" ]; then
		content=$(env_file_content)
		write_file "$env" 0644 "$content"
	fi
	if systemd_running; then
		systemctl daemon-reload
		if [ "$enable" = 1 ]; then
			systemctl enable --now calico-node.service
		else
			say "start the agent with: systemctl enable --now calico-node"
		fi
	elif [ "$enable" = 1 ]; then
		die "--enable: systemd is not running here; start calico-node.service yourself"
	fi
fi
say "done"
