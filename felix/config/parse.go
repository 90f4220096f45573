package config

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"net/netip"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/calico-aio/calico-aio/store/api"
)

// Parsers for environment text and checks for stored values, in Calico's
// formats: enumerations case-insensitive, booleans as true/1/yes/y/t,
// durations as (fractional) seconds, port lists as proto:port or
// proto:net:port joined by commas ("none" for an empty list).

var LogLevelNames = []string{"Trace", "Debug", "Info", "Warning", "Error", "Fatal"}

// OneOf parses one of values, case-insensitively, into its canonical form.
func OneOf(values ...string) func(string) (string, error) {
	return func(s string) (string, error) {
		for _, v := range values {
			if strings.EqualFold(s, v) {
				return v, nil
			}
		}
		return "", fmt.Errorf("must be one of %s", strings.Join(values, ", "))
	}
}

// ValidOneOf checks a stored value is one of values (case-insensitively,
// as Calico's own parser accepts it).
func ValidOneOf(values ...string) func(string) error {
	p := OneOf(values...)
	return func(s string) error { _, err := p(s); return err }
}

func ParseBool(s string) (*bool, error) {
	var b bool
	switch strings.ToLower(s) {
	case "true", "1", "yes", "y", "t":
		b = true
	case "false", "0", "no", "n", "f":
	default:
		return nil, errors.New("must be a boolean (true or false)")
	}
	return &b, nil
}

func ParseIntIn(lo, hi int) func(string) (*int, error) {
	return func(s string) (*int, error) {
		n, err := strconv.Atoi(s)
		if err != nil {
			return nil, errors.New("must be an integer")
		}
		if err := ValidIntIn(lo, hi)(&n); err != nil {
			return nil, err
		}
		return &n, nil
	}
}

func ValidIntIn(lo, hi int) func(*int) error {
	return func(n *int) error {
		if *n < lo || *n > hi {
			return fmt.Errorf("%d is out of range %d-%d", *n, lo, hi)
		}
		return nil
	}
}

func ParseMTU(s string) (*int, error) {
	n, err := ParseIntIn(0, 65535)(s)
	if err != nil {
		return nil, err
	}
	return n, ValidMTU(n)
}

// ValidMTU accepts 0 (computed) or 68-65535.
func ValidMTU(n *int) error {
	if *n != 0 && (*n < 68 || *n > 65535) {
		return fmt.Errorf("%d is not an MTU (68-65535, or 0 to compute it)", *n)
	}
	return nil
}

// ParseSeconds reads a duration in seconds ("90", "0.5"), as Calico's
// environment variables give them, or with a unit ("1m30s").
func ParseSeconds(s string) (*api.Duration, error) {
	var d time.Duration
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if f < 0 || math.IsNaN(f) || f > math.MaxInt64/float64(time.Second) {
			return nil, errors.New("must be a non-negative number of seconds")
		}
		d = time.Duration(f * float64(time.Second))
	} else if d, err = time.ParseDuration(s); err != nil || d < 0 {
		return nil, errors.New("must be a non-negative number of seconds (or a duration such as 1m30s)")
	}
	return &api.Duration{Duration: d}, nil
}

// ParseMillis reads a duration in milliseconds ("50"), as Calico's
// *MILLIS variables give them, or with a unit ("50ms").
func ParseMillis(s string) (*api.Duration, error) {
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if f < 0 || math.IsNaN(f) || f > math.MaxInt64/float64(time.Millisecond) {
			return nil, errors.New("must be a non-negative number of milliseconds")
		}
		return &api.Duration{Duration: time.Duration(f * float64(time.Millisecond))}, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return nil, errors.New("must be a non-negative number of milliseconds (or a duration such as 50ms)")
	}
	return &api.Duration{Duration: d}, nil
}

func ValidNonNegative(d *api.Duration) error {
	if d.Duration < 0 {
		return fmt.Errorf("%s is negative", d.Duration)
	}
	return nil
}

func ParseRegexp(s string) (string, error) {
	if _, err := regexp.Compile(s); err != nil {
		return "", fmt.Errorf("not a regular expression: %w", err)
	}
	return s, nil
}

func ValidRegexp(s string) error { _, err := ParseRegexp(s); return err }

