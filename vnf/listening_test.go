package vnf

import "testing"

// TestListening reads ss's and busybox netstat's listings as Listens does, and a VM guest
// agent's (runtime/vm's guestListening: ss's columns from the kernel's socket tables).
func TestListening(t *testing.T) {
	const ss = "LISTEN 0      4096   198.18.1.2:5201      0.0.0.0:*\nLISTEN 0 511 [2001:2::1]:80 [::]:*\n"
	const netstat = "Active Internet connections (only servers)\nProto Recv-Q Send-Q Local Address           Foreign Address         State\ntcp        0      0 0.0.0.0:80              0.0.0.0:*               LISTEN\ntcp        0      0 2001:2::1:8080          :::*                    LISTEN\n"
	const agent = "LISTEN 0 0 0.0.0.0:80 *:*\nLISTEN 0 0 [::]:80 *:*\nLISTEN 0 0 127.0.0.1:8080 *:*\n"
	for _, tt := range []struct {
		name, out, host, port string
		want                  bool
	}{
		{"ss exact", ss, "198.18.1.2", "5201", true},
		{"ss other address", ss, "198.18.1.3", "5201", false},
		{"ss other port", ss, "198.18.1.2", "5202", false},
		{"ss ipv6", ss, "2001:2::1", "80", true},
		{"netstat wildcard", netstat, "198.18.2.2", "80", true},
		{"netstat ipv6 unbracketed", netstat, "2001:2::1", "8080", true},
		{"agent wildcard", agent, "0.0.0.0", "80", true},
		{"agent loopback only", agent, "0.0.0.0", "8080", false},
		{"netstat header only", "Proto Recv-Q Send-Q Local Address Foreign Address State\n", "0.0.0.0", "80", false},
	} {
		if got := listening([]byte(tt.out), 3, tt.host, tt.port); got != tt.want {
			t.Errorf("%s: listening = %v, want %v", tt.name, got, tt.want)
		}
	}
}
