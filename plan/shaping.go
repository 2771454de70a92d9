package plan

import "github.com/sfclab/sfclab/spec"

// shapeOf is the shaping of segment k of a validated chain: its own entry, or the entry
// without a segment, or nil.
func shapeOf(c *spec.Chain, k int) *spec.Shape {
	for _, s := range c.Shaping {
		if s == nil || (s.Segment != nil && *s.Segment != k) {
			continue
		}
		sh, err := s.Parse()
		if err != nil {
			return nil // validation reported it
		}
		return &sh
	}
	return nil
}
