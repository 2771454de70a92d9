package debian

import (
	"os"
	"path/filepath"
	"testing"
)

func TestHostSourceFormats(t *testing.T) {
	for _, tc := range []struct {
		name, file, text string
		want             Source
	}{
		{"deb822", "sources.list.d/debian.sources", `Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
`, Source{Mirror: "http://deb.debian.org/debian", Suite: "bookworm"}},
		{"deb822 security first", "sources.list.d/debian.sources", `Types: deb
URIs: http://security.debian.org/debian-security
Suites: trixie-security
Components: main

Types: deb deb-src
URIs: https://mirror.example.org/debian/
Suites: trixie
Components: main contrib
`, Source{Mirror: "https://mirror.example.org/debian", Suite: "trixie"}},
		{"disabled stanza", "sources.list.d/x.sources", `Enabled: no
Types: deb
URIs: http://a.example/debian
Suites: bookworm
Components: main

Types: deb
URIs: http://b.example/debian
Suites: bookworm
Components: main
`, Source{Mirror: "http://b.example/debian", Suite: "bookworm"}},
		{"one-line", "sources.list", `# comment
deb-src http://deb.debian.org/debian bookworm main
deb [arch=amd64 signed-by=/usr/share/keyrings/k.gpg] http://ftp.de.debian.org/debian/ bookworm main non-free
deb http://deb.debian.org/debian bookworm-updates main
`, Source{Mirror: "http://ftp.de.debian.org/debian", Suite: "bookworm"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			old := AptDir
			AptDir = dir
			defer func() { AptDir = old }()
			path := filepath.Join(dir, tc.file)
			os.MkdirAll(filepath.Dir(path), 0o755)
			os.WriteFile(path, []byte(tc.text), 0o644)
			got, err := HostSource()
			if err != nil || got != tc.want {
				t.Errorf("HostSource() = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
	t.Run("none", func(t *testing.T) {
		old := AptDir
		AptDir = t.TempDir()
		defer func() { AptDir = old }()
		if _, err := HostSource(); err == nil {
			t.Error("no sources: no error")
		}
	})
}

func TestDebootstrapProgress(t *testing.T) {
	var got []Progress
	d := &debootstrapProgress{phase: "resolve", counts: map[string]int64{}, report: func(p Progress) { got = append(got, p) }}
	for _, l := range []string{
		"I: Retrieving InRelease", "I: Checking Release signature", "I: Retrieving Packages", "I: Validating Packages",
		"I: Resolving dependencies of required packages...", "I: Checking component main on http://deb.debian.org/debian...",
		"I: Retrieving adduser 3.134", "I: Validating adduser 3.134", "I: Retrieving libc6 2.36-9", "I: Validating libc6 2.36-9",
		"I: Chosen extractor for .deb packages: dpkg-deb", "I: Extracting adduser...", "I: Installing core packages...",
		"I: Unpacking required packages...", "I: Unpacking libc6:amd64...", "I: Configuring required packages...",
		"I: Configuring libc6:amd64...", "I: Unpacking the base system...", "I: Unpacking adduser...", "I: Configuring adduser...",
		"W: something", "I: Base system installed successfully.",
	} {
		d.line(l)
	}
	last := map[string]Progress{}
	for _, p := range got {
		last[p.Phase] = p
	}
	if p := last["download"]; p.Done != 2 {
		t.Errorf("download: %+v", p)
	}
	if p := last["extract"]; p.Done != 1 {
		t.Errorf("extract: %+v", p)
	}
	if p := last["unpack"]; p.Done != 2 || p.Total != 2 {
		t.Errorf("unpack: %+v", p)
	}
	if p := last["configure"]; p.Done != 2 || p.Total != 2 {
		t.Errorf("configure: %+v", p)
	}
}
