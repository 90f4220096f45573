package config

// floatingIPs ("Enabled"/"Disabled", Calico's default Disabled) decides
// whether the ipNATs of non-OpenStack endpoints are programmed
// (felix/calc/desired.go); the field is a pointer in the spec.

// OptOneOf is OneOf for a field stored as a pointer.
func OptOneOf(values ...string) func(string) (*string, error) {
	p := OneOf(values...)
	return func(s string) (*string, error) {
		v, err := p(s)
		if err != nil {
			return nil, err
		}
		return &v, nil
	}
}

func ValidOptOneOf(values ...string) func(*string) error {
	p := ValidOneOf(values...)
	return func(s *string) error { return p(*s) }
}
