//go:build tools

// Package tools pins the kube-apiserver command in this module's go.mod and
// go.sum; build.sh builds k8s.io/kubernetes/cmd/kube-apiserver from here.
package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
