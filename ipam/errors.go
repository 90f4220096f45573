package ipam

import (
	"errors"
	"fmt"
	"net/netip"
)

// Sentinels for errors.Is.
var (
	ErrExhausted = errors.New("no free IP addresses")
	ErrNoPool    = errors.New("no usable IP pool")
)

// InUseError says a requested address is already allocated.
type InUseError struct {
	Addr   netip.Addr
	Handle string
}

func (e *InUseError) Error() string {
	if e.Handle != "" {
		return fmt.Sprintf("address %s is already in use (handle %s)", e.Addr, e.Handle)
	}
	return fmt.Sprintf("address %s is already in use", e.Addr)
}

// NotInPoolError says a requested address lies in no enabled IP pool.
type NotInPoolError struct{ Addr netip.Addr }

func (e *NotInPoolError) Error() string {
	return fmt.Sprintf("address %s is not in any enabled IP pool", e.Addr)
}
