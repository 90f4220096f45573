#!/usr/bin/env bash
# install-cni.sh: install calico-aio on a host as the Calico CNI plugin and,
# optionally, as the calico-node systemd service. The DaemonSet's init
# container runs it with DESTDIR=/host; on a plain host run it as root.
#
# What it installs (every path below is prefixed with $DESTDIR):
#   $CNI_BIN_DIR/calico-aio                  the binary (copied atomically)
#   $CNI_BIN_DIR/calico, calico-ipam         symlinks to calico-aio
#   $CNI_CONF_DIR/$CNI_CONF_NAME             the CNI network config (0644)
#   $CNI_CONF_DIR/calico-kubeconfig          in a Kubernetes pod only: the CNI
#                                            plugin's kubeconfig (0600), from the
#                                            pod's service account token (or, with
#                                            CNI_SERVICE_ACCOUNT, a token requested
#                                            for that account) and CA
# and with --systemd:
#   /usr/local/bin/calico-aio                the binary
#   /usr/local/bin/calico-node, calicoctl    symlinks to calico-aio
#   $SYSTEMD_DIR/calico-node.service         the unit
#   /etc/calico/calico-node.env              the unit's environment (only if absent)
#
# In a pod (the service account token exists) it also writes, if NODE_KUBECONFIG
# is set, a kubeconfig for calico-node's policy controller at that path (not
# under DESTDIR: the DaemonSet shares it with calico-node through an emptyDir).
# --watch-kubeconfig keeps calico-kubeconfig current as the kubelet rotates the
# token (the DaemonSet runs it as a sidecar).
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
  --watch-kubeconfig
                   install nothing else: write calico-kubeconfig, then keep running
                   and rewrite it whenever the service account token or CA changes
                   (the kubelet rotates projected tokens); exits on SIGTERM
  -h, --help       this help

