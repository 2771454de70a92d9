package echo

import (
	"encoding/binary"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

func TestEncodeParse(t *testing.T) {
	tests := []struct {
		proto string
		size  int
	}{{ProtoICMP, 64}, {ProtoICMP, MinSize}, {ProtoICMP, 1500}, {ProtoUDP, 64}, {ProtoUDP, MinSize}}
	for _, tt := range tests {
		msg := message(tt.proto, tt.size)
		encode(msg, tt.proto, 0xabcd1234, 70000)
		wire := msg
		if tt.proto == ProtoICMP {
			if len(msg) != tt.size || checksum(msg) != 0 {
				t.Errorf("%s/%d: length %d, checksum over the message %#x (want 0)", tt.proto, tt.size, len(msg), checksum(msg))
			}
			// The echo reply as a raw socket reads it: IPv4 header, type 0, same id/seq/payload.
			reply := append(make([]byte, 20), msg...)
			reply[0] = 0x45
			reply[20] = 0
			wire = reply
		} else if len(msg) != tt.size-header {
			t.Errorf("udp/%d: payload %d bytes", tt.size, len(msg))
		}
		kind, seq := parse(wire, tt.proto, 0xabcd1234)
		if kind != replyEcho || seq != 70000 {
			t.Errorf("%s/%d: parse = %v, %d; want echo 70000", tt.proto, tt.size, kind, seq)
		}
		if kind, _ := parse(wire, tt.proto, 0xabcd1235); kind != replyOther {
			t.Errorf("%s/%d: another run's echo parsed as ours", tt.proto, tt.size)
		}
	}
	// An echo request we see on the raw socket (type 8) is not a reply.
	msg := message(ProtoICMP, 64)
	encode(msg, ProtoICMP, 7, 1)
	if kind, _ := parse(append(append(make([]byte, 0, 84), 0x45), append(make([]byte, 19), msg...)...), ProtoICMP, 7); kind != replyOther {
		t.Error("an echo request parsed as a reply")
	}
	// Host unreachable quoting our echo request.
	quoted := append([]byte{0x45, 0, 0, 84, 0, 0, 0, 0, 64, 1, 0, 0, 198, 18, 0, 1, 198, 18, 0, 9}, msg[:8]...)
	icmpErr := append([]byte{0x45, 0, 0, 0, 0, 0, 0, 0, 64, 1, 0, 0, 198, 18, 0, 1, 198, 18, 0, 1, 3, 1, 0, 0, 0, 0, 0, 0}, quoted...)
	if kind, seq := parse(icmpErr, ProtoICMP, 7); kind != replyError || seq != 1 {
		t.Errorf("unreachable: parse = %v, %d", kind, seq)
	}
}

func TestChecksumRFC1071(t *testing.T) {
	// RFC 1071's example bytes: 00 01 f2 03 f4 f5 f6 f7 sum to 0xddf2, checksum 0x220d.
	if got := checksum([]byte{0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7}); got != 0x220d {
		t.Errorf("checksum = %#x, want 0x220d", got)
	}
	b := []byte{1, 2, 3}
	c := checksum(b)
	full := append(append(b, 0), byte(c>>8), byte(c))
	_ = binary.BigEndian
	if checksum(full) != 0 {
		t.Errorf("odd length: checksum does not verify")
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"defaults", Config{}, true},
		{"udp flood for 2s", Config{Protocol: ProtoUDP, Rate: Max, Duration: 2 * time.Second}, true},
		{"1 pps", Config{Rate: 1, Count: 3}, true},
		{"tcp", Config{Protocol: "tcp"}, false},
		{"too small", Config{Size: MinSize - 1}, false},
		{"too big", Config{Size: MaxSize + 1}, false},
		{"rate below 1", Config{Rate: 0.5}, false},
		{"rate too high", Config{Rate: MaxRate + 1}, false},
		{"count too high", Config{Count: MaxCount + 1}, false},
		{"long", Config{Duration: 2 * time.Hour}, false},
		{"window", Config{Rate: Max, Window: 70000}, false},
	}
	for _, tt := range tests {
		err := tt.cfg.Validate()
		if (err == nil) != tt.ok {
			t.Errorf("%s: Validate = %v, want ok=%v", tt.name, err, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v does not wrap ErrConfig", tt.name, err)
		}
	}
	if c := (Config{Rate: 2000, Duration: 3 * time.Second}).WithDefaults(); c.Count != 6000 {
		t.Errorf("count from rate x duration = %d, want 6000", c.Count)
	}
	if b := (Config{Rate: 1000, Count: 1000}).Bound(); b != 2*time.Second+time.Second+5*time.Second {
		t.Errorf("Bound = %s", b)
	}
}

// TestPin: a pinned goroutine's thread runs on the given core only; no cores changes nothing.
func TestPin(t *testing.T) {
	allowed := func(cores []int) (string, error) {
		var out string
		var err error
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err = pin(cores); err != nil {
				return
			}
			var b []byte
			if b, err = os.ReadFile("/proc/thread-self/status"); err != nil {
				return
			}
			for _, line := range strings.Split(string(b), "\n") {
				if strings.HasPrefix(line, "Cpus_allowed_list:") {
					out = strings.TrimSpace(strings.TrimPrefix(line, "Cpus_allowed_list:"))
				}
			}
		}()
		<-done
		return out, err
	}
	if got, err := allowed([]int{0}); err != nil || got != "0" {
		t.Errorf("pinned to core 0: Cpus_allowed_list %q, %v", got, err)
	}
	if got, err := allowed(nil); err != nil || got == "" {
		t.Errorf("no cores: Cpus_allowed_list %q, %v", got, err)
	}
}
