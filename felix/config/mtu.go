package config

import "fmt"

// DefaultMTUIfacePattern is Felix's default mtuIfacePattern: the host
// interfaces whose MTU bounds the pod MTU (felix/node/mtu.go).
const DefaultMTUIfacePattern = `^((en|wl|ww|sl|ib)[Pcopsvx].*|(eth|wlan|wwan).*)`

// checkMTU checks --mtu / FELIX_MTU; the other MTU variables are
// settings (settings.go).
func checkMTU(mtu int) error {
	if mtu < 0 || mtu > 65535 || (mtu > 0 && mtu < 68) {
		return fmt.Errorf("--mtu/FELIX_MTU=%d: not an MTU (68-65535, or 0 to detect it)", mtu)
	}
	return nil
}
