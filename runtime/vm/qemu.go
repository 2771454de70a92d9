package vm

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/runtime/vm/accel"
)

// QEMU is the emulator binary sfclab starts.
const QEMU = "qemu-system-x86_64"

// ErrNoQEMU means QEMU is not installed.
var ErrNoQEMU = errors.New(QEMU + " is not installed: apt-get install qemu-system-x86")

// port is one guest NIC: the tap QEMU opens by name, or the file descriptor it inherits (a
// macvtap's character device), and the MAC the guest sees.
type port struct {
	Tap, MAC string
	FD       int // > 0: QEMU's tap backend on this inherited descriptor instead of Tap
}

// machine is everything one QEMU command line is made of.
type machine struct {
	Name     string
	VM       plan.VM
	Accel    accel.Decision
	Image    *Image
	TSCkHz   int
	Ports    []port
	Socket   string // the agent's unix socket
	Console  string // the serial console's log file
	PIDFile  string
	Cmdline  string // extra kernel command line
	Affinity string // host cores (taskset), "" = any
	Share    string // host directory the guest mounts at the same path (9p), "" = none
}

// bootSkips leave out boot work a guest never uses, found with initcall_debug under TCG
// (docs/vm.md, "Where a boot's time goes"): the crypto API's self-tests of every algorithm
// registered at boot (cryptomgr.notests), and three initcalls: the SP800-108 KDF's self-test
// (crypto_kdf108_init, 0.5-0.7 s of emulated CPU on its own; only the encrypted-keys key type
// uses the KDF), that key type (init_encrypted, 0.14 s) and kprobe trace events
// (init_kprobe_trace, 0.06-0.19 s; no tracing in guests).
var bootSkips = []string{"cryptomgr.notests", "initcall_blacklist=crypto_kdf108_init,init_encrypted,init_kprobe_trace"}

// args is QEMU's command line: a microvm (no firmware, no PCI, virtio-mmio devices), the
// uncompressed kernel booted directly (PVH entry) with the uncompressed initramfs, a
// virtio-net device per port on its tap, the agent's virtio-serial port on a unix socket and
// the serial console in a file. tsc_early_khz gives the guest the host's TSC frequency: under
// TCG its TSC calibration against the emulated PIT hung about a third of the boots without.
//
// Equivalent to: qemu-system-x86_64 -M microvm -kernel vmlinux -initrd initramfs.cpio -append ... -netdev tap,... -device virtio-net-device,...
func (m machine) args() []string {
	acc := "tcg"
	if !m.Accel.Emulated() {
		acc = "kvm"
	}
	kcmd := []string{"console=ttyS0", "quiet", "panic=-1", "rdinit=/init", "tsc=reliable",
		"i8042.noaux", "i8042.nokbd", "i8042.nopnp", "random.trust_cpu=on", "mitigations=off"}
	kcmd = append(kcmd, bootSkips...)
	if m.TSCkHz > 0 {
		kcmd = append(kcmd, "tsc_early_khz="+strconv.Itoa(m.TSCkHz))
	}
	if m.Share != "" {
		kcmd = append(kcmd, shareParam+"="+m.Share)
	}
	if m.Image.Disk() != "" {
		kcmd = append(kcmd, rootParam+"="+rootDevice)
	}
	if m.Cmdline != "" {
		kcmd = append(kcmd, m.Cmdline)
	}
	a := []string{QEMU,
		"-name", m.Name + ",debug-threads=on",
		"-M", "microvm,accel=" + acc + ",pit=on,pic=on,rtc=on",
		"-nodefaults", "-no-user-config", "-nographic", "-no-reboot",
		"-smp", strconv.Itoa(m.VM.CPUs), "-m", strconv.Itoa(m.VM.Memory),
		"-kernel", m.Image.VMLinux(), "-initrd", m.Image.Initramfs(),
		"-append", strings.Join(kcmd, " "),
		"-chardev", "file,id=con,path=" + m.Console,
		"-serial", "chardev:con",
		"-chardev", "socket,id=agent,path=" + m.Socket + ",server=on,wait=off",
		"-device", "virtio-serial-device",
		"-device", "virtserialport,chardev=agent,name=" + portName,
		"-pidfile", m.PIDFile,
	}
	for i, p := range m.Ports {
		id := "n" + strconv.Itoa(i)
		nd := "tap,id=" + id + ",ifname=" + p.Tap + ",script=no,downscript=no"
		if p.FD > 0 {
			nd = "tap,id=" + id + ",fd=" + strconv.Itoa(p.FD)
		}
		a = append(a, "-netdev", nd, "-device", "virtio-net-device,netdev="+id+",mac="+p.MAC)
	}
	if d := m.Image.Disk(); d != "" {
		// The Debian root, read-only: every VM of the image shares the file (and the host's
		// page cache of it); each guest's writes go to its own memory (overlayfs).
		a = append(a, "-drive", "file="+d+",if=none,id=root,format=raw,readonly=on",
			"-device", "virtio-blk-device,drive=root")
	}
	a = append(a, m.shareArgs()...)
	if m.Affinity != "" {
		a = append([]string{"taskset", "-c", m.Affinity}, a...)
	}
	return a
}

// rootDevice is the guest's name of the root disk: the only virtio-blk device.
const rootDevice = "/dev/vda"

// CheckQEMU fails with ErrNoQEMU unless QEMU is installed.
func CheckQEMU() error {
	if _, err := exec.LookPath(QEMU); err != nil {
		return ErrNoQEMU
	}
	return nil
}

var (
	refinedRE  = regexp.MustCompile(`Refined TSC clocksource calibration: ([0-9.]+) MHz`)
	detectedRE = regexp.MustCompile(`tsc: Detected ([0-9.]+) MHz`)
	cpuMHzRE   = regexp.MustCompile(`(?m)^cpu MHz\s*:\s*([0-9.]+)`)
)

// HostTSCkHz reads the host's TSC frequency at run time: the kernel's own calibration from
// its log (refined if it refined it), else the first CPU's MHz in /proc/cpuinfo.
func HostTSCkHz() (int, error) {
	buf := make([]byte, 1<<20)
	n, err := unix.Klogctl(unix.SYSLOG_ACTION_READ_ALL, buf)
	if err == nil {
		if k := tscFromText(string(buf[:n])); k > 0 {
			return k, nil
		}
	}
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return 0, fmt.Errorf("read host TSC frequency: %w", err)
	}
	if k := tscFromText(string(b)); k > 0 {
		return k, nil
	}
	return 0, errors.New("read host TSC frequency: not in the kernel log nor /proc/cpuinfo")
}

// tscFromText finds the TSC frequency in kHz in kernel log or cpuinfo text (0 = none).
func tscFromText(s string) int {
	for _, re := range []*regexp.Regexp{refinedRE, detectedRE, cpuMHzRE} {
		if m := re.FindAllStringSubmatch(s, -1); len(m) > 0 {
			mhz, err := strconv.ParseFloat(m[len(m)-1][1], 64)
			if err == nil && mhz > 0 {
				return int(mhz*1000 + 0.5)
			}
		}
	}
	return 0
}
