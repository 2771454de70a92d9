package cli

import (
	"strings"
	"testing"
)

// TestImagesFlagsRefused: `sfclab images` refuses what it would otherwise ignore: a runtime
// without images, and build flags the chosen runtime's images do not use. Each is refused
// before anything is built (the scratch image root stays empty); a valid call passes the check.
func TestImagesFlagsRefused(t *testing.T) {
	t.Setenv("SFCLAB_VM_IMAGES", t.TempDir())
	for _, tt := range []struct {
		args []string
		want string // "" = accepted
	}{
		{[]string{"images", "list", "--runtime", "netns"}, "only docker (the node image) and vm"},
		{[]string{"images", "build", "--runtime", "vm", "--force"}, "--force: not supported; remove the image"},
		{[]string{"images", "build", "--runtime", "vm", "--suite", "trixie"}, "--mirror and --suite are the docker node image's"},
		{[]string{"images", "build", "--lab", "x.yaml"}, "--lab, --image and --experiment choose VM guest images; add --runtime vm"},
		{[]string{"images", "build", "--experiment", "x.yaml"}, "add --runtime vm"},
		{[]string{"images", "build", "--image", "debian"}, "add --runtime vm"},
		{[]string{"images", "list", "--runtime", "vm"}, ""},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, _, errOut := run(t, tt.args...)
			if tt.want == "" {
				if code != 0 {
					t.Errorf("exit %d: %s", code, errOut)
				}
				return
			}
			if code == 0 || !strings.Contains(errOut, tt.want) {
				t.Errorf("exit %d, stderr %q; want a refusal saying %q", code, errOut, tt.want)
			}
		})
	}
}
