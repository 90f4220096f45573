package peering

import (
	"log/slog"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/calico-aio/calico-aio/bgp"
	"github.com/calico-aio/calico-aio/felix/calc"
	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/selector"
)

// Peer types as calicoctl node status prints them.
const (
	peerMesh   = "node-to-node mesh"
	peerGlobal = "global"
	peerNode   = "node specific"
)

// State is the part of the datastore BGP needs: nodes, peers, BGP
// configuration, pools, blocks and local endpoints. It is pure; the loop
// feeds it and asks it for the desired peers and advertisements.
type State struct {
	node       string
	secretsDir string
	nodes      map[string]*api.Node
	peers      map[string]*api.BGPPeer
	configs    map[string]*api.BGPConfiguration
	pools      map[string]*api.IPPool
	blocks     map[string]*ipam.Block
	localIPs   map[string][]netip.Addr // local endpoint key -> addresses
}

// NewState follows the datastore for node; BGP passwords from Secrets
// are read under secretsDir.
func NewState(node, secretsDir string) *State {
	return &State{node: node, secretsDir: secretsDir, nodes: map[string]*api.Node{}, peers: map[string]*api.BGPPeer{},
		configs: map[string]*api.BGPConfiguration{}, pools: map[string]*api.IPPool{}, blocks: map[string]*ipam.Block{},
		localIPs: map[string][]netip.Addr{}}
}

// Blocks are the IPAM blocks known, by CIDR.
func (b *State) Blocks() map[string]*ipam.Block { return b.blocks }

func keyName(key string) string { return key[strings.LastIndexByte(key, '/')+1:] }

// Apply records an update (the same stream the calculation gets).
func (b *State) Apply(u calc.Update) {
	name := keyName(u.Key)
	switch u.Kind {
	case "nodes":
		setOrDelete(b.nodes, name, u)
	case "bgppeers":
		setOrDelete(b.peers, name, u)
	case "bgpconfigurations":
		setOrDelete(b.configs, name, u)
	case "ippools":
		setOrDelete(b.pools, name, u)
	case calc.KindBlock:
		if u.Deleted {
			delete(b.blocks, u.Key)
		} else {
			b.blocks[u.Key] = u.Block
		}
	case "workloadendpoints":
		delete(b.localIPs, u.Key)
		if w, ok := u.Resource.(*api.WorkloadEndpoint); ok && !u.Deleted && w.Spec.Node == b.node {
			for _, n := range w.Spec.IPNetworks {
				if p, err := netip.ParsePrefix(n); err == nil {
					b.localIPs[u.Key] = append(b.localIPs[u.Key], p.Addr())
				}
			}
		}
	}
}

func setOrDelete[T any](m map[string]*T, name string, u calc.Update) {
	if u.Deleted {
		delete(m, name)
		return
	}
	if v, ok := u.Resource.(interface{ GetObjectMeta() *api.ObjectMeta }); ok {
		if t, ok := any(v).(*T); ok {
			m[name] = t
		}
	}
}

func (b *State) self() *api.Node { return b.nodes[b.node] }

func nodeAddr(n *api.Node, v6 bool) netip.Addr {
	if n == nil || n.Spec.BGP == nil {
		return netip.Addr{}
	}
	s := n.Spec.BGP.IPv4Address
	if v6 {
		s = n.Spec.BGP.IPv6Address
	}
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Addr()
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return a
	}
	return netip.Addr{}
}

// asn is a node's AS: its own, else the cluster's, else 64512.
func (b *State) asn(n *api.Node) uint32 {
	if n != nil && n.Spec.BGP != nil && n.Spec.BGP.ASNumber != nil {
		return uint32(*n.Spec.BGP.ASNumber)
	}
	if c := b.configs["default"]; c != nil && c.Spec.ASNumber != nil {
		return uint32(*c.Spec.ASNumber)
	}
	return uint32(api.DefaultASNumber)
}

func (b *State) meshEnabled() bool {
	c := b.configs["default"]
	return c == nil || c.Spec.NodeToNodeMeshEnabled == nil || *c.Spec.NodeToNodeMeshEnabled
}

// listenPort is this node's BGP port (def: the agent's BGP_PORT).
func (b *State) listenPort(def int) int { return b.listenPortOf(b.node, def) }

