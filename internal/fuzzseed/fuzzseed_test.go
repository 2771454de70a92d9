package fuzzseed

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestEncodeDecode(t *testing.T) {
	for _, in := range [][]byte{nil, []byte("a: b\n"), []byte("\x00\xff\"\\)"), []byte("line one\nline two\t")} {
		out, err := Decode(Encode(in))
		if err != nil || !bytes.Equal(out, in) {
			t.Errorf("Decode(Encode(%q)) = %q, %v", in, out, err)
		}
	}
	// The form go test itself writes for a crasher.
	if out, err := Decode([]byte("go test fuzz v1\n[]byte(\"0\\x00\")\n")); err != nil || string(out) != "0\x00" {
		t.Errorf("Decode(go test's form) = %q, %v", out, err)
	}
	for _, bad := range []string{"", "go test fuzz v1\nstring(\"x\")\n", "[]byte(\"x\")"} {
		if _, err := Decode([]byte(bad)); err == nil {
			t.Errorf("Decode(%q) succeeded", bad)
		}
	}
}

func TestSync(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "FuzzX")
	want := map[string][]byte{"b": []byte("two"), "a": []byte("one")}
	missing, err := Sync(dir, want, false)
	if err != nil || len(missing) != 2 || missing[0] != "a" {
		t.Fatalf("Sync(no dir) = %v, %v; want [a b]", missing, err)
	}
	if _, err := Sync(dir, want, true); err != nil {
		t.Fatal(err)
	}
	if missing, err := Sync(dir, want, false); err != nil || len(missing) != 0 {
		t.Fatalf("Sync after writing = %v, %v", missing, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "junk"), []byte("not a seed"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadDir(dir); err == nil {
		t.Error("ReadDir accepted a file that is not a seed")
	}
	if Name("bad-", "Bad CIDR/x") != "bad-bad-cidr-x" {
		t.Errorf("Name = %q", Name("bad-", "Bad CIDR/x"))
	}
}
