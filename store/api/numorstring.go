package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Protocol is an IP protocol: a name ("TCP", "UDP", "ICMP", "ICMPv6", "SCTP",
// "UDPLite") or a number 1-255. In JSON it is a string or a number and keeps
// the form it was given in. The zero value is the empty name.
type Protocol struct {
	name  string
	num   int
	isNum bool
}

// Protocol names Calico accepts, with their IP protocol numbers.
const (
	ProtocolTCP     = "TCP"
	ProtocolUDP     = "UDP"
	ProtocolICMP    = "ICMP"
	ProtocolICMPv6  = "ICMPv6"
	ProtocolSCTP    = "SCTP"
	ProtocolUDPLite = "UDPLite"
)

var protocolNumbers = map[string]uint8{
	ProtocolTCP: 6, ProtocolUDP: 17, ProtocolICMP: 1, ProtocolICMPv6: 58, ProtocolSCTP: 132, ProtocolUDPLite: 136,
}

// ProtocolFromString is the protocol with the given name.
func ProtocolFromString(s string) Protocol { return Protocol{name: s} }

// ProtocolFromInt is the protocol with the given number.
func ProtocolFromInt(n int) Protocol { return Protocol{num: n, isNum: true} }

// String is the name, or the number in decimal.
func (p Protocol) String() string {
	if p.isNum {
		return strconv.Itoa(p.num)
	}
	return p.name
}

// IsNumeric reports whether the protocol was given as a number.
func (p Protocol) IsNumeric() bool { return p.isNum }

// Number is the IP protocol number; ok is false for an unknown name or a
// number outside 1-255.
func (p Protocol) Number() (n uint8, ok bool) {
	if p.isNum {
		if p.num < 1 || p.num > 255 {
			return 0, false
		}
		return uint8(p.num), true
	}
	n, ok = protocolNumbers[p.name]
	return n, ok
}

// SupportsPorts reports whether rules may match ports with this protocol:
// TCP, UDP, SCTP and UDPLite, by name or number.
func (p Protocol) SupportsPorts() bool {
	n, ok := p.Number()
	return ok && (n == 6 || n == 17 || n == 132 || n == 136)
}

func (p Protocol) problem() string {
	if p.isNum {
		if p.num < 1 || p.num > 255 {
			return "is not a valid protocol number (1-255)"
		}
		return ""
	}
	if _, ok := protocolNumbers[p.name]; !ok {
		return "is not a valid protocol (TCP, UDP, ICMP, ICMPv6, SCTP, UDPLite or a number 1-255)"
	}
	return ""
}

// MarshalJSON writes a number or a string, as given.
func (p Protocol) MarshalJSON() ([]byte, error) {
	if p.isNum {
		return []byte(strconv.Itoa(p.num)), nil
	}
	return json.Marshal(p.name)
}

// UnmarshalJSON accepts a string or an integer.
func (p *Protocol) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*p = ProtocolFromString(s)
		return nil
	}
	n, err := strconv.Atoi(string(b))
	if err != nil {
		return fmt.Errorf("protocol must be a name or an integer, got %s", b)
	}
	*p = ProtocolFromInt(n)
	return nil
}

// Port is a port match: one port, a range "min:max" or a named port. In JSON
// a single port is a number or a string ("80"), a range is a string
// ("1000:2000") and a name is a string ("http"); re-encoding keeps the
// string-or-number form it was read in. Text that does not parse is kept
// as is and reported by validation.
type Port struct {
	MinPort  uint16
	MaxPort  uint16
	PortName string

	quoted  bool   // read as a JSON string
	invalid string // unparseable input, kept for the error and re-encoding
}

// SinglePort is the port p.
func SinglePort(p uint16) Port { return Port{MinPort: p, MaxPort: p} }

// PortRange is the range min:max.
func PortRange(min, max uint16) Port { return Port{MinPort: min, MaxPort: max} }

// NamedPort is the named port name.
func NamedPort(name string) Port { return Port{PortName: name} }

// ParsePort parses "80", "1000:2000" or a port name ("http"). Ports are
// 1-65535 and a range's minimum is at most its maximum.
func ParsePort(s string) (Port, error) {
	p, msg := parsePort(s)
	if msg != "" {
		return Port{}, fmt.Errorf("invalid port %q: %s", s, msg)
	}
	return p, nil
}