// listenPortOf is a node's BGP port: its BGPConfiguration node.<name>
// listenPort, else the default object's, else def.
func (b *State) listenPortOf(node string, def int) int {
	for _, name := range []string{"node." + node, "default"} {
		if c := b.configs[name]; c != nil && c.Spec.ListenPort != 0 {
			return int(c.Spec.ListenPort)
		}
	}
	return def
}

// logLevel is the speaker's log level: BGPConfiguration logSeverityScreen
// of node.<name>, else of default, else Info (Calico's default).
func (b *State) logLevel() slog.Level {
	for _, name := range []string{"node." + b.node, "default"} {
		if c := b.configs[name]; c != nil && c.Spec.LogSeverityScreen != "" {
			return bgpLogLevel(c.Spec.LogSeverityScreen)
		}
	}
	return slog.LevelInfo
}

// routePriority is the metric of learned routes of a family:
// BGPConfiguration ipv4/ipv6NormalRoutePriority of node.<name>, else of
// default; 0 (the kernel's default) when neither sets it.
func (b *State) routePriority(v6 bool) int {
	for _, name := range []string{"node." + b.node, "default"} {
		c := b.configs[name]
		if c == nil {
			continue
		}
		pr := c.Spec.IPv4NormalRoutePriority
		if v6 {
			pr = c.Spec.IPv6NormalRoutePriority
		}
		if pr != nil {
			return int(*pr)
		}
	}
	return 0
}

// bgpLogLevel maps Calico's severities onto slog's levels.
func bgpLogLevel(sev string) slog.Level {
	switch strings.ToLower(sev) {
	case "trace", "debug":
		return slog.LevelDebug
	case "warning":
		return slog.LevelWarn
	case "error", "fatal":
		return slog.LevelError
	}
	return slog.LevelInfo
}

func clusterID(n *api.Node) string {
	if n == nil || n.Spec.BGP == nil {
		return ""
	}
	return n.Spec.BGP.RouteReflectorClusterID
}

