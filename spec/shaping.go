package spec

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Shaping limits the links of a chain's segment: a rate (tbf), and delay, jitter and loss
// (netem, where the kernel has it). It applies to every member's interface on the segment,
// so each direction gets the rate.
type Shaping struct {
	// Segment is the index of the chain's segment (0 = from the source to the first hop);
	// nil means every segment of the chain.
	Segment *int `yaml:"segment,omitempty" json:"segment,omitempty"`
	// Rate is a bit rate in tc's units: bit, kbit, mbit, gbit, tbit ("10gbit").
	Rate string `yaml:"rate,omitempty" json:"rate,omitempty"`
	// Burst is the bucket size in bytes: b, kb, mb ("64kb"); default rate/250 (at least 16kb).
	Burst string `yaml:"burst,omitempty" json:"burst,omitempty"`
	// Delay, Jitter ("5ms") and Loss ("0.1%") need the kernel's netem (sch_netem).
	Delay  string `yaml:"delay,omitempty" json:"delay,omitempty"`
	Jitter string `yaml:"jitter,omitempty" json:"jitter,omitempty"`
	Loss   string `yaml:"loss,omitempty" json:"loss,omitempty"`

	Pos Pos `yaml:"-" json:"-"`
}

// UnmarshalYAML decodes a shaping entry and remembers where it was.
func (s *Shaping) UnmarshalYAML(n *yaml.Node) error {
	type plain Shaping
	return decodeAt(n, (*plain)(s), &s.Pos)
}

// Shape is a validated shaping entry in numbers.
type Shape struct {
	// RateBits is bits per second (0: no rate limit); BurstBytes the bucket.
	RateBits   uint64        `json:"rate_bits,omitempty"`
	BurstBytes uint32        `json:"burst_bytes,omitempty"`
	Delay      time.Duration `json:"delay_ns,omitempty"`
	Jitter     time.Duration `json:"jitter_ns,omitempty"`
	// LossPercent is 0-100.
	LossPercent float64 `json:"loss_percent,omitempty"`
}

// NeedsNetem reports whether the shape needs netem (delay, jitter or loss).
func (s Shape) NeedsNetem() bool { return s.Delay > 0 || s.Jitter > 0 || s.LossPercent > 0 }

// String is the shape as tc would show it.
func (s Shape) String() string {
	var parts []string
	if s.RateBits > 0 {
		parts = append(parts, "rate "+FormatRate(s.RateBits), fmt.Sprintf("burst %db", s.BurstBytes))
	}
	if s.Delay > 0 {
		parts = append(parts, "delay "+s.Delay.String())
	}
	if s.Jitter > 0 {
		parts = append(parts, "jitter "+s.Jitter.String())
	}
	if s.LossPercent > 0 {
		parts = append(parts, "loss "+strconv.FormatFloat(s.LossPercent, 'g', -1, 64)+"%")
	}
	return strings.Join(parts, " ")
}

// Parse validates the entry and returns it in numbers; errors say what to write instead.
func (s *Shaping) Parse() (Shape, error) {
	var out Shape
	var err error
	if s.Rate == "" && s.Burst == "" && s.Delay == "" && s.Jitter == "" && s.Loss == "" {
		return out, fmt.Errorf("shaping sets nothing: give rate (e.g. 10gbit), delay, jitter or loss")
	}
	if s.Rate != "" {
		if out.RateBits, err = ParseRate(s.Rate); err != nil {
			return out, err
		}
		out.BurstBytes = uint32(max(out.RateBits/8/250, 16<<10))
	}
	if s.Burst != "" {
		if s.Rate == "" {
			return out, fmt.Errorf("burst %q needs a rate", s.Burst)
		}
		b, err := parseBytes(s.Burst)
		if err != nil {
			return out, err
		}
		out.BurstBytes = b
	}
	for _, d := range []struct {
		name, text string
		to         *time.Duration
	}{{"delay", s.Delay, &out.Delay}, {"jitter", s.Jitter, &out.Jitter}} {
		if d.text == "" {
			continue
		}
		v, err := time.ParseDuration(d.text)
		if err != nil || v < 0 || v > time.Minute {
			return out, fmt.Errorf("%s %q: give a duration from 0 to 1m, e.g. 5ms", d.name, d.text)
		}
		*d.to = v
	}
	if out.Jitter > 0 && out.Delay == 0 {
		return out, fmt.Errorf("jitter %q needs a delay", s.Jitter)
	}
	if s.Loss != "" {
		num, ok := strings.CutSuffix(strings.TrimSpace(s.Loss), "%")
		v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
		if !ok || err != nil || v < 0 || v > 100 || math.IsNaN(v) {
			return out, fmt.Errorf("loss %q: give a percentage from 0%% to 100%%, e.g. 0.1%%", s.Loss)
		}
		out.LossPercent = v
	}
	return out, nil
}

