// Command demokube is the Kubernetes datastore demo's helper
// (DEMO_DATASTORE=kubernetes build/demo.sh): what the demo needs around a
// real kube-apiserver that neither the product binary nor the system tools
// offer. It is not part of calico-aio.
//
//	demokube certs -dir D -ip A     a CA, the apiserver's serving cert for A
//	                                and 127.0.0.1, its service-account key, and
//	                                a token and a kubeconfig for https://A:6443
//	                                for the admin, calico-node and calico-cni-plugin
//	demokube etcd -dir D -url U     the apiserver's own etcd (store/embedded)
//	                                until SIGTERM; no Calico data is kept there
//	demokube crds -dir D -ip A -f F creates the CRDs of manifest F through the
//	                                apiserver at A, waits until they are Established
//	demokube rbac -dir D -ip A -f F creates the service accounts, roles and
//	                                bindings of manifest F (build/k8s/calico-aio-kdd.yaml)
package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		slog.Error("demokube failed", "err", err)
		os.Exit(1)
	}
}

var errUsage = errors.New("usage: demokube certs -dir D -ip A | etcd -dir D -url U | crds|rbac -dir D -ip A -f FILE")

func run(args []string) error {
	if len(args) == 0 {
		return errUsage
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	dir := fs.String("dir", "", "state directory")
	ip := fs.String("ip", "", "certs: the apiserver's address")
	url := fs.String("url", "http://127.0.0.1:2379", "etcd: client URL")
	file := fs.String("f", "", "crds: the CRD manifest")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *dir == "" {
		return fmt.Errorf("%s: -dir is required", args[0])
	}
	switch args[0] {
	case "certs":
		return writeCerts(*dir, *ip)
	case "etcd":
		return serveEtcd(*dir, *url)
	case "crds":
		return installCRDs(*dir, *ip, *file)
	case "rbac":
		return installRBAC(*dir, *ip, *file)
	}
	return errUsage
}
