package cli

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sfclab/sfclab/runtime/vm"
	"github.com/sfclab/sfclab/spec"
)

// TestImagesListInUse: `images list --runtime vm` shows which guest images a running process
// boots (here one holding a file of the image open by its path, as QEMU names -kernel), and
// `images rm` keeps such an image, saying by whom, while it removes an unused one.
func TestImagesListInUse(t *testing.T) {
	root := t.TempDir()
	t.Setenv(vm.ImageRootEnv, root)
	for _, key := range []string{"00000000000000aa", "00000000000000bb"} {
		im := vm.Image{Key: key, Kernel: "6.1.0-56-amd64", Kind: spec.VMImageBusybox, Created: time.Now().UTC(), Programs: []string{"ip"}}
		data, err := json.Marshal(im)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(root, key), 0o755); err != nil {
			t.Fatal(err)
		}
		for name, content := range map[string][]byte{"image.json": data, "vmlinux": []byte("kernel")} {
			if err := os.WriteFile(filepath.Join(root, key, name), content, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	user := exec.Command("tail", "-f", filepath.Join(root, "00000000000000aa", "vmlinux"))
	if err := user.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = user.Process.Kill()
		_ = user.Wait()
	})
	byWhom := "pid " + strconv.Itoa(user.Process.Pid)

	code, out, errOut := run(t, "images", "list", "--runtime", "vm")
	if code != 0 {
		t.Fatalf("images list: exit %d: %s", code, errOut)
	}
	rows := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			rows[f[0]] = l
		}
	}
	if !strings.Contains(rows["KEY"], "IN USE") || !strings.Contains(rows["00000000000000aa"], byWhom) ||
		rows["00000000000000bb"] == "" || strings.Contains(rows["00000000000000bb"], "pid ") {
		t.Errorf("images list:\n%s\nwant aa in use by %s, bb not in use", out, byWhom)
	}

	code, _, errOut = run(t, "images", "rm", "--runtime", "vm", "--all")
	if code == 0 || !strings.Contains(errOut, "kept 00000000000000aa (in use by "+byWhom+")") {
		t.Errorf("images rm --all: exit %d, stderr %q; want it to refuse aa, in use by %s", code, errOut, byWhom)
	}
	if _, err := os.Stat(filepath.Join(root, "00000000000000aa", "image.json")); err != nil {
		t.Errorf("image in use removed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "00000000000000bb")); !os.IsNotExist(err) {
		t.Errorf("unused image bb: %v, want it removed", err)
	}
}
