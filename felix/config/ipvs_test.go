package config

import (
	"strings"
	"testing"
)

// TestSettingsKubeNodePortRangesEnv: FELIX_KUBENODEPORTRANGES takes
// Calico's comma-separated ports and min:max ranges; a bad range, a port
// out of range or a port name is a start-up error naming the variable.
func TestSettingsKubeNodePortRangesEnv(t *testing.T) {
	env, err := ParseFelixEnv([]string{"FELIX_KUBENODEPORTRANGES=30000:30100, 31000"})
	if err != nil {
		t.Fatal(err)
	}
	if r := env.KubeNodePortRanges; r == nil || len(*r) != 2 || (*r)[0].String() != "30000:30100" || (*r)[1].String() != "31000" {
		t.Fatalf("parsed %+v", r)
	}
	for _, bad := range []string{"9:1", "http", "30000:70000", "30000,", "0"} {
		_, err := ParseFelixEnv([]string{"FELIX_KUBENODEPORTRANGES=" + bad})
		if err == nil || !strings.Contains(err.Error(), "FELIX_KUBENODEPORTRANGES") {
			t.Errorf("FELIX_KUBENODEPORTRANGES=%s: error %v, want one naming the variable", bad, err)
		}
	}
}
