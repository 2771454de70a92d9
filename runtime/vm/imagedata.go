package vm

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// programData are the host files and directories a program needs besides its binary and
// shared libraries, copied into the guest image with it. Squid reads its MIME table, icons
// and error page templates at start and runs its unlinkd helper (fatal when missing); the
// log daemon serves its access log (only the English templates: the language pack is 8 MB the
// guest would unpack at every boot). iptables loads its matches and targets (conntrack,
// comment, MASQUERADE) from its extension directory with dlopen, which ldd does not see (2 MB),
// and Apache its modules (4.3 MB).
var programData = map[string][]string{
	"squid": {"/etc/squid/errorpage.css", "/usr/share/squid", "/usr/lib/squid/unlinkd", "/usr/lib/squid/log_file_daemon",
		"/usr/share/squid-langpack/templates", "/usr/share/squid-langpack/en", "/usr/share/squid-langpack/English"},
	"iptables-restore": {xtablesDir},
	// Apache: its modules (LoadModule mpm_event, authz_core), and libgcc_s, which glibc
	// dlopens when a thread exits (pthread_exit): without it Apache's event MPM children
	// abort and reset every connection (seen in a guest whose image had no Squid, which
	// links libgcc_s itself).
	"apache2":           {"/usr/lib/apache2/modules", libgccS},
	"ip6tables-restore": {xtablesDir},
}

// libgccS is glibc's unwinder library on Debian amd64, dlopened, not linked.
const libgccS = "/lib/x86_64-linux-gnu/libgcc_s.so.1"

// xtablesDir is where Debian's iptables keeps its extensions (amd64).
const xtablesDir = "/usr/lib/x86_64-linux-gnu/xtables"

// accountFiles are copied from the host so that a daemon's user (Squid's proxy) exists in the
// guest with the host's numbers: the files it writes on the shared directory then have the
// owners they would have on a namespace node.
var accountFiles = []string{"/etc/passwd", "/etc/group"}

// addGuestData adds the account files and the data of the programs (programData) to the
// image's entries. With no /etc/nsswitch.conf the guest's C library reads users and groups
// from these files.
func addGuestData(progs []string, add func(cpioEntry)) error {
	for _, f := range accountFiles {
		if _, err := os.Stat(f); err != nil {
			return fmt.Errorf("read %s for the guest image: %w", f, err)
		}
		add(cpioEntry{Name: strings.TrimPrefix(f, "/"), Source: f, Mode: 0o644})
	}
	for _, p := range progs {
		for _, root := range programData[p] {
			if err := addTree(root, add); err != nil {
				return fmt.Errorf("copy %s's data %s into the guest image: %w (reinstall the package that provides %s)", p, root, err, p)
			}
		}
	}
	return nil
}

// addTree adds a host file, symbolic link or directory tree (not following links) to the
// image under the same path.
func addTree(root string, add func(cpioEntry)) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(path, "/")
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			add(cpioEntry{Name: name, Mode: os.ModeSymlink, Target: target})
		case d.IsDir():
			add(cpioEntry{Name: name, Mode: os.ModeDir | info.Mode().Perm()})
		case d.Type().IsRegular():
			add(cpioEntry{Name: name, Source: path, Mode: info.Mode().Perm()})
		}
		return nil
	})
}
