package cli

import (
	"os"
	"path/filepath"
	"testing"
)

func TestServeToken(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "token")
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(good, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		listen, file, token string
		ok                  bool
	}{
		{"127.0.0.1:9696", "", "", true},
		{"[::1]:9696", "", "", true},
		{"localhost:9696", "", "", true},
		{"0.0.0.0:9696", "", "", false},
		{":9696", "", "", false},
		{"198.18.0.1:9696", "", "", false},
		{"0.0.0.0:9696", good, "s3cret", true},
		{"127.0.0.1:9696", good, "s3cret", true},
		{"0.0.0.0:9696", empty, "", false},
		{"0.0.0.0:9696", filepath.Join(dir, "missing"), "", false},
		{"9696", "", "", false},
	} {
		tok, err := serveToken(tc.listen, tc.file)
		if (err == nil) != tc.ok || tok != tc.token {
			t.Errorf("serveToken(%q, %q) = %q, %v; want %q, ok=%v", tc.listen, tc.file, tok, err, tc.token, tc.ok)
		}
	}
}