// desiredPeers computes this node's BGP peers from the datastore. port is
// the agent's BGP_PORT: the listen port of nodes no BGPConfiguration gives
// one.
func (b *State) desiredPeers(port int) []bgp.Peer {
	myPort := b.listenPortOf(b.node, port)
	me := b.self()
	myAddr := nodeAddr(me, false)
	if !myAddr.IsValid() {
		return nil
	}
	myRR := clusterID(me) != ""
	peers := map[netip.Addr]bgp.Peer{}
	// addNode peers with a Calico node; o carries a BGPPeer's settings
	// (zero for the mesh).
	addNode := func(n *api.Node, typ string, o peerOpts) {
		if n.Metadata.Name == b.node {
			return
		}
		addr := nodeAddr(n, false)
		if !addr.IsValid() {
			return
		}
		asn := b.asn(n)
		if o.remoteAS != 0 {
			asn = o.remoteAS
		}
		p := bgp.Peer{Address: addr, Port: b.listenPortOf(n.Metadata.Name, port), ASN: asn, LocalASN: o.localAS, Type: typ,
			LocalAddress: myAddr, Password: o.password, KeepaliveTime: o.keepalive, MaxRestartTime: o.restart,
			Families: bgp.IPv4Unicast | bgp.IPv6Unicast}
		// Exactly one side of a pair dials: the lower address is active.
		p.Passive = myAddr.Compare(addr) > 0
		if myRR && clusterID(n) == "" {
			p.RouteReflectorClient = true
			if cid, err := netip.ParseAddr(clusterID(me)); err == nil {
				p.ClusterID = cid
			}
		}
		if _, dup := peers[addr]; !dup {
			peers[addr] = p
		}
	}
	if b.meshEnabled() {
		for _, n := range b.nodes {
			addNode(n, peerMesh, peerOpts{})
		}
	}
	myLabels := map[string]string{}
	if me != nil {
		myLabels = me.Metadata.Labels
	}
	for _, bp := range b.sortedPeers() {
		s := bp.Spec
		typ := peerGlobal
		switch {
		case s.Node != "":
			if s.Node != b.node {
				continue
			}
			typ = peerNode
		case s.NodeSelector != "":
			sel, err := selector.Parse(s.NodeSelector)
			if err != nil || !sel.Evaluate(myLabels) {
				continue
			}
			typ = peerNode
		}
		o, ok := b.peerOpts(bp)
		if !ok {
			continue
		}
		if s.PeerSelector != "" {
			sel, err := selector.Parse(s.PeerSelector)
			if err != nil {
				continue
			}
			for _, n := range b.nodes {
				if sel.Evaluate(n.Metadata.Labels) {
					addNode(n, typ, o)
				}
			}
			continue
		}
		addr, pport, err := api.ParsePeerIP(s.PeerIP)
		if err != nil || addr == myAddr {
			continue
		}
		p := bgp.Peer{Address: addr, Port: myPort, ASN: uint32(s.ASNumber), LocalASN: o.localAS, Type: typ, Password: o.password,
			KeepaliveTime: o.keepalive, MaxRestartTime: o.restart, Families: bgp.IPv4Unicast | bgp.IPv6Unicast}
		if addr.Is4() {
			p.LocalAddress = myAddr
			// Another Calico node peers back (reverse peering below): only
			// the lower address dials, as in the mesh.
			if n := b.nodeWithAddr(addr); n != nil {
				p.Passive = myAddr.Compare(addr) > 0
				// Without a port in peerIP, a Calico node is dialled on
				// its listenPort, as in Calico.
				p.Port = b.listenPortOf(n.Metadata.Name, port)
			}
		}
		if pport != 0 {
			p.Port = int(pport)
		}
		if p.ASN == 0 {
			p.ASN = b.asn(me)
		}
		if myRR && p.ASN == b.asn(me) {
			p.RouteReflectorClient = true
			if cid, err := netip.ParseAddr(clusterID(me)); err == nil {
				p.ClusterID = cid
			}
		}
		peers[addr] = p
	}
	// Reverse peerings, as Calico's confd makes them: a node on the remote
	// side of a BGPPeer (matched by peerSelector, or whose address and AS are
	// the peerIP and asNumber) peers back with the nodes on its local side
	// (node, nodeSelector, or all nodes). So one BGPPeer with peerSelector
	// makes the selected route reflectors peer with their clients, and a
	// session configured on one side only comes up. Forward peerings win.
	// reversePeering Manual turns this off: the remote side peers only
	// when a BGPPeer of its own says so. The local side presents its
	// localASNumber, so that is the AS the reverse peering expects.
	for _, bp := range b.sortedPeers() {
		s := bp.Spec
		if s.ReversePeering == api.ReversePeeringManual || !b.remoteSideIs(s, me, myAddr, myPort) {
			continue
		}
		o, ok := b.peerOpts(bp)
		if !ok {
			continue
		}
		o.remoteAS, o.localAS = o.localAS, 0
		var local *selector.Selector
		if s.Node == "" && s.NodeSelector != "" {
			sel, err := selector.Parse(s.NodeSelector)
			if err != nil {
				continue
			}
			local = sel
		}
		for _, n := range b.sortedNodes() {
			switch {
			case s.Node != "" && n.Metadata.Name != s.Node:
				continue
			case local != nil && !local.Evaluate(n.Metadata.Labels):
				continue
			}
			addNode(n, peerNode, o)
		}
	}
	out := make([]bgp.Peer, 0, len(peers))
	for _, p := range peers {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Address.Less(out[j].Address) })
	return out
}

// remoteSideIs reports whether this node is on the remote side of a BGPPeer:
// selected by its peerSelector, or the Calico node its peerIP (and asNumber,
// default the cluster's AS, and port if given) names.
func (b *State) remoteSideIs(s api.BGPPeerSpec, me *api.Node, myAddr netip.Addr, port int) bool {
	if me == nil {
		return false
	}
	if s.PeerSelector != "" {
		sel, err := selector.Parse(s.PeerSelector)
		return err == nil && sel.Evaluate(me.Metadata.Labels)
	}
	addr, pport, err := api.ParsePeerIP(s.PeerIP)
	if err != nil || addr != myAddr || (pport != 0 && int(pport) != port) {
		return false
	}
	asn := uint32(s.ASNumber)
	if asn == 0 {
		asn = b.asn(nil)
	}
	return asn == b.asn(me)
}

