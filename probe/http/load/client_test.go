package load

import "testing"

func TestParseHead(t *testing.T) {
	for _, tc := range []struct {
		head    string
		status  int
		length  int64
		closing bool
		bad     bool
	}{
		{"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n", 200, 10, false, false},
		{"HTTP/1.1 200 OK\r\ncontent-length: 10\r\nConnection: close\r\n", 200, 10, true, false},
		{"HTTP/1.0 200 OK\r\nContent-Length: 10\r\n", 200, 10, true, false},
		{"HTTP/1.0 200 OK\r\nContent-Length: 10\r\nConnection: keep-alive\r\n", 200, 10, false, false},
		{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n", 200, -1, true, false},
		{"HTTP/1.1 304 Not Modified\r\n", 304, 0, false, false},
		{"HTTP/1.1 200 OK\r\n", 200, -1, true, false},
		{"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 3000\r\n", 503, 3000, false, false},
		{"SSH-2.0-OpenSSH\r\n", 0, 0, false, true},
		{"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n", 0, 0, false, true},
	} {
		c := &conn{length: -1}
		err := parseHead(c, []byte(tc.head))
		if (err != nil) != tc.bad {
			t.Errorf("%q: error %v", tc.head, err)
			continue
		}
		if !tc.bad && (c.status != tc.status || c.length != tc.length || c.closing != tc.closing) {
			t.Errorf("%q: status %d length %d closing %v", tc.head, c.status, c.length, c.closing)
		}
	}
}
