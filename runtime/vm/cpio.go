package vm

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
)

// cpioEntry is one member of an initramfs: a directory, a regular file copied from the host,
// or a symbolic link.
type cpioEntry struct {
	Name   string      // path inside the archive, without a leading slash
	Mode   os.FileMode // permission bits and type (os.ModeDir, os.ModeSymlink, 0 = file)
	Source string      // host file to copy (regular files)
	Target string      // link target (symlinks)
}

// writeCPIO writes the entries as an uncompressed "newc" cpio archive, the format the kernel
// unpacks into its root filesystem at boot. Parent directories are added as needed and every
// directory comes before what it holds.
func writeCPIO(w io.Writer, entries []cpioEntry) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	byName := map[string]cpioEntry{}
	for _, e := range entries {
		e.Name = strings.TrimPrefix(path.Clean("/"+e.Name), "/")
		for d := path.Dir(e.Name); d != "." && d != "/"; d = path.Dir(d) {
			if _, ok := byName[d]; !ok {
				byName[d] = cpioEntry{Name: d, Mode: os.ModeDir | 0o755}
			}
		}
		byName[e.Name] = e
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names) // a parent sorts before its children
	ino := 1
	for _, n := range names {
		e := byName[n]
		if err := writeEntry(bw, e, ino); err != nil {
			return fmt.Errorf("write initramfs member %s: %w", n, err)
		}
		ino++
	}
	if err := writeHeader(bw, "TRAILER!!!", 0, 0, 0, 1); err != nil {
		return err
	}
	return bw.Flush()
}

const (
	cpioDir  = 0o040000
	cpioFile = 0o100000
	cpioLink = 0o120000
)

func writeEntry(w *bufio.Writer, e cpioEntry, ino int) error {
	perm := uint32(e.Mode.Perm())
	switch {
	case e.Mode&os.ModeDir != 0:
		return writeHeader(w, e.Name, ino, cpioDir|perm, 0, 2)
	case e.Mode&os.ModeSymlink != 0:
		if err := writeHeader(w, e.Name, ino, cpioLink|0o777, len(e.Target), 1); err != nil {
			return err
		}
		if _, err := w.WriteString(e.Target); err != nil {
			return err
		}
		return pad(w, len(e.Target))
	}
	f, err := os.Open(e.Source)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if perm == 0 {
		perm = uint32(st.Mode().Perm())
	}
	size := int(st.Size())
	if err := writeHeader(w, e.Name, ino, cpioFile|perm, size, 1); err != nil {
		return err
	}
	n, err := io.Copy(w, f)
	if err != nil {
		return err
	}
	if int(n) != size {
		return fmt.Errorf("%s changed while copied", e.Source)
	}
	return pad(w, size)
}

// writeHeader writes a newc header and the name, padded to four bytes.
func writeHeader(w *bufio.Writer, name string, ino int, mode uint32, size, nlink int) error {
	hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		ino, mode, 0, 0, nlink, 0, size, 0, 0, 0, 0, len(name)+1, 0)
	if _, err := w.WriteString(hdr); err != nil {
		return err
	}
	if _, err := w.WriteString(name + "\x00"); err != nil {
		return err
	}
	return pad(w, len(hdr)+len(name)+1)
}

func pad(w *bufio.Writer, n int) error {
	if r := n % 4; r != 0 {
		_, err := w.Write(make([]byte, 4-r))
		return err
	}
	return nil
}
