package api

// Route table indices, as Calico checks routeTableRanges: 1 to the
// kernel's 0xffffffff, at most 0xffff tables in all. (Tables 253-255, the
// kernel's default, main and local, are never used from a range.)
const (
	MaxRouteTableIndex = 0xffffffff
	MaxRouteTables     = 0xffff
)

// Problem is what is wrong with one range of routeTableRanges ("" when
// fine).
func (r RouteTableRange) Problem() string {
	switch {
	case r.Min > r.Max:
		return "min value cannot be greater than max value"
	case r.Min < 1:
		return "cannot target indices < 1"
	case int64(r.Max) > MaxRouteTableIndex:
		return "max index too high"
	}
	return ""
}

// RouteTablesTargeted counts the tables the ranges designate.
func RouteTablesTargeted(rs []RouteTableRange) int64 {
	var n int64
	for _, r := range rs {
		if r.Max >= r.Min {
			n += int64(r.Max) - int64(r.Min) + 1
		}
	}
	return n
}