// ParseProtoPorts reads "tcp:22, udp:68, tcp:10.0.0.0/8:179" ("none" is
// the empty list).
func ParseProtoPorts(s string) (*[]api.ProtoPort, error) {
	out := []api.ProtoPort{}
	if strings.EqualFold(s, "none") || s == "" {
		return &out, nil
	}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		first, last := strings.Index(item, ":"), strings.LastIndex(item, ":")
		if first < 0 {
			return nil, fmt.Errorf("%q: want protocol:port or protocol:net:port", item)
		}
		pp := api.ProtoPort{Protocol: strings.ToUpper(item[:first])}
		port, err := strconv.ParseUint(item[last+1:], 10, 16)
		if err != nil {
			return nil, fmt.Errorf("%q: bad port", item)
		}
		pp.Port = uint16(port)
		if first != last {
			pp.Net = strings.Trim(item[first+1:last], "[]")
		}
		out = append(out, pp)
	}
	if err := ValidProtoPorts(&out); err != nil {
		return nil, err
	}
	return &out, nil
}

func ValidProtoPorts(ps *[]api.ProtoPort) error {
	for _, p := range *ps {
		switch strings.ToUpper(p.Protocol) {
		case "TCP", "UDP", "SCTP":
		default:
			return fmt.Errorf("protocol %q must be TCP, UDP or SCTP", p.Protocol)
		}
		if p.Net != "" {
			if _, err := netip.ParsePrefix(p.Net); err != nil {
				return fmt.Errorf("net %q is not a CIDR", p.Net)
			}
		}
	}
	return nil
}

// ParseHostString reads a host to listen on: an IP address or a name
// without spaces, ports or brackets.
func ParseHostString(s string) (string, error) {
	if s == "" || strings.ContainsAny(s, " /[]") {
		return "", fmt.Errorf("%q is not a host name or address", s)
	}
	if strings.Contains(s, ":") {
		if _, err := netip.ParseAddr(s); err != nil {
			return "", fmt.Errorf("%q is not a host name or address", s)
		}
	}
	return s, nil
}

func ValidHostString(s string) error { _, err := ParseHostString(s); return err }

func ParseHost(s string) (*string, error) {
	h, err := ParseHostString(s)
	if err != nil {
		return nil, err
	}
	return &h, nil
}

func ValidHost(s *string) error { return ValidHostString(*s) }

// ParseLogPath reads logFilePath: an absolute path, or "none".
func ParseLogPath(s string) (string, error) {
	if strings.EqualFold(s, "none") {
		return "none", nil
	}
	if !filepath.IsAbs(s) || strings.HasSuffix(s, "/") {
		return "", fmt.Errorf("%q must be an absolute file path or none", s)
	}
	return filepath.Clean(s), nil
}

func ValidLogPath(s string) error { _, err := ParseLogPath(s); return err }

func ParseIPv4(s string) (string, error) {
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is4() {
		return "", fmt.Errorf("%q is not an IPv4 address", s)
	}
	return a.String(), nil
}

func ValidIPv4(s string) error { _, err := ParseIPv4(s); return err }

// ParsePortRange reads "32768:65535" or "32768-65535" or one port.
func ParsePortRange(s string) (*api.Port, error) {
	lo, hi, isRange := strings.Cut(strings.ReplaceAll(s, "-", ":"), ":")
	if !isRange {
		hi = lo
	}
	a, err1 := strconv.ParseUint(lo, 10, 16)
	b, err2 := strconv.ParseUint(hi, 10, 16)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("%q is not a port or port range", s)
	}
	p := api.PortRange(uint16(a), uint16(b))
	if err := ValidPortRange(&p); err != nil {
		return nil, err
	}
	return &p, nil
}

func ValidPortRange(p *api.Port) error {
	if p.PortName != "" || p.MinPort == 0 || p.MaxPort < p.MinPort {
		return fmt.Errorf("%q must be a port or port range (1-65535, low first)", p.String())
	}
	return nil
}

// ParseMarkMask reads a mask in hex ("0xffff0000") or decimal.
func ParseMarkMask(s string) (*uint32, error) {
	v, err := strconv.ParseUint(s, 0, 32)
	if err != nil {
		return nil, fmt.Errorf("%q is not a 32-bit mask (hex 0x... or decimal)", s)
	}
	m := uint32(v)
	return &m, ValidMarkMask(&m)
}

// ValidMarkMask wants the three bits the rules use (accept, pass, scratch).
func ValidMarkMask(m *uint32) error {
	if bits.OnesCount32(*m) < 3 {
		return fmt.Errorf("%#x has fewer than the 3 bits the agent's rules use", *m)
	}
	return nil
}
