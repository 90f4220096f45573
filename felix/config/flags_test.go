package config

import (
	"testing"
	"time"
)

func TestParseFlagsKubeControllers(t *testing.T) {
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	c, err := ParseFlags([]string{"--nodename", "n1"}, getenv)
	if err != nil {
		t.Fatal(err)
	}
	if c.KubeControllersLeakGracePeriod != 15*time.Minute || c.K8sNodeRef != "" {
		t.Errorf("defaults: grace %v, node ref %q", c.KubeControllersLeakGracePeriod, c.K8sNodeRef)
	}

	env["CALICO_KUBE_CONTROLLERS_LEAK_GRACE_PERIOD"] = "2m"
	env["CALICO_K8S_NODE_REF"] = "k1"
	if c, err = ParseFlags([]string{"--nodename", "n1"}, getenv); err != nil {
		t.Fatal(err)
	}
	if c.KubeControllersLeakGracePeriod != 2*time.Minute || c.K8sNodeRef != "k1" {
		t.Errorf("from the environment: grace %v, node ref %q", c.KubeControllersLeakGracePeriod, c.K8sNodeRef)
	}

	// Flags win; 0 disables the garbage collection.
	if c, err = ParseFlags([]string{"--nodename", "n1", "--kube-controllers-leak-grace-period", "0", "--k8s-node-ref", "k2"}, getenv); err != nil {
		t.Fatal(err)
	}
	if c.KubeControllersLeakGracePeriod != 0 || c.K8sNodeRef != "k2" {
		t.Errorf("from flags: grace %v, node ref %q", c.KubeControllersLeakGracePeriod, c.K8sNodeRef)
	}
	if _, err = ParseFlags([]string{"--nodename", "n1", "--kube-controllers-leak-grace-period", "soon"}, getenv); err == nil {
		t.Error("a bad grace period was accepted")
	}
}
