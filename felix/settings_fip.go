package felix

import "github.com/calico-aio/calico-aio/felix/config"

// floatingIPs ("Enabled"/"Disabled", Calico's default Disabled) decides
// whether the ipNATs of non-OpenStack endpoints are programmed
// (felix/calc/desired.go); the field is a pointer in the spec.

// optOneOf is config.OneOf for a field stored as a pointer.
func optOneOf(values ...string) func(string) (*string, error) {
	p := config.OneOf(values...)
	return func(s string) (*string, error) {
		v, err := p(s)
		if err != nil {
			return nil, err
		}
		return &v, nil
	}
}

func validOptOneOf(values ...string) func(*string) error {
	p := config.ValidOneOf(values...)
	return func(s *string) error { return p(*s) }
}