environment:
  CNI_BIN_DIR        CNI plugin directory (default /opt/cni/bin)
  CNI_CONF_DIR       CNI config directory (default /etc/cni/net.d)
  CNI_CONF_NAME      config file name (default 10-calico.conflist)
  CNI_NETWORK_CONFIG a whole conflist to write instead of the default; Calico's
                     placeholders __ETCD_ENDPOINTS__, __KUBECONFIG_FILEPATH__,
                     __CNI_MTU__, __LOG_LEVEL__, __DATASTORE_TYPE__,
                     __ETCD_CA_CERT_FILE__, __ETCD_CERT_FILE__, __ETCD_KEY_FILE__,
                     __KUBERNETES_NODE_NAME__, __KUBERNETES_SERVICE_HOST__,
                     __KUBERNETES_SERVICE_PORT__ and __SERVICEACCOUNT_TOKEN__
                     are filled in
  DATASTORE_TYPE     etcdv3 (default) or kubernetes: the plugin's datastore_type
                     (and __DATASTORE_TYPE__); kubernetes takes no ETCD_* variable
                     and needs a kubeconfig (a pod's, or KUBECONFIG)
  ETCD_ENDPOINTS     comma-separated etcd URLs (default http://127.0.0.1:2379,
                     the embedded etcd of a calico-node run without endpoints)
  ETCD_CA_CERT_FILE, ETCD_CERT_FILE, ETCD_KEY_FILE   etcd TLS files (host paths)
  KUBECONFIG         kubeconfig path on the host, written to kubernetes.kubeconfig
                     instead of the calico-kubeconfig this script writes
  SERVICE_ACCOUNT_PATH  directory with the pod's service account token and
                     ca.crt (default /var/run/secrets/kubernetes.io/serviceaccount);
                     without a token there no kubeconfig is written and the
                     default config has no kubernetes or policy section
  KUBE_CA_FILE       the API server's CA (default \$SERVICE_ACCOUNT_PATH/ca.crt)
  SKIP_TLS_VERIFY    "true": the kubeconfig does not verify the server's certificate
  KUBERNETES_SERVICE_PROTOCOL, KUBERNETES_SERVICE_HOST, KUBERNETES_SERVICE_PORT
                     the API server the kubeconfig points at (protocol default
                     https; the kubelet sets host and port in every pod)
  NODE_KUBECONFIG    in a pod: also write a kubeconfig for calico-node here that
                     reads the token and CA from their files (so it follows
                     rotation); a path in this container, not under DESTDIR
  KUBECONFIG_REFRESH_INTERVAL  seconds between checks of --watch-kubeconfig (default 30)
  CNI_SERVICE_ACCOUNT  in a pod: the CNI plugin's kubeconfig carries a token for
                     this service account (of the pod's namespace), requested with
                     the pod's own token (TokenRequest, needs curl), instead of the
                     pod's token; --watch-kubeconfig requests a new one when a
                     quarter of its validity has passed
  CNI_TOKEN_VALIDITY_SECONDS  that token's lifetime (default 86400, at least 600)
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
watch=0
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
	--watch-kubeconfig) watch=1 ;;
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
DATASTORE_TYPE=${DATASTORE_TYPE:-etcdv3}
ETCD_ENDPOINTS=${ETCD_ENDPOINTS:-}
ETCD_CA_CERT_FILE=${ETCD_CA_CERT_FILE:-}
ETCD_CERT_FILE=${ETCD_CERT_FILE:-}
ETCD_KEY_FILE=${ETCD_KEY_FILE:-}
KUBECONFIG=${KUBECONFIG:-}
CNI_MTU=${CNI_MTU:-0}
LOG_LEVEL=${LOG_LEVEL:-info}
SERVICE_ACCOUNT_PATH=${SERVICE_ACCOUNT_PATH:-/var/run/secrets/kubernetes.io/serviceaccount}
KUBE_CA_FILE=${KUBE_CA_FILE:-$SERVICE_ACCOUNT_PATH/ca.crt}
SKIP_TLS_VERIFY=${SKIP_TLS_VERIFY:-false}
KUBERNETES_SERVICE_PROTOCOL=${KUBERNETES_SERVICE_PROTOCOL:-https}
KUBERNETES_SERVICE_HOST=${KUBERNETES_SERVICE_HOST:-}
KUBERNETES_SERVICE_PORT=${KUBERNETES_SERVICE_PORT:-}
NODE_KUBECONFIG=${NODE_KUBECONFIG:-}
KUBECONFIG_REFRESH_INTERVAL=${KUBECONFIG_REFRESH_INTERVAL:-30}
CNI_SERVICE_ACCOUNT=${CNI_SERVICE_ACCOUNT:-}
CNI_TOKEN_VALIDITY_SECONDS=${CNI_TOKEN_VALIDITY_SECONDS:-86400}
KUBECONFIG_NAME=calico-kubeconfig
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
[ "$watch" = 0 ] || [ "$systemd$uninstall" = 00 ] || die "--watch-kubeconfig goes alone (no --systemd or --uninstall)"
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
	# umask 077: a kubeconfig's token is never readable by others, not
	# even in the temporary file; install_file sets the final mode.
	(umask 077 && printf '%s\n' "$3" >"$tmp") || { rm -f "$tmp"; die "cannot write $tmp"; }
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
	for v in ETCD_ENDPOINTS ETCD_CA_CERT_FILE ETCD_CERT_FILE ETCD_KEY_FILE KUBECONFIG LOG_LEVEL NODENAME KUBERNETES_NODE_NAME \
		SERVICE_ACCOUNT_PATH KUBE_CA_FILE NODE_KUBECONFIG; do
		case ${!v:-} in
		*[[:cntrl:]]*) die "$v contains control characters" ;;
		esac
	done
	[[ $CNI_MTU =~ ^[0-9]+$ ]] || die "CNI_MTU must be a number, got '$CNI_MTU'"
	check_datastore
	check_cni_account
}