// nodeWithAddr is the Calico node whose IPv4 BGP address is addr, if any.
func (b *State) nodeWithAddr(addr netip.Addr) *api.Node {
	for _, n := range b.nodes {
		if nodeAddr(n, false) == addr {
			return n
		}
	}
	return nil
}

func (b *State) sortedNodes() []*api.Node { return byName(b.nodes) }

func (b *State) sortedPeers() []*api.BGPPeer { return byName(b.peers) }

// byName returns a map's values ordered by key.
func byName[T any](m map[string]*T) []*T {
	out := make([]*T, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, m[k])
	}
	return out
}

// password reads a BGPPeer's password from the secrets directory, laid out
// as a mounted Kubernetes secret: <dir>/<secret name>/<key>.
// password is a BGPPeer's password from its secret (<secrets dir>/<name>/<key>).
// ok is false when the secret is missing and not optional: the peering is
// then left out rather than brought up without its password. A missing
// optional secret means no password.
func (b *State) password(p *api.BGPPeer) (pw string, ok bool) {
	if p.Spec.Password == nil || p.Spec.Password.SecretKeyRef == nil {
		return "", true
	}
	ref := p.Spec.Password.SecretKeyRef
	data, err := os.ReadFile(filepath.Join(b.secretsDir, ref.Name, ref.Key))
	if err != nil {
		return "", ref.Optional != nil && *ref.Optional
	}
	return strings.TrimSpace(string(data)), true
}

// peerOpts are the session settings a BGPPeer gives each of its peerings.
type peerOpts struct {
	password           string
	keepalive, restart time.Duration
	localAS            uint32 // AS we present (localASNumber); 0: our own
	remoteAS           uint32 // the peer's AS when it presents another (reverse of localASNumber); 0: its own
}

// peerOpts reads a BGPPeer's settings; ok is false when its password is
// missing (password).
func (b *State) peerOpts(p *api.BGPPeer) (peerOpts, bool) {
	pw, ok := b.password(p)
	if !ok {
		return peerOpts{}, false
	}
	o := peerOpts{password: pw}
	o.keepalive, o.restart = peerTimers(p.Spec)
	if p.Spec.LocalASNumber != nil {
		o.localAS = uint32(*p.Spec.LocalASNumber)
	}
	return o, true
}

// peerTimers are a BGPPeer's keepaliveTime and maxRestartTime (0: the
// speaker's defaults).
func peerTimers(s api.BGPPeerSpec) (keepalive, restart time.Duration) {
	if s.KeepaliveTime != nil {
		keepalive = s.KeepaliveTime.Duration
	}
	if s.MaxRestartTime != nil {
		restart = s.MaxRestartTime.Duration
	}
	return keepalive, restart
}

// advertisements: this node's confirmed affine blocks, plus a host route for
// each local pod address inside another node's block (borrowed).
func (b *State) Advertisements() []netip.Prefix {
	var out []netip.Prefix
	var others []netip.Prefix
	for _, blk := range b.blocks {
		p, err := blk.Prefix()
		if err != nil {
			continue
		}
		if blk.AffineTo(b.node) {
			out = append(out, p)
		} else {
			others = append(others, p)
		}
	}
	for _, addrs := range b.localIPs {
		for _, a := range addrs {
			for _, o := range others {
				if o.Contains(a) {
					out = append(out, netip.PrefixFrom(a, a.BitLen()))
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// importFilter accepts pool prefixes at block mask length and host routes
// inside pools: nothing else learned from peers is installed.
func (b *State) importFilter() func(netip.Prefix) bool {
	type poolInfo struct {
		cidr  netip.Prefix
		block int
	}
	var pools []poolInfo
	for _, p := range b.pools {
		p.Default()
		if c, err := netip.ParsePrefix(p.Spec.CIDR); err == nil {
			pools = append(pools, poolInfo{c.Masked(), p.Spec.BlockSize})
		}
	}
	return func(pr netip.Prefix) bool {
		for _, p := range pools {
			if p.cidr.Contains(pr.Addr()) && (pr.Bits() == p.block || pr.Bits() == pr.Addr().BitLen()) {
				return true
			}
		}
		return false
	}
}
