package rules

import (
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/store/api"
)

// QoS controls render into the endpoint chains where Calico puts them:
// packet rate limits (and the egress bandwidth policer) before the
// conntrack rules, connection limits after them.
func TestQoSRendering(t *testing.T) {
	in := semanticsInput()
	in.Endpoints[0].QoS = (&api.QoSControls{
		IngressPacketRate: 100, EgressPacketRate: 200, EgressPacketBurst: 20,
		IngressMaxConnections: 10, EgressMaxConnections: 4294967295,
		EgressBandwidth: 10_000_000, EgressBurst: 80_000_000, EgressPeakrate: 20_000_000, EgressMinburst: 1500,
		IngressBandwidth: 1_000_000, // a tbf qdisc, not a rule
	}).WithDefaults()
	tb, _ := Render(Config{PoliceEgressBandwidth: true}, in)
	bw, peak := hashlimitName("cqb", "cali-a"), hashlimitName("cqp", "cali-a")
	if len(bw) != 15 || bw == peak {
		t.Fatalf("hashlimit names %q %q: want 15 characters, distinct", bw, peak)
	}
	wantTW := lines(
		"-j MARK --set-xmark 0x0/0x40000  # Clear ingress packet rate limit mark",
		"-m limit --limit 100/sec --limit-burst 5 -j MARK --set-xmark 0x40000/0x40000  # Mark packets within ingress packet rate limit",
		"-m mark --mark 0x0/0x40000 -j DROP  # Drop packets over ingress packet rate limit",
		"-j MARK --set-xmark 0x0/0x40000  # Clear ingress packet rate limit mark",
		"-m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
		"-m conntrack --ctstate INVALID -j DROP",
		"-j MARK --set-xmark 0x0/0x40000",
		"-m connlimit --connlimit-above 10 --connlimit-mask 0 -j MARK --set-xmark 0x40000/0x40000  # Mark connections over ingress connection limit",
		"-p tcp -m mark --mark 0x40000/0x40000 -j REJECT --reject-with tcp-reset  # Reject connections over ingress connection limit",
		"-m mark --mark 0x40000/0x40000 -j DROP  # Drop connections over ingress connection limit",
		"-j MARK --set-xmark 0x0/0x70000  # Clear marks",
		"-j cali-pri-open",
		"-m mark --mark 0x10000/0x10000 -j RETURN  # Return if profile accepted",
		"-j DROP  # Drop if no profiles matched",
	)
	if got := chainLines(t, tb.Filter, EndpointChainName("tw", "cali-a")); got != wantTW {
		t.Errorf("cali-tw-cali-a:\n%s\nwant:\n%s", got, wantTW)
	}
	wantFW := lines(
		"! -s 10.0.0.1/32 -j DROP  # Drop packets from unexpected source addresses",
		"-j MARK --set-xmark 0x0/0x40000  # Clear egress packet rate limit mark",
		"-m limit --limit 200/sec --limit-burst 20 -j MARK --set-xmark 0x40000/0x40000  # Mark packets within egress packet rate limit",
		"-m mark --mark 0x0/0x40000 -j DROP  # Drop packets over egress packet rate limit",
		"-j MARK --set-xmark 0x0/0x40000  # Clear egress packet rate limit mark",
		// 10 Mbit/s = 1250000 B/s; a 10 MB burst; the peakrate's 1500-byte
		// minburst is raised to what hashlimit accepts (over 1 s of rate).
		"-m hashlimit --hashlimit-above 1250000b/s --hashlimit-burst 10000000b --hashlimit-name "+bw+" -j DROP  # Drop packets over egress bandwidth limit",
		"-m hashlimit --hashlimit-above 2500000b/s --hashlimit-burst 2579625b --hashlimit-name "+peak+" -j DROP  # Drop packets over egress peakrate limit",
		"-m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
		"-m conntrack --ctstate INVALID -j DROP",
		"-j MARK --set-xmark 0x0/0x40000",
		"-m connlimit --connlimit-above 4294967295 --connlimit-mask 0 -j MARK --set-xmark 0x40000/0x40000  # Mark connections over egress connection limit",
		"-p tcp -m mark --mark 0x40000/0x40000 -j REJECT --reject-with tcp-reset  # Reject connections over egress connection limit",
		"-m mark --mark 0x40000/0x40000 -j DROP  # Drop connections over egress connection limit",
		"-j MARK --set-xmark 0x0/0x70000  # Clear marks",
		"-p udp -m multiport --dports 4789 -j DROP  # Drop VXLAN encapped packets originating in workloads",
		"-p 4 -j DROP  # Drop IPinIP encapped packets originating in workloads",
		"-j cali-pro-open",
		"-m mark --mark 0x10000/0x10000 -j RETURN  # Return if profile accepted",
		"-j DROP  # Drop if no profiles matched",
	)
	if got := chainLines(t, tb.Filter, EndpointChainName("fw", "cali-a")); got != wantFW {
		t.Errorf("cali-fw-cali-a:\n%s\nwant:\n%s", got, wantFW)
	}
	// Without QoS controls the chains are as before: nothing QoS in them.
	plain, _ := Render(Config{}, semanticsInput())
	if got, want := chainLines(t, tb.Filter, EndpointChainName("tw", "cali-b")), chainLines(t, plain.Filter, EndpointChainName("tw", "cali-b")); got != want {
		t.Errorf("an endpoint without QoS changed:\n%s", got)
	}
	// Where the kernel shapes egress (the default), no policing rules.
	shaped, _ := Render(Config{}, in)
	if got := chainLines(t, shaped.Filter, EndpointChainName("fw", "cali-a")); strings.Contains(got, "hashlimit") {
		t.Errorf("egress bandwidth policed although the kernel shapes it:\n%s", got)
	}
	// A rate beyond hashlimit's range polices at its maximum.
	huge := hashlimitDrop("x", 125_000_000_000_000, 0, "")
	if want := "-m hashlimit --hashlimit-above 4000000000b/s --hashlimit-burst 4125001500b --hashlimit-name x"; huge.Match != want {
		t.Errorf("1 Pbit/s: %s, want %s", huge.Match, want)
	}
}
