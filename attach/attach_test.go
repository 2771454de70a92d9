package attach

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeSysfs writes a sysfs tree: files are path -> content; dirs are created for them.
func fakeSysfs(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, c := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if c == "<dir>" {
			if err := os.MkdirAll(full, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestFindVF(t *testing.T) {
	one := 1
	five := 5
	withVFs := map[string]string{
		"class/net/ens1f0/device/sriov_totalvfs":      "8\n",
		"class/net/ens1f0/device/sriov_numvfs":        "2\n",
		"class/net/ens1f0/device/virtfn0/net/ens1v0":  "<dir>",
		"class/net/ens1f0/device/virtfn1/net/ens1v1":  "<dir>",
		"class/net/eth0/device/vendor":                "0x1af4\n",
		"class/net/ens1f1/device/sriov_totalvfs":      "8\n",
		"class/net/ens1f1/device/sriov_numvfs":        "0\n",
		"class/net/ens1f2/device/sriov_totalvfs":      "4\n",
		"class/net/ens1f2/device/sriov_numvfs":        "1\n",
		"class/net/ens1f2/device/virtfn0/driver/bind": "", // bound elsewhere: no net/
	}
	noSRIOV := map[string]string{"class/net/eth0/device/vendor": "0x1af4\n"}
	tests := []struct {
		name   string
		sysfs  map[string]string
		pf     string
		vf     *int
		want   string // VF netdev, or "" for an error
		errHas string
	}{
		{"first free VF", withVFs, "ens1f0", nil, "ens1v0", ""},
		{"VF by number", withVFs, "ens1f0", &one, "ens1v1", ""},
		{"VF number not enabled", withVFs, "ens1f0", &five, "", "vf 5 has no interface"},
		{"VFs not enabled", withVFs, "ens1f1", nil, "", "no VFs enabled (of 8); enable them: echo 8 >"},
		{"VFs taken", withVFs, "ens1f2", nil, "", "all 1 enabled VFs are taken"},
		{"not a PF, others are", withVFs, "eth0", nil, "", "SR-IOV PFs on this host: ens1f0, ens1f1, ens1f2"},
		{"no SR-IOV NIC at all", noSRIOV, "eth0", nil, "", "this host has no PF with sriov_totalvfs > 0"},
		{"no such PF", noSRIOV, "nope0", nil, "", "sriov_totalvfs is missing or 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := Host{Sysfs: fakeSysfs(t, tt.sysfs)}
			vf, err := h.FindVF(tt.pf, tt.vf)
			if tt.want != "" {
				if err != nil || vf.Netdev != tt.want || vf.PF != tt.pf {
					t.Fatalf("FindVF = %+v, %v; want %s", vf, err, tt.want)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrNoSRIOV) || !strings.Contains(err.Error(), tt.errHas) {
				t.Fatalf("FindVF error %v; want ErrNoSRIOV with %q", err, tt.errHas)
			}
		})
	}
}

// TestThisHostHasNoSRIOV reads the real /sys: on this machine kind there is no SR-IOV NIC, and
// the refusal says so. Where a PF exists the test says that instead of failing.
func TestThisHostHasNoSRIOV(t *testing.T) {
	h := Host{Sysfs: "/sys"}
	if m, _ := filepath.Glob("/sys/class/net/*/device/sriov_totalvfs"); len(m) > 0 {
		t.Skipf("SKIPPED LOUDLY: this host has SR-IOV capable devices %v; the refusal is tested on a fake sysfs", m)
	}
	_, err := h.FindVF("eth0", nil)
	if !errors.Is(err, ErrNoSRIOV) || !strings.Contains(err.Error(), "no PF with sriov_totalvfs > 0") {
		t.Fatalf("FindVF on this host: %v", err)
	}
	t.Log(err)
}