# check_datastore: Kubernetes mode takes no etcd setting (one would be ignored).
check_datastore() {
	local v
	case $DATASTORE_TYPE in
	etcdv3) return 0 ;;
	kubernetes) ;;
	*) die "DATASTORE_TYPE must be etcdv3 or kubernetes, got '$DATASTORE_TYPE'" ;;
	esac
	for v in ETCD_ENDPOINTS ETCD_CA_CERT_FILE ETCD_CERT_FILE ETCD_KEY_FILE; do
		[ -z "${!v}" ] || die "$v is set but DATASTORE_TYPE is kubernetes, which uses no etcd: unset it"
	done
}

check_cni_account() {
	[ -n "$CNI_SERVICE_ACCOUNT" ] || return 0
	[[ $CNI_SERVICE_ACCOUNT =~ ^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$ ]] ||
		die "CNI_SERVICE_ACCOUNT: '$CNI_SERVICE_ACCOUNT' is not a service account name"
	{ [[ $CNI_TOKEN_VALIDITY_SECONDS =~ ^[0-9]{3,9}$ ]] && [ "$CNI_TOKEN_VALIDITY_SECONDS" -ge 600 ]; } ||
		die "CNI_TOKEN_VALIDITY_SECONDS must be a number of seconds, at least 600, got '$CNI_TOKEN_VALIDITY_SECONDS'"
	[ -z "$KUBECONFIG" ] || die "CNI_SERVICE_ACCOUNT is set but so is KUBECONFIG, which the CNI plugin would use instead: set one"
	command -v curl >/dev/null 2>&1 || die "CNI_SERVICE_ACCOUNT needs curl to request the account's token"
}

check_endpoints() {
	[ "$DATASTORE_TYPE" = etcdv3 ] || return 0
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

# ---------------------------------------------------------------- kubeconfig
#
# In a pod the CNI plugin gets a kubeconfig of its own, as Calico's install-cni
# writes it: the pod's service account token and the API server's CA copied
# into $CNI_CONF_DIR/calico-kubeconfig, because the plugin runs on the host,
# where the pod's token file has no fixed path. The server is the
# KUBERNETES_SERVICE_* address the kubelet gives every pod. The kubelet
# rotates the token; --watch-kubeconfig follows it.

sa_token() { printf '%s/token' "$SERVICE_ACCOUNT_PATH"; }
# in_pod: the service account token is there, so this runs in a Kubernetes pod.
in_pod() { [ -f "$(sa_token)" ]; }

# yaml_string VALUE: VALUE as a double-quoted YAML scalar (callers have
# refused control characters).
yaml_string() {
	local s=$1
	s=${s//\\/\\\\}
	s=${s//\"/\\\"}
	printf '"%s"' "$s"
}

# kube_server prints the API server's URL, an IPv6 address in brackets.
kube_server() {
	local proto=$KUBERNETES_SERVICE_PROTOCOL host=$KUBERNETES_SERVICE_HOST port=$KUBERNETES_SERVICE_PORT
	case $proto in
	http | https) ;;
	*) die "KUBERNETES_SERVICE_PROTOCOL must be http or https, got '$proto'" ;;
	esac
	[ -n "$host" ] || die "KUBERNETES_SERVICE_HOST is not set (the kubelet sets it in every pod): cannot write the kubeconfig"
	[[ $host =~ ^[][A-Za-z0-9.:_-]+$ ]] || die "KUBERNETES_SERVICE_HOST: '$host' is not a host name or address"
	{ [[ $port =~ ^[0-9]{1,5}$ ]] && [ "$port" -ge 1 ] && [ "$port" -le 65535 ]; } ||
		die "KUBERNETES_SERVICE_PORT must be a port number, got '$port'"
	case $host in
	\[*) ;;
	*:*) host="[$host]" ;;
	esac
	printf '%s://%s:%s' "$proto" "$host" "$port"
}

# read_token prints the service account token.
read_token() {
	local f tok
	f=$(sa_token)
	[ -r "$f" ] || die "cannot read the service account token $f"
	tok=$(<"$f")
	[ -n "$tok" ] || die "the service account token $f is empty"
	[[ $tok != *[[:cntrl:]]* ]] || die "the service account token $f contains control characters"
	printf '%s' "$tok"
}