// parsePort is ParsePort with the problem as a message ("" when fine).
func parsePort(s string) (Port, string) {
	const outOfRange = "ports are 1-65535"
	num := func(t string) (uint16, bool) {
		n, err := strconv.ParseUint(t, 10, 16)
		return uint16(n), err == nil && n > 0
	}
	if lo, hi, ok := strings.Cut(s, ":"); ok {
		min, ok1 := num(lo)
		max, ok2 := num(hi)
		switch {
		case !ok1 || !ok2:
			return Port{}, "a range is <min>:<max> with " + outOfRange
		case min > max:
			return Port{}, "the range's minimum is above its maximum"
		}
		return PortRange(min, max), ""
	}
	if s != "" && strings.Trim(s, "0123456789+-") == "" {
		if p, ok := num(s); ok {
			return SinglePort(p), ""
		}
		return Port{}, outOfRange
	}
	if msg := portNameProblem(s); msg != "" {
		return Port{}, "a port name " + msg
	}
	return NamedPort(s), ""
}

// String is "80", "1000:2000" or the name.
func (p Port) String() string {
	switch {
	case p.invalid != "":
		return p.invalid
	case p.PortName != "":
		return p.PortName
	case p.MinPort == p.MaxPort:
		return strconv.Itoa(int(p.MinPort))
	}
	return fmt.Sprintf("%d:%d", p.MinPort, p.MaxPort)
}

// problem says what is wrong with the port, or "".
func (p Port) problem() string {
	if p.invalid != "" {
		if _, msg := parsePort(p.invalid); msg != "" {
			return "is not a valid port: " + msg
		}
		return "is not a valid port" // e.g. the JSON number 1e3
	}
	if p.PortName != "" {
		if p.MinPort != 0 || p.MaxPort != 0 {
			return "has both a name and numbers"
		}
		if msg := portNameProblem(p.PortName); msg != "" {
			return "is not a valid port name: " + msg
		}
		return ""
	}
	if p.MinPort == 0 {
		return "is not a valid port: ports are 1-65535"
	}
	if p.MinPort > p.MaxPort {
		return "is not a valid port range: minimum is above maximum"
	}
	return ""
}

// MarshalJSON writes a number for a single port read as a number (or built
// in code), and a string otherwise.
func (p Port) MarshalJSON() ([]byte, error) {
	switch {
	case p.invalid != "" && !p.quoted:
		return []byte(p.invalid), nil
	case p.invalid != "" || p.PortName != "" || p.quoted || p.MinPort != p.MaxPort:
		return json.Marshal(p.String())
	}
	return []byte(strconv.Itoa(int(p.MinPort))), nil
}

// UnmarshalJSON accepts a number or a string; bad values are kept for
// validation to report.
func (p *Port) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	quoted := len(b) > 0 && b[0] == '"'
	s := string(b)
	if quoted {
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
	} else if !json.Valid(b) || (b[0] != '-' && (b[0] < '0' || b[0] > '9')) {
		return fmt.Errorf("port must be a number or a string, got %s", b)
	}
	v, msg := parsePort(s)
	if msg != "" || (!quoted && v.PortName != "") {
		v = Port{invalid: s}
	}
	v.quoted = quoted
	*p = v
	return nil
}

// ASNumber is a BGP AS number. JSON accepts a number, a decimal string or
// AS-dot notation ("1.10" = 1<<16 + 10); it is written as a number.
type ASNumber uint32

// DefaultASNumber is the AS number nodes use when nothing sets one.
const DefaultASNumber ASNumber = 64512

// ParseASNumber parses "64512" or AS-dot "1.10".
func ParseASNumber(s string) (ASNumber, error) {
	if hi, lo, ok := strings.Cut(s, "."); ok {
		h, err1 := strconv.ParseUint(hi, 10, 16)
		l, err2 := strconv.ParseUint(lo, 10, 16)
		if err1 != nil || err2 != nil {
			return 0, fmt.Errorf("invalid AS number %q", s)
		}
		return ASNumber(h<<16 | l), nil
	}
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("invalid AS number %q", s)
	}
	return ASNumber(n), nil
}

func (a ASNumber) String() string { return strconv.FormatUint(uint64(a), 10) }

// UnmarshalJSON accepts a number or a string.
func (a *ASNumber) UnmarshalJSON(b []byte) error {
	s := string(bytes.TrimSpace(b))
	if strings.HasPrefix(s, `"`) {
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
	}
	n, err := ParseASNumber(s)
	if err != nil {
		return err
	}
	*a = n
	return nil
}

// Duration is a time.Duration written in JSON as a Go duration string
// ("90s" reads back as "1m30s"), like Kubernetes' metav1.Duration.
type Duration struct{ time.Duration }

// MarshalJSON writes the duration's string form.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.Duration.String()) }

// UnmarshalJSON reads a string such as "30s" or "1m30s".
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string such as \"30s\", got %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("invalid duration %q", s)
	}
	d.Duration = v
	return nil
}
