package probe

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/sfclab/sfclab/internal/plantest"
	"github.com/sfclab/sfclab/plan"
)

func TestHelpers(t *testing.T) {
	tests := []struct {
		name                string
		p                   *plan.Plan
		dest                string
		nodes               []string
		service, targetPort uint16
	}{
		{"baseline", plantest.Load(t, "../examples/baseline.yaml"), "", nil, DefaultPort, DefaultPort},
		{"fw", plantest.Load(t, "../examples/fw.yaml"), "", []string{"server"}, DefaultPort, DefaultPort},
		{"fw-lb", plantest.Load(t, "../examples/fw-lb.yaml"), "198.18.2.2", []string{"server"}, 5201, 5201},
		{"lb-3", plantest.Load(t, "../examples/lb-3.yaml"), "198.18.1.2", []string{"web-1", "web-2", "web-3"}, 5201, 5201},
		{"backend-port", plantest.Decode(t, `
name: bp
endpoints:
  client: {kind: client}
  web: {kind: server, instances: 2}
functions:
  lb: {kind: l4lb, params: {impl: haproxy, port: 80, backend_port: 8080}}
chains:
  - {name: c, from: client, to: web, classifier: {protocol: tcp}, hops: [lb]}
`), "", []string{"web-1", "web-2"}, 8080, 80},
		// Any proxy, not only an l4lb: servers listen where an HTTP proxy connects (80 for
		// an origin that names no port), the source sends to the proxy's own port.
		{"http-proxy", plantest.Decode(t, `
name: hp
endpoints:
  client: {kind: client}
  web: {kind: server}
functions:
  proxy: {kind: http-proxy}
chains:
  - {name: c, from: client, to: web, classifier: {protocol: tcp}, hops: [proxy]}
`), "", []string{"web"}, 80, 3128},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.p.Chains[0]
			got := DestinationAddr(tt.p, c)
			if !got.IsValid() {
				t.Fatalf("DestinationAddr: none")
			}
			if tt.dest != "" && got != netip.MustParseAddr(tt.dest) {
				t.Errorf("DestinationAddr = %s, want %s", got, tt.dest)
			}
			// The address must belong to the destination's first instance, on the last segment.
			first := tt.p.Node(DestinationNodes(tt.p, c)[0])
			var onLast bool
			for _, i := range first.Interfaces {
				if i.Address.Addr() == got && i.Segment == c.Segments[len(c.Segments)-1] {
					onLast = true
				}
			}
			if !onLast {
				t.Errorf("DestinationAddr %s is not %s's address on segment %s", got, first.Name, c.Segments[len(c.Segments)-1])
			}
			if tt.nodes != nil && !slices.Equal(DestinationNodes(tt.p, c), tt.nodes) {
				t.Errorf("DestinationNodes = %v, want %v", DestinationNodes(tt.p, c), tt.nodes)
			}
			if got := ServicePort(tt.p, c); got != tt.service {
				t.Errorf("ServicePort = %d, want %d", got, tt.service)
			}
			if got := TargetPort(tt.p, c); got != tt.targetPort {
				t.Errorf("TargetPort = %d, want %d", got, tt.targetPort)
			}
		})
	}
}