check_ca() {
	[ -r "$KUBE_CA_FILE" ] || die "cannot read the API server's CA $KUBE_CA_FILE (set KUBE_CA_FILE, or SKIP_TLS_VERIFY=true)"
	grep -q -e '-----BEGIN CERTIFICATE-----' "$KUBE_CA_FILE" || die "$KUBE_CA_FILE holds no PEM certificate"
}

# kubeconfig COMMENT SERVER TLS AUTH prints a kubeconfig with one context;
# TLS and AUTH are the cluster's and the user's YAML lines.
kubeconfig() {
	cat <<EOF
# Written by install-cni.sh: $1
apiVersion: v1
kind: Config
clusters:
  - name: kubernetes
    cluster:
      server: $(yaml_string "$2")
      $3
users:
  - name: calico
    user:
      $4
contexts:
  - name: calico
    context:
      cluster: kubernetes
      user: calico
current-context: calico
EOF
}

# request_token prints a new token for CNI_SERVICE_ACCOUNT, asked for with
# the pod's own token (a TokenRequest, as Calico's calico-node does for its
# calico-cni-plugin account). The pod's token goes to curl on stdin, never
# on its command line.
request_token() {
	local server ns nsfile tok path out code body tls
	server=$(kube_server) || exit 1
	tok=$(read_token) || exit 1
	nsfile=$SERVICE_ACCOUNT_PATH/namespace
	[ -r "$nsfile" ] || die "cannot read the pod's namespace $nsfile (CNI_SERVICE_ACCOUNT is looked up there)"
	ns=$(<"$nsfile")
	[[ $ns =~ ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ ]] || die "$nsfile: '$ns' is not a namespace name"
	if [ "$SKIP_TLS_VERIFY" = true ]; then
		tls=(--insecure)
	else
		check_ca
		tls=(--cacert "$KUBE_CA_FILE")
	fi
	path=/api/v1/namespaces/$ns/serviceaccounts/$CNI_SERVICE_ACCOUNT/token
	body='{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{"expirationSeconds":'$CNI_TOKEN_VALIDITY_SECONDS'}}'
	out=$(printf 'Authorization: Bearer %s\n' "$tok" | curl -sS --max-time 30 -A calico-aio-install-cni "${tls[@]}" -H @- \
		-H 'Content-Type: application/json' -H 'Accept: application/json' -X POST --data "$body" \
		-w '\n%{http_code}' "$server$path" 2>&1) || die "TokenRequest for $ns/$CNI_SERVICE_ACCOUNT: ${out//$'\n'/ }"
	code=${out##*$'\n'}
	out=${out%$'\n'*}
	if [ "$code" != 201 ] && [ "$code" != 200 ]; then
		[[ $out =~ \"message\":[[:space:]]*\"([^\"]*)\" ]] && out=${BASH_REMATCH[1]}
		die "TokenRequest for $ns/$CNI_SERVICE_ACCOUNT: HTTP $code: $out"
	fi
	[[ $out =~ \"token\":[[:space:]]*\"([A-Za-z0-9._-]+)\" ]] || die "TokenRequest for $ns/$CNI_SERVICE_ACCOUNT: no token in the answer"
	printf '%s' "${BASH_REMATCH[1]}"
}

# cni_account names the identity of the CNI plugin's kubeconfig.
cni_account() {
	if [ -n "$CNI_SERVICE_ACCOUNT" ]; then
		printf 'the %s service account' "$CNI_SERVICE_ACCOUNT"
	else
		printf "this pod's service account"
	fi
}

# cni_kubeconfig prints the CNI plugin's kubeconfig: the token and the CA
# themselves, as the plugin runs on the host.
cni_kubeconfig() {
	local server token tls
	server=$(kube_server) || exit 1
	if [ -n "$CNI_SERVICE_ACCOUNT" ]; then
		token=$(request_token) || exit 1
	else
		token=$(read_token) || exit 1
	fi
	if [ "$SKIP_TLS_VERIFY" = true ]; then
		tls="insecure-skip-tls-verify: true"
	else
		check_ca
		tls=$(base64 <"$KUBE_CA_FILE" | tr -d '\n') || die "cannot encode $KUBE_CA_FILE"
		tls="certificate-authority-data: $tls"
	fi
	kubeconfig "the calico CNI plugin's access to the API server, as $(cni_account); rewritten when the token changes." \
		"$server" "$tls" "token: $(yaml_string "$token")"
}

# node_kubeconfig prints calico-node's kubeconfig: the same server, the token
# and the CA by path, so that client-go rereads a rotated token.
node_kubeconfig() {
	local server tls
	server=$(kube_server) || exit 1
	read_token >/dev/null || exit 1
	if [ "$SKIP_TLS_VERIFY" = true ]; then
		tls="insecure-skip-tls-verify: true"
	else
		check_ca
		tls="certificate-authority: $(yaml_string "$KUBE_CA_FILE")"
	fi
	kubeconfig "calico-node's access to the API server, with this pod's service account." \
		"$server" "$tls" "tokenFile: $(yaml_string "$(sa_token)")"
}

# plan_kubeconfig sets kube_path, the kubeconfig the CNI config names (empty:
# none), and cni_kc / node_kc, the kubeconfigs to write (empty: none). It
# writes nothing, so that a failure leaves nothing behind.
plan_kubeconfig() {
	kube_path="" cni_kc="" node_kc=""
	case $SKIP_TLS_VERIFY in
	true | false) ;;
	*) die "SKIP_TLS_VERIFY must be true or false, got '$SKIP_TLS_VERIFY'" ;;
	esac
	if in_pod; then
		if [ -n "$KUBECONFIG" ]; then
			say "KUBECONFIG is set: the CNI plugin uses $KUBECONFIG; not writing $KUBECONFIG_NAME"
			kube_path=$KUBECONFIG
		else
			cni_kc=$(cni_kubeconfig) || exit 1
			kube_path=$CNI_CONF_DIR/$KUBECONFIG_NAME
		fi
		if [ -n "$NODE_KUBECONFIG" ]; then
			node_kc=$(node_kubeconfig) || exit 1
		fi
		return 0
	fi
	kube_path=$KUBECONFIG
	if [ -n "$KUBECONFIG" ]; then
		echo "$prog: no service account token at $(sa_token): not in a Kubernetes pod; the CNI plugin uses KUBECONFIG=$KUBECONFIG" >&2
	else
		echo "$prog: no service account token at $(sa_token): not in a Kubernetes pod, so no kubeconfig is written and the CNI config has no kubernetes or policy section (set KUBECONFIG to give the plugin one)" >&2
	fi
	[ -z "$NODE_KUBECONFIG" ] || echo "$prog: NODE_KUBECONFIG ignored: not in a Kubernetes pod" >&2
	[ -z "$CNI_SERVICE_ACCOUNT" ] || die "CNI_SERVICE_ACCOUNT is set but there is no service account token at $(sa_token) to request its token with: not in a Kubernetes pod"
	[ "$DATASTORE_TYPE" = etcdv3 ] || [ -n "$KUBECONFIG" ] ||
		die "DATASTORE_TYPE=kubernetes needs a kubeconfig for the CNI plugin: run in a Kubernetes pod or set KUBECONFIG"
}

# ---------------------------------------------------------------- conflist

# default_conflist prints Calico's usual single-network config; with a
# kubeconfig the plugin reads pods from the API (policy type k8s).
default_conflist() {
	local eps=${ETCD_ENDPOINTS:-http://127.0.0.1:2379} tls="" k8s="" store
	[ -z "$ETCD_CA_CERT_FILE" ] || tls="$tls
      \"etcd_ca_cert_file\": \"$(json_string "$ETCD_CA_CERT_FILE")\","
	[ -z "$ETCD_CERT_FILE" ] || tls="$tls
      \"etcd_cert_file\": \"$(json_string "$ETCD_CERT_FILE")\","
	[ -z "$ETCD_KEY_FILE" ] || tls="$tls
      \"etcd_key_file\": \"$(json_string "$ETCD_KEY_FILE")\","
	if [ "$DATASTORE_TYPE" = kubernetes ]; then
		store='"datastore_type": "kubernetes",'
	else
		store="\"datastore_type\": \"etcdv3\",
      \"etcd_endpoints\": \"$(json_string "$eps")\",$tls"
	fi
	[ -z "$kube_path" ] || k8s=",
      \"policy\": {
        \"type\": \"k8s\"
      },
      \"kubernetes\": {
        \"kubeconfig\": \"$(json_string "$kube_path")\"
      }"
	cat <<EOF
{
  "name": "k8s-pod-network",
  "cniVersion": "1.0.0",
  "plugins": [
    {
      "type": "calico",
      "log_level": "$(json_string "$LOG_LEVEL")",
      $store
      "mtu": $CNI_MTU,
      "ipam": {
        "type": "calico-ipam"
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
	local c=$CNI_NETWORK_CONFIG node=${KUBERNETES_NODE_NAME:-${NODENAME:-}} token=""
	if [ -z "$node" ] && [[ $c == *__KUBERNETES_NODE_NAME__* ]]; then
		node=$(hostname 2>/dev/null || cat /proc/sys/kernel/hostname)
	fi
	c=${c//__ETCD_ENDPOINTS__/$(json_string "${ETCD_ENDPOINTS:-http://127.0.0.1:2379}")}
	c=${c//__ETCD_CA_CERT_FILE__/$(json_string "$ETCD_CA_CERT_FILE")}
	c=${c//__ETCD_CERT_FILE__/$(json_string "$ETCD_CERT_FILE")}
	c=${c//__ETCD_KEY_FILE__/$(json_string "$ETCD_KEY_FILE")}
	if [[ $c == *__SERVICEACCOUNT_TOKEN__* ]] && in_pod; then
		token=$(read_token) || exit 1
	fi
	c=${c//__KUBECONFIG_FILEPATH__/$(json_string "$kube_path")}
	c=${c//__KUBERNETES_SERVICE_HOST__/$(json_string "$KUBERNETES_SERVICE_HOST")}
	c=${c//__KUBERNETES_SERVICE_PORT__/$(json_string "$KUBERNETES_SERVICE_PORT")}
	c=${c//__SERVICEACCOUNT_TOKEN__/$(json_string "$token")}
	c=${c//__LOG_LEVEL__/$(json_string "$LOG_LEVEL")}
	c=${c//__DATASTORE_TYPE__/$DATASTORE_TYPE}
	c=${c//__CNI_MTU__/$CNI_MTU}
	c=${c//__KUBERNETES_NODE_NAME__/$(json_string "$node")}
	printf '%s\n' "$c"
}

env_file_content() {
	echo "# Environment for calico-node.service (see calico-node --help for every variable)."
	echo "# Written by install-cni.sh only when absent; edit freely."
	if [ "$DATASTORE_TYPE" = kubernetes ]; then
		echo "DATASTORE_TYPE=kubernetes"
	elif [ -n "$ETCD_ENDPOINTS" ]; then
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
	remove "$(root "$CNI_CONF_DIR")/$KUBECONFIG_NAME"
	[ -z "$NODE_KUBECONFIG" ] || remove "$NODE_KUBECONFIG"
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

# ---------------------------------------------------------------- watch

# --watch-kubeconfig: the kubelet rewrites the pod's token file well before
# the token expires (and the token is bound to the pod); rewrite
# calico-kubeconfig whenever the token or CA differs from what it holds.
# install_file leaves an identical file alone, so an unchanged token costs
# no write. A failed refresh keeps the old file and is retried.
# A requested token (CNI_SERVICE_ACCOUNT) is a new one each time: it is
# asked for again when a quarter of its validity has passed, when the CA
# changed or when the kubeconfig is gone, not on every check. The pod's own
# token is copied whenever it differs (install_file skips identical files).
ca_sum() { cksum <"$KUBE_CA_FILE" 2>/dev/null || true; }
refreshed() {
	next_refresh=$(($(date +%s) + CNI_TOKEN_VALIDITY_SECONDS / 4))
	ca_seen=$(ca_sum)
}
refresh_due() {
	[ -n "$CNI_SERVICE_ACCOUNT" ] || return 0
	[ "$(date +%s)" -ge "$next_refresh" ] || [ "$(ca_sum)" != "$ca_seen" ] || [ ! -e "$dst" ]
}

if [ "$watch" = 1 ]; then
	check_values
	[ -z "$KUBECONFIG" ] || die "--watch-kubeconfig: KUBECONFIG is set, so the CNI plugin does not use $KUBECONFIG_NAME"
	in_pod || die "--watch-kubeconfig: no service account token at $(sa_token): not in a Kubernetes pod"
	[[ $KUBECONFIG_REFRESH_INTERVAL =~ ^[0-9]+(\.[0-9]+)?$ ]] && [[ $KUBECONFIG_REFRESH_INTERVAL =~ [1-9] ]] ||
		die "KUBECONFIG_REFRESH_INTERVAL must be a positive number of seconds, got '$KUBECONFIG_REFRESH_INTERVAL'"
	dst=$(root "$CNI_CONF_DIR")/$KUBECONFIG_NAME
	dst_dir=$(dirname "$dst")
	# The work runs in a child process group and this shell only waits for
	# it: bash 5.2 can misparse a trap that fires while the shell itself is
	# expanding a $(...), and then neither runs the trap nor exits.
	keep_current() {
		plan_kubeconfig
		write_file "$dst" 0600 "$cni_kc"
		refreshed
		say "keeping $dst current with $(sa_token), checked every ${KUBECONFIG_REFRESH_INTERVAL}s"
		while :; do
			sleep "$KUBECONFIG_REFRESH_INTERVAL"
			refresh_due || continue
			if kc=$(cni_kubeconfig); then
				if (write_file "$dst" 0600 "$kc"); then refreshed; else say "cannot rewrite $dst; retrying"; fi
			else
				say "keeping the old $dst; retrying"
			fi
		done
	}
	worker=""
	# A signal mid-write may leave the worker's temporary files (named
	# after this shell's $$, which subshells keep): remove them.
	stop_watch() {
		[ -z "$worker" ] || { kill -TERM -- "-$worker" 2>/dev/null; wait "$worker" || :; }
		rm -f "$dst_dir"/.$KUBECONFIG_NAME.*.$$
		say "stopped"
		exit 0
	}
	trap stop_watch TERM INT
	set -m
	keep_current &
	worker=$!
	set +m
	wait "$worker"
	die "the refresh loop ended"
fi

# ---------------------------------------------------------------- install

find_source
[ "$systemd" = 0 ] || find_service_file
check_values
check_endpoints "$ETCD_ENDPOINTS"
plan_kubeconfig
if [ -n "${CNI_NETWORK_CONFIG:-}" ]; then
	conf=$(custom_conflist) || exit 1
else
	conf=$(default_conflist) || exit 1
fi

bindir=$(root "$CNI_BIN_DIR")
install_file "$source_bin" "$bindir/calico-aio" 0755
link_to calico-aio "$bindir/calico"
link_to calico-aio "$bindir/calico-ipam"

# The kubeconfig before the config that names it: the kubelet may use the
# CNI config as soon as it appears.
[ -z "$cni_kc" ] || write_file "$(root "$CNI_CONF_DIR")/$KUBECONFIG_NAME" 0600 "$cni_kc"
[ -z "$node_kc" ] || write_file "$NODE_KUBECONFIG" 0600 "$node_kc"
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