// rateUnits are tc's bit rate units (tc reads "bps" as bytes per second, a common typo).
var rateUnits = []struct {
	suffix string
	mult   float64
}{{"tbit", 1e12}, {"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3}, {"bit", 1}}

// ParseRate parses a bit rate in tc's units: "10gbit", "100mbit", "1.5gbit", "500kbit".
func ParseRate(s string) (uint64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	for _, u := range rateUnits {
		if num, ok := strings.CutSuffix(t, u.suffix); ok {
			v, err := strconv.ParseFloat(num, 64)
			if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
				break
			}
			if v <= 0 {
				return 0, fmt.Errorf("rate %q: a rate must be more than 0 (leave rate out for no limit)", s)
			}
			bits := v * u.mult
			if bits < 8 || bits > 4e12 {
				return 0, fmt.Errorf("rate %q: give 8bit to 4tbit", s)
			}
			return uint64(bits), nil
		}
	}
	return 0, fmt.Errorf("rate %q: give a number and a unit of bit, kbit, mbit, gbit or tbit, e.g. 10gbit (bps, gbps are not bit rates here)", s)
}

// FormatRate writes a bit rate in the largest unit that keeps it whole, or with decimals.
func FormatRate(bits uint64) string {
	for _, u := range rateUnits {
		if float64(bits) >= u.mult {
			return strconv.FormatFloat(float64(bits)/u.mult, 'g', 6, 64) + u.suffix
		}
	}
	return strconv.FormatUint(bits, 10) + "bit"
}

func parseBytes(s string) (uint32, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mult := 1.0
	switch {
	case strings.HasSuffix(t, "mb"):
		mult, t = 1<<20, strings.TrimSuffix(t, "mb")
	case strings.HasSuffix(t, "kb"):
		mult, t = 1<<10, strings.TrimSuffix(t, "kb")
	case strings.HasSuffix(t, "b"):
		t = strings.TrimSuffix(t, "b")
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v*mult < 1600 || v*mult > 1<<30 {
		return 0, fmt.Errorf("burst %q: give bytes with b, kb or mb from 1600b (one full frame) to 1024mb, e.g. 64kb", s)
	}
	return uint32(v * mult), nil
}

// shaping checks a chain's shaping entries.
func (v *validator) shaping(c *Chain) {
	seen := map[int]bool{}
	for _, s := range c.Shaping {
		if s == nil {
			continue
		}
		if _, err := s.Parse(); err != nil {
			v.bad(s.Pos, "chain %q: shaping: %v", c.Name, err)
		}
		segs := len(c.Hops) + 1
		if s.Segment != nil {
			if *s.Segment < 0 || *s.Segment >= segs {
				v.bad(s.Pos, "chain %q: shaping segment %d: the chain has segments 0 to %d (0 = from %s to the first hop)", c.Name, *s.Segment, segs-1, c.From.Name)
				continue
			}
			if seen[*s.Segment] {
				v.bad(s.Pos, "chain %q: segment %d is shaped twice", c.Name, *s.Segment)
			}
			seen[*s.Segment] = true
		} else if len(c.Shaping) > 1 {
			v.bad(s.Pos, "chain %q: a shaping entry without segment applies to every segment; give each entry a segment", c.Name)
		}
	}
}
