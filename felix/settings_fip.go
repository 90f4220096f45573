package felix

// floatingIPs ("Enabled"/"Disabled", Calico's default Disabled) decides
// whether the ipNATs of non-OpenStack endpoints are programmed
// (felix/calc/desired.go); the field is a pointer in the spec.

// optOneOf is oneOf for a field stored as a pointer.
func optOneOf(values ...string) func(string) (*string, error) {
	p := oneOf(values...)
	return func(s string) (*string, error) {
		v, err := p(s)
		if err != nil {
			return nil, err
		}
		return &v, nil
	}
}

func validOptOneOf(values ...string) func(*string) error {
	p := validOneOf(values...)
	return func(s *string) error { return p(*s) }
}
