package cni

import (
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// maxQueues is the kernel's limit on a link's queues (rtnetlink refuses
// more).
const maxQueues = 4096

// validateKeys checks the keys of Calico 3.32's netconf beyond the core
// ones: wrong values are CNI error 7 naming the key.
func (c *NetConf) validateKeys() error {
	switch {
	case c.PolicySetupTimeoutSeconds < 0:
		return ConfigError("policy_setup_timeout_seconds", "invalid pod startup delay of %d (0 turns the wait off)", c.PolicySetupTimeoutSeconds)
	case c.EndpointStatusDir != "" && !filepath.IsAbs(c.EndpointStatusDir):
		return ConfigError("endpoint_status_dir", "%q is not an absolute directory path", c.EndpointStatusDir)
	case c.NumQueues < 0 || c.NumQueues > maxQueues:
		return ConfigError("num_queues", "%d is not a number of veth queues (1-%d, or 0 for one)", c.NumQueues, maxQueues)
	case c.IPAMLockFile != "" && !filepath.IsAbs(c.IPAMLockFile):
		return ConfigError("ipam_lock_file", "%q is not an absolute file path", c.IPAMLockFile)
	case c.LogFilePath != "" && !filepath.IsAbs(c.LogFilePath):
		return ConfigError("log_file_path", "%q is not an absolute file path", c.LogFilePath)
	case c.LogFileMaxSize < 0:
		return ConfigError("log_file_max_size", "%d MB is negative", c.LogFileMaxSize)
	case c.LogFileMaxAge < 0:
		return ConfigError("log_file_max_age", "%d days is negative", c.LogFileMaxAge)
	case c.LogFileMaxCount < 0:
		return ConfigError("log_file_max_count", "%d files is negative", c.LogFileMaxCount)
	}
	for _, g := range c.ReadinessGates {
		if _, err := url.ParseRequestURI(g); err != nil {
			return ConfigError("readiness_gates", "invalid URL set for ReadinessGates:%s Error:%v", g, err)
		}
	}
	return c.validateRoutes()
}

// validateRoutes checks ipam.routes. Calico reads them only with
// host-local IPAM; calico-ipam has no such key, so there they would be
// stored and ignored: refused. Under another IPAM plugin they are that
// plugin's key, left to it.
func (c *NetConf) validateRoutes() error {
	if len(c.IPAM.Routes) == 0 {
		return nil
	}
	if c.IPAM.Type == "calico-ipam" {
		return ConfigError("ipam.routes", "calico-ipam has no routes; Calico reads ipam.routes only with host-local IPAM")
	}
	for i, r := range c.IPAM.Routes {
		if _, err := netip.ParsePrefix(strings.TrimSpace(r.Dst)); err != nil {
			return ConfigError(fmt.Sprintf("ipam.routes[%d].dst", i), "%q is not a CIDR", r.Dst)
		}
	}
	return nil
}

// podRoutes are the destinations routed via the host end inside the pod:
// host-local's ipam.routes when given (plus the default routes with
// include_default_routes), else nil: the default routes.
func (c *NetConf) podRoutes() []netip.Prefix {
	if len(c.IPAM.Routes) == 0 || c.IPAM.Type != "host-local" {
		return nil
	}
	var out []netip.Prefix
	if c.IncludeDefaultRoutes {
		out = append(out, netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0"))
	}
	for _, r := range c.IPAM.Routes {
		if p, err := netip.ParsePrefix(strings.TrimSpace(r.Dst)); err == nil {
			out = append(out, p.Masked())
		}
	}
	return out
}

// numQueues is the veth's queue count (Calico: 0 means 1).
func (c *NetConf) numQueues() int { return max(c.NumQueues, 1) }

// statusDir is where the agent's endpoint status files appear:
// endpoint_status_dir, else <calico_run_dir>/endpoint-status (Calico:
// /var/run/calico/endpoint-status).
func (c *NetConf) statusDir() string {
	if c.EndpointStatusDir != "" {
		return c.EndpointStatusDir
	}
	return filepath.Join(c.runDir(), "endpoint-status")
}

// checkNodenameFile is nodename_file_optional false: as in Calico, ADD
// fails until calico-node has written the nodename file (nodename_file,
// else <calico_lib_dir>/nodename). Unset, the file is optional here (a
// difference from Calico, whose default is false: this plugin also runs
// on hosts without calico-node, naming the node in the netconf).
func (c *NetConf) checkNodenameFile() error {
	if c.NodenameFileOptional == nil || *c.NodenameFileOptional {
		return nil
	}
	file := c.NodenameFile
	if file == "" {
		file = filepath.Join(c.libDir(), "nodename")
	}
	if _, err := os.Stat(file); err != nil {
		return fmt.Errorf("%w: check that the calico/node container is running and has mounted /var/lib/calico/", err)
	}
	return nil
}
